"""What the non-MPI kubeflow.org/v1 kinds share: defaulting, webhook-style validation, ports, counts.

PyTorch, TF, XGBoost, Paddle, JAX and MXNet differ only in names, numbers and a few extra rules,
which their modules add through the ``_kind_defaults`` / ``_kind_errors`` hooks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from kubetrain.api.common import CleanPodPolicy, ConditionType, ReplicaSpec, RestartPolicy
from kubetrain.api.defaults import (
    default_replica_spec,
    normalise_replica_keys,
    template_containers,
    with_default_clean_pod_policy,
)
from kubetrain.api.errors import FieldError
from kubetrain.api.jobs import TrainingJob
from kubetrain.api.validation import (
    containers_errors,
    derived_name_errors,
    job_name_errors,
    managed_by_errors,
    replica_keys_errors,
    required,
)
from kubetrain.frameworks.addressing import replica_name
from kubetrain.frameworks.base import Announcement, ConditionProposal, EnvVar, Framework, JobT, StatusContext

V1_MANAGED_BY = ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue")
"""``runPolicy.managedBy`` values the training operator accepts (the first one means "reconcile")."""


def env(name: str, value: str | int) -> EnvVar:
    return {"name": name, "value": str(value)}


def replicas_of(job: TrainingJob, replica_type: str) -> int:
    spec = job.replica_specs.get(replica_type)
    return 0 if spec is None else (spec.replicas if spec.replicas is not None else 1)


def total_replicas(job: TrainingJob, replica_types: Iterable[str] | None = None) -> int:
    types = job.replica_specs if replica_types is None else replica_types
    return sum(replicas_of(job, t) for t in types)


def declared_port(spec: ReplicaSpec | None, container_name: str, port_name: str) -> int | None:
    """The ``containerPort`` of the port named ``port_name`` on the container named ``container_name``."""
    if spec is None:
        return None
    for container in template_containers(spec.template):
        if container.get("name") != container_name:
            continue
        for port in container.get("ports") or []:
            if isinstance(port, dict) and port.get("name") == port_name and "containerPort" in port:
                return int(port["containerPort"])
    return None


@dataclass(frozen=True)
class ReplicaCounts:
    """One replica type's numbers as upstream's ``UpdateJobStatus`` reads them."""

    replicas: int
    succeeded: int
    running: int
    failed: int
    restart_policy: RestartPolicy | None

    @property
    def expected(self) -> int:
        return self.replicas - self.succeeded


def counts(context: StatusContext, replica_type: str) -> ReplicaCounts:
    status = context.replica_statuses.get(replica_type)
    spec = context.job.replica_specs.get(replica_type)
    return ReplicaCounts(
        replicas=replicas_of(context.job, replica_type),
        succeeded=status.succeeded if status else 0,
        running=status.active if status else 0,
        failed=status.failed if status else 0,
        restart_policy=spec.restart_policy if spec else None,
    )


RECORDED: dict[ConditionType, Announcement] = {
    ConditionType.SUCCEEDED: Announcement("Normal"),
    ConditionType.FAILED: Announcement("Normal"),
    ConditionType.RESTARTING: Announcement("Warning"),
}
"""The events upstream's status updates record with their conditions (``Running`` has none; ``Failed`` is
a Normal event there)."""


def proposal(kind: str, type_: ConditionType, message: str) -> ConditionProposal:
    """A condition with upstream's ``<Kind><Type>`` reason (``PyTorchJobRunning``) and its event."""
    return ConditionProposal(type_, f"{kind}{type_.value}", message, RECORDED.get(type_))


def deciding_replica_rule(
    kind: str, job: TrainingJob, counted: ReplicaCounts
) -> tuple[list[ConditionProposal], bool]:
    """The replica that decides the job (Master, MXNet's Scheduler): running → Running; all of it
    done → Succeeded. The flag says the job succeeded, so no other rule is evaluated after it."""
    found = []
    if counted.running > 0:
        found.append(proposal(kind, ConditionType.RUNNING, f"{kind} {job.name} is running."))
    if counted.expected == 0:
        message = f"{kind} {job.name} is successfully completed."
        return [*found, proposal(kind, ConditionType.SUCCEEDED, message)], True
    return found, False


def all_workers_rule(
    kind: str, job: TrainingJob, counted: ReplicaCounts, *, any_success_suffices: bool = False
) -> list[ConditionProposal]:
    """A job without a master: every Worker succeeded (elastic PyTorch: any) → Succeeded; else
    Workers running → Running. Upstream words these with ``<ns>/<name>``."""
    full_name = f"{job.namespace}/{job.name}"
    if counted.expected == 0 or (any_success_suffices and counted.succeeded > 0):
        return [proposal(kind, ConditionType.SUCCEEDED, f"{kind} {full_name} successfully completed.")]
    if counted.running > 0:
        return [proposal(kind, ConditionType.RUNNING, f"{kind} {full_name} is running.")]
    return []


class StandardFramework(Framework[JobT]):
    """A kubeflow.org/v1 kind with per-replica services and the common defaulting of §1.3."""

    default_container: ClassVar[str]
    default_port_name: ClassVar[str]
    default_port: ClassVar[int]
    normalised_replica_types: ClassVar[tuple[str, ...] | None] = None
    """Types whose keys defaulting re-cases (all ``replica_types`` unless a kind says otherwise)."""
    supported_replica_keys: ClassVar[tuple[str, ...] | None] = None
    """The keys validation accepts; ``None`` when the kind does not whitelist them (TFJob)."""
    managed_by_values: ClassVar[tuple[str, ...]] = V1_MANAGED_BY

    # --- defaulting ---------------------------------------------------------------------------

    def set_defaults(self, job: JobT) -> JobT:
        specs = normalise_replica_keys(job.replica_specs, self.normalised_replica_types or self.replica_types)
        defaulted = {
            replica_type: default_replica_spec(
                spec,
                replicas=1,
                restart_policy=self.default_restart_policy,
                container_name=self.default_container,
                port_name=self.default_port_name,
                port=self.default_port,
            )
            for replica_type, spec in specs.items()
        }
        run_policy = with_default_clean_pod_policy(job.run_policy, CleanPodPolicy.NONE)
        return self._kind_defaults(job.with_replica_specs(defaulted).with_run_policy(run_policy))

    def _kind_defaults(self, job: JobT) -> JobT:
        return job

    # --- validation ---------------------------------------------------------------------------

    def validate(self, job: JobT) -> list[FieldError]:
        """The webhook's rules, run on the defaulted job.

        Deliberate difference: upstream validates the un-defaulted object, so for example a
        PyTorch ``Master`` without ``replicas`` is rejected there; here it has defaulted to 1.
        """
        path = job.replica_specs_path
        errors = job_name_errors(job.name)
        errors += managed_by_errors(job.run_policy, self.managed_by_values)
        if not job.replica_specs:
            errors.append(required(path, "must have at least one replica spec"))
        if self.supported_replica_keys is not None:
            errors += replica_keys_errors(path, job.replica_specs, self.supported_replica_keys)
        for replica_type, spec in job.replica_specs.items():
            errors += containers_errors(f"{path}.{replica_type}", spec, self.default_container)
        errors += self._kind_errors(job, path)
        errors += derived_name_errors(job.name, self.derived_names(job))
        return errors

    def _kind_errors(self, job: JobT, specs_path: str) -> list[FieldError]:
        return []

    def derived_names(self, job: JobT) -> list[str]:
        """The longest pod/service name of each replica type (``<job>-<type>-<replicas-1>``)."""
        return [
            replica_name(job.name, replica_type, replicas_of(job, replica_type) - 1)
            for replica_type in job.replica_specs
            if replicas_of(job, replica_type) > 0
        ]

    # --- ports --------------------------------------------------------------------------------

    def container_port(self, job: JobT, replica_type: str) -> int:
        """The default container's declared port of the default name; the kind's number if absent.

        Upstream errors for some kinds when the port is missing; after defaulting it is always
        declared on a job that passed validation, so the fallback only serves hand-built jobs.
        """
        found = declared_port(
            job.replica_specs.get(replica_type), self.default_container, self.default_port_name
        )
        return self.default_port if found is None else found


def restart_or_fail_when_replicas_lack(
    kind: str, context: StatusContext, replica_type: str, counted: ReplicaCounts
) -> list[ConditionProposal]:
    """PyTorch/Paddle/JAX: failed replicas that running or succeeded ones do not make up for.

    ``Restarting`` unless the type's restart policy is ``Never``, then ``Failed``.
    """
    if counted.failed <= 0 or counted.replicas <= counted.succeeded + counted.running:
        return []
    name = context.job.name
    if counted.restart_policy != RestartPolicy.NEVER:
        message = f"{kind} {name} is restarting because {counted.failed} {replica_type} replica(s) failed."
        return [proposal(kind, ConditionType.RESTARTING, message)]
    message = f"{kind} {name} is failed because {counted.failed} {replica_type} replica(s) failed."
    return [proposal(kind, ConditionType.FAILED, message)]


def restart_only_on_exit_code(
    kind: str,
    context: StatusContext,
    replica_type: str,
    counted: ReplicaCounts,
    failed_reason: str | None = None,
) -> list[ConditionProposal]:
    """XGBoost/MXNet/MPI v1: any failed replica fails the job unless its policy is ``ExitCode``."""
    if counted.failed <= 0:
        return []
    name = context.job.name
    if counted.restart_policy == RestartPolicy.EXIT_CODE:
        message = f"{kind} {name} is restarting because {counted.failed} {replica_type} replica(s) failed."
        return [proposal(kind, ConditionType.RESTARTING, message)]
    message = f"{kind} {name} is failed because {counted.failed} {replica_type} replica(s) failed."
    # MPI v1's condition reason doubles its prefix; its event's does not.
    event = Announcement("Normal", reason=f"{kind}Failed")
    return [ConditionProposal(ConditionType.FAILED, failed_reason or f"{kind}Failed", message, event)]
