"""``reconcile_trainjob``: one TrainJob, what is observed of its runtime and JobSet, and the time in; what to
apply, what to delete, and its new status out.

The steps are Trainer v2.3.0's TrainJob reconcile (``pkg/controller/trainjob_controller.go``):

1. ``spec.managedBy`` names another controller (MultiKueue) → nothing at all;
2. a ``Failed`` condition is dropped (it is read again from the JobSet), unless the deadline set it;
3. a runtime reference to no kind Trainer serves → ``Failed``, ``TrainingRuntimeNotSupported``;
4. an unfinished job gets its objects planned from its runtime snapshot (made on first sight) and applied;
   a plan that fails is a Warning event ``TrainJobResourcesCreationFailed`` and a retry;
5. ``Suspended`` follows ``spec.suspend`` (``Resumed`` when it turns false);
6. ``Complete`` / ``Failed`` and ``jobsStatus`` are copied from the JobSet;
7. ``activeDeadlineSeconds`` past (from creation, or the last resume) → ``Failed``, ``DeadlineExceeded``, and
   the JobSet deleted; before it, a wake-up at the deadline.

kubetrain has no admission webhook: what Trainer's webhook refuses (reserved env, a runtime patch naming a
container the runtime lacks, ...) fails the TrainJob here, reason ``InvalidSpec``, naming the field — final,
like the deadline, since nothing but a new TrainJob can change an immutable spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from kubetrain.api.errors import InvalidJobError
from kubetrain.api.trainer import (
    TRAINJOB_CONTROLLER,
    Condition,
    TrainingRuntime,
    TrainJob,
    TrainJobConditionType,
    TrainJobStatus,
)
from kubetrain.engine.trainjob_plan import (
    plan,
    runtime_from_snapshot,
    snapshot_configmap,
    unsupported_runtime,
)
from kubetrain.engine.types import EmitEvent, EventType
from kubetrain.frameworks.trainer.constants import (
    DEADLINE_EXCEEDED_MESSAGE,
    DEADLINE_EXCEEDED_REASON,
    RESOURCES_CREATION_FAILED_REASON,
    RESUMED_MESSAGE,
    RESUMED_REASON,
    RUNTIME_NOT_SUPPORTED_REASON,
    SUSPENDED_MESSAGE,
    SUSPENDED_REASON,
)
from kubetrain.frameworks.trainer.info import Obj
from kubetrain.frameworks.trainer.jobset import finished_conditions, jobs_status
from kubetrain.frameworks.trainer.plugin import Addressing, Existing, RuntimePlugin

INVALID_SPEC_REASON = "InvalidSpec"
MAX_EVENT_DETAIL = 950
"""Trainer cuts the error it quotes in ``TrainJobResourcesCreationFailed`` at 950 characters."""
STICKY_FAILURES = (DEADLINE_EXCEEDED_REASON, INVALID_SPEC_REASON)


@dataclass(frozen=True)
class TrainJobObservation:
    """What the substrate holds of a TrainJob's runtime and children."""

    runtime: Mapping[str, Any] | None = None
    """The runtime the TrainJob names, as stored; None when there is none."""
    snapshot: Mapping[str, Any] | None = None
    """The TrainJob's ``<name>-runtime-snapshot`` ConfigMap; None before its first plan."""
    jobset: Mapping[str, Any] | None = None
    pod_group: bool = False
    ssh_secret: bool = False


@dataclass(frozen=True)
class TrainJobDecision:
    apply: tuple[Obj, ...] = ()
    """Objects to server-side apply (field manager ``trainer``, forcing ownership), in order."""
    delete_jobset: bool = False
    status: TrainJobStatus = field(default_factory=TrainJobStatus)
    events: tuple[EmitEvent, ...] = ()
    requeue_after: float | None = None
    retry: str | None = None
    """Why this reconcile should be retried with backoff (the runtime is missing, a snapshot is unusable)."""


def is_managed_here(trainjob: TrainJob) -> bool:
    return trainjob.spec.managed_by in (None, "", TRAINJOB_CONTROLLER)


def reconcile_trainjob(
    trainjob: TrainJob,
    observation: TrainJobObservation,
    now: datetime,
    *,
    addressing: Addressing | None = None,
    plugins: tuple[RuntimePlugin, ...] | None = None,
) -> TrainJobDecision:
    if not is_managed_here(trainjob):
        return TrainJobDecision(status=trainjob.status)
    status = trainjob.status.model_copy(deep=True)
    failed = status.condition(TrainJobConditionType.FAILED)
    if failed is not None and failed.reason not in STICKY_FAILURES:
        status.conditions = [c for c in status.conditions or [] if c is not failed]
    finished = status.is_finished

    apply: list[Obj] = []
    events: list[EmitEvent] = []
    retry: str | None = None
    unsupported = unsupported_runtime(trainjob)
    if unsupported is not None:
        # Trainer retries this forever; nothing but a new TrainJob can change an immutable runtimeRef.
        set_condition(
            status, TrainJobConditionType.FAILED, "True", RUNTIME_NOT_SUPPORTED_REASON, unsupported, now
        )
    elif not finished and not _deadline_passed(trainjob, status, now):
        # Past its deadline nothing is applied (Trainer applies the JobSet, then deletes it at once).
        try:
            apply = _objects(trainjob, observation, addressing, plugins)
        except InvalidJobError as error:
            message = f"TrainJob {trainjob.name} has an invalid spec: {error}"
            set_condition(status, TrainJobConditionType.FAILED, "True", INVALID_SPEC_REASON, message, now)
            events.append(EmitEvent(EventType.WARNING, INVALID_SPEC_REASON, message))
        except _PlanError as error:
            detail = str(error)
            message = f"TrainJob resources reconciliation failed: {detail[:MAX_EVENT_DETAIL]}"
            if len(detail) > MAX_EVENT_DETAIL:
                message += " ..."
            events.append(EmitEvent(EventType.WARNING, RESOURCES_CREATION_FAILED_REASON, message))
            retry = detail

    _set_suspended(trainjob, status, now)
    if observation.jobset is not None:
        for condition in finished_conditions(observation.jobset):
            set_condition(
                status, condition.type, condition.status, condition.reason, condition.message, now, condition
            )
        status.jobs_status = jobs_status(observation.jobset) or None
    delete_jobset, requeue_after = _deadline(trainjob, status, now)
    return TrainJobDecision(
        apply=tuple(apply),
        delete_jobset=delete_jobset,
        status=status,
        events=tuple(events),
        requeue_after=requeue_after,
        retry=retry,
    )


class _PlanError(Exception):
    """The objects could not be planned now (a missing runtime, an unusable snapshot): retried."""


def _objects(
    trainjob: TrainJob,
    observation: TrainJobObservation,
    addressing: Addressing | None,
    plugins: tuple[RuntimePlugin, ...] | None,
) -> list[Obj]:
    objects: list[Obj] = []
    if observation.snapshot is not None:
        try:
            runtime = runtime_from_snapshot(trainjob, observation.snapshot)
        except ValueError as error:
            raise _PlanError(f"getting runtime snapshot: {error}") from None
    elif observation.runtime is None:
        kind = trainjob.spec.runtime_ref.kind or "ClusterTrainingRuntime"
        raise _PlanError(
            f"{kind} specified in TrainJob is not found: {kind.lower()}s.trainer.kubeflow.org "
            f'"{trainjob.spec.runtime_ref.name}" not found'
        )
    else:
        runtime = TrainingRuntime.model_validate(observation.runtime)
        objects.append(snapshot_configmap(trainjob, observation.runtime))
    existing = Existing(
        jobset_suspended=_suspended(observation.jobset),
        jobset_volume_claim_policies=_volume_claim_policies(observation.jobset),
        pod_group=observation.pod_group,
        ssh_secret=observation.ssh_secret,
    )
    planned = plan(trainjob, runtime.spec, existing=existing, addressing=addressing, plugins=plugins)
    return [*objects, *planned.objects]


def _volume_claim_policies(jobset: Mapping[str, Any] | None) -> tuple[Obj, ...] | None:
    policies = ((jobset or {}).get("spec") or {}).get("volumeClaimPolicies")
    return tuple(policies) if policies else None


def _suspended(jobset: Mapping[str, Any] | None) -> bool | None:
    if jobset is None:
        return None
    return bool((jobset.get("spec") or {}).get("suspend"))


def _set_suspended(trainjob: TrainJob, status: TrainJobStatus, now: datetime) -> None:
    if trainjob.spec.suspend:
        set_condition(
            status, TrainJobConditionType.SUSPENDED, "True", SUSPENDED_REASON, SUSPENDED_MESSAGE, now
        )
    elif status.is_true(TrainJobConditionType.SUSPENDED):
        set_condition(status, TrainJobConditionType.SUSPENDED, "False", RESUMED_REASON, RESUMED_MESSAGE, now)


def _deadline_at(trainjob: TrainJob, status: TrainJobStatus) -> datetime | None:
    """When the active deadline falls: from creation, or from the last resume; None without one."""
    seconds = trainjob.spec.active_deadline_seconds
    if not seconds or status.is_finished or trainjob.spec.suspend:
        return None
    start = trainjob.metadata.creation_timestamp
    suspended = status.condition(TrainJobConditionType.SUSPENDED)
    if suspended is not None and suspended.status == "False" and suspended.last_transition_time is not None:
        start = suspended.last_transition_time
    return start + timedelta(seconds=seconds) if start is not None else None


def _deadline_passed(trainjob: TrainJob, status: TrainJobStatus, now: datetime) -> bool:
    deadline = _deadline_at(trainjob, status)
    return deadline is not None and now > deadline


def _deadline(trainjob: TrainJob, status: TrainJobStatus, now: datetime) -> tuple[bool, float | None]:
    """Whether the JobSet goes because the deadline passed, or when to look again for it."""
    deadline = _deadline_at(trainjob, status)
    if deadline is None:
        return False, None
    if now > deadline:
        set_condition(
            status,
            TrainJobConditionType.FAILED,
            "True",
            DEADLINE_EXCEEDED_REASON,
            DEADLINE_EXCEEDED_MESSAGE,
            now,
        )
        return True, None
    return False, max((deadline - now).total_seconds(), 1.0)


def set_condition(
    status: TrainJobStatus,
    type_: str,
    value: str,
    reason: str,
    message: str,
    now: datetime,
    source: Condition | None = None,
) -> None:
    """Kubernetes' ``meta.SetStatusCondition``: the transition time moves only when the status changes (to
    ``source``'s when it carries one, else now); reason and message always follow."""
    conditions = status.conditions or []
    found = next((c for c in conditions if c.type == type_), None)
    transition = (source.last_transition_time if source else None) or now
    if found is None:
        conditions.append(
            Condition(
                type=type_,
                status=value,
                reason=reason,
                message=message,
                last_transition_time=transition,
                observed_generation=source.observed_generation if source else None,
            )
        )
    else:
        if found.status != value:
            found.status = value
            found.last_transition_time = transition
        found.reason, found.message = reason, message
        if source is not None and source.observed_generation is not None:
            found.observed_generation = source.observed_generation
    status.conditions = conditions
