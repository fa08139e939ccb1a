"""What a job asks for when things go wrong: four ``kubetrain.dev`` annotations, read and checked here.

- ``kubetrain.dev/restart-scope``: ``Replica`` (the default, upstream's behaviour: a failed replica is
  restarted alone) or ``Job`` (any replica's failure stops every replica and starts them all again together,
  counted once against ``backoffLimit``: ``engine.restart_scope``);
- ``kubetrain.dev/disruption-limit``: how many disruptions (preemption, eviction, a lost node) the job's
  replicas are replaced after without counting against ``backoffLimit``; past it, a disruption is a failure
  like any other, as upstream treats every one (``engine.disruptions``). ``0`` is upstream's treatment;
- ``kubetrain.dev/node-loss-timeout-seconds``: force-delete the job's pods on a node that stopped reporting
  this long ago, so that they are replaced elsewhere (``engine.node_loss``);
- ``kubetrain.dev/scheduling-timeout-seconds``: fail the job when a pod is still not scheduled (or its image
  not pulled) this long after it was created (``engine.scheduling_timeout``).

Annotations, not fields: the CRDs stay upstream's, and a job that carries them runs unchanged (without these
behaviours) under upstream's operator.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from kubetrain.api.errors import FieldError, map_key
from kubetrain.api.jobs import TrainingJob
from kubetrain.api.validation import invalid, not_supported
from kubetrain.frameworks.base import Framework

RESTART_SCOPE_ANNOTATION = "kubetrain.dev/restart-scope"
DISRUPTION_LIMIT_ANNOTATION = "kubetrain.dev/disruption-limit"
NODE_LOSS_TIMEOUT_ANNOTATION = "kubetrain.dev/node-loss-timeout-seconds"
SCHEDULING_TIMEOUT_ANNOTATION = "kubetrain.dev/scheduling-timeout-seconds"

MIN_DISRUPTION_LIMIT = 10
"""The least default disruption limit: a small job may be disrupted this many times (a week on spot capacity
whose instances live a day or more) before its disruptions count as failures."""


class RestartScope(StrEnum):
    REPLICA = "Replica"
    """A failed replica is restarted alone (upstream's behaviour)."""
    JOB = "Job"
    """Any replica's failure restarts every replica together."""


@dataclass(frozen=True)
class FaultPolicy:
    restart_scope: RestartScope = RestartScope.REPLICA
    disruption_limit: int = MIN_DISRUPTION_LIMIT
    node_loss_timeout: int | None = None
    """Seconds; None: pods on a lost node are left to Kubernetes (the taint manager deletes them after their
    toleration, 300 s by default, and the engine force-deletes them once stuck terminating)."""
    scheduling_timeout: int | None = None
    """Seconds; None: a pod may wait to be scheduled for ever."""


def default_disruption_limit(job: TrainingJob) -> int:
    """One disruption per replica (a whole spot pool reclaimed at once), at least ``MIN_DISRUPTION_LIMIT``."""
    replicas = sum(
        1 if spec.replicas is None else max(spec.replicas, 0) for spec in job.replica_specs.values()
    )
    return max(MIN_DISRUPTION_LIMIT, replicas)


def fault_policy(job: TrainingJob) -> FaultPolicy:
    """The job's policy (its annotations were checked in admission; a bad value reads as unset)."""
    annotations = job.metadata.annotations or {}
    scope = annotations.get(RESTART_SCOPE_ANNOTATION, RestartScope.REPLICA)
    limit = _count(annotations.get(DISRUPTION_LIMIT_ANNOTATION), minimum=0)
    return FaultPolicy(
        restart_scope=RestartScope(scope) if scope in set(RestartScope) else RestartScope.REPLICA,
        disruption_limit=default_disruption_limit(job) if limit is None else limit,
        node_loss_timeout=_count(annotations.get(NODE_LOSS_TIMEOUT_ANNOTATION), minimum=1),
        scheduling_timeout=_count(annotations.get(SCHEDULING_TIMEOUT_ANNOTATION), minimum=1),
    )


def fault_policy_errors(job: TrainingJob, framework: Framework[Any]) -> list[FieldError]:
    """The four annotations' values, checked in admission."""
    annotations = job.metadata.annotations or {}
    errors: list[FieldError] = []
    scope = annotations.get(RESTART_SCOPE_ANNOTATION)
    if scope is not None and scope not in set(RestartScope):
        errors.append(not_supported(_path(RESTART_SCOPE_ANNOTATION), scope, list(RestartScope)))
    elif scope == RestartScope.JOB:
        batch = [t for t in job.replica_specs if framework.runs_as_batch_job(job, t)]
        if batch:
            errors.append(
                invalid(
                    _path(RESTART_SCOPE_ANNOTATION),
                    scope,
                    f"{framework.kind}'s {' and '.join(batch)} runs as a batch/v1 Job, whose restarts its "
                    "controller makes (spec.runPolicy.backoffLimit); remove the annotation",
                )
            )
    for name, minimum, example in (
        (DISRUPTION_LIMIT_ANNOTATION, 0, "20"),
        (NODE_LOSS_TIMEOUT_ANNOTATION, 1, "120"),
        (SCHEDULING_TIMEOUT_ANNOTATION, 1, "600"),
    ):
        value = annotations.get(name)
        if value is not None and _count(value, minimum) is None:
            least = "0 or more" if minimum == 0 else "greater than 0"
            unit = "" if name == DISRUPTION_LIMIT_ANNOTATION else " of seconds"
            errors.append(
                invalid(_path(name), value, f'must be a whole number{unit} {least}, e.g. "{example}"')
            )
    return errors


def _count(value: str | None, minimum: int) -> int | None:
    if value is None or not value.isascii() or not value.isdigit() or len(value) > 10:
        return None
    number = int(value)
    return number if number >= minimum else None


def _path(name: str) -> str:
    return f"metadata.annotations{map_key(name)}"
