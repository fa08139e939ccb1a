"""Types shared by every kind: replica specs, run policy, job status (upstream ``common_types.go``)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from kubetrain.api.base import IntOrString, Time, WireModel
from kubetrain.api.progress import TrainerStatus


class RestartPolicy(StrEnum):
    ALWAYS = "Always"
    ON_FAILURE = "OnFailure"
    NEVER = "Never"
    EXIT_CODE = "ExitCode"


class CleanPodPolicy(StrEnum):
    ALL = "All"
    RUNNING = "Running"
    NONE = "None"


class ConditionType(StrEnum):
    CREATED = "Created"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUCCEEDED = "Succeeded"
    SUSPENDED = "Suspended"
    FAILED = "Failed"
    STALLED = "Stalled"
    """kubetrain extension: a running job has not reported progress for longer than it allows
    (``kubetrain.dev/progress-deadline-seconds``). Present only while that is so."""


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class ObjectMeta(WireModel):
    """The parts of ``metav1.ObjectMeta`` kubetrain reads or writes; the rest is ignored."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: Time | None = None
    deletion_timestamp: Time | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[dict[str, Any]] | None = None
    finalizers: list[str] | None = None


class ReplicaSpec(WireModel):
    replicas: int | None = None
    """Desired number of replicas of this type; defaults to 1 (MPI Worker: 0)."""
    template: dict[str, Any] = Field(default_factory=dict)
    """The pod template (a ``PodTemplateSpec``), kept as written; the fields kubetrain reads are typed."""
    restart_policy: RestartPolicy | None = None
    """Always, OnFailure, Never or ExitCode (restart on exit codes 128-255); default per kind."""


class SchedulingPolicy(WireModel):
    min_available: int | None = None
    """Gang size: the PodGroup's minMember; defaults to the sum of all replicas."""
    queue: str | None = None
    """Volcano queue of the PodGroup; immutable once set."""
    min_resources: dict[str, IntOrString] | None = None
    """The PodGroup's minResources; computed from the replicas' requests when unset."""
    priority_class: str | None = None
    """PriorityClass name of the PodGroup (Volcano)."""
    schedule_timeout_seconds: int | None = None
    """How long the scheduler-plugins PodGroup may wait to be scheduled."""


class RunPolicy(WireModel):
    clean_pod_policy: CleanPodPolicy | None = None
    """Pods to delete once the job finishes: All, Running (and Pending) or None (default)."""
    ttl_seconds_after_finished: int | None = None
    """Delete the job this many seconds after it finished; unset keeps it."""
    active_deadline_seconds: int | None = None
    """Fail the job when it has run this many seconds since its start time."""
    backoff_limit: int | None = None
    """Fail the job after this many restarts of its replicas."""
    scheduling_policy: SchedulingPolicy | None = None
    """Gang-scheduling settings for the job's PodGroup."""
    suspend: bool | None = None
    """True deletes the job's pods and holds it; false (default) creates or resumes them."""
    managed_by: str | None = None
    """The controller that reconciles the job; other controllers leave it alone. Immutable."""


class JobCondition(WireModel):
    type: ConditionType
    """Created, Running, Restarting, Succeeded, Suspended, Failed or (kubetrain) Stalled."""
    status: ConditionStatus
    reason: str | None = None
    message: str | None = None
    last_update_time: Time | None = None
    last_transition_time: Time | None = None


class ReplicaStatus(WireModel):
    active: int = 0
    """Replicas running (or pending) now."""
    succeeded: int = 0
    """Replicas that exited successfully."""
    failed: int = 0
    """Replicas that failed."""
    label_selector: dict[str, Any] | None = None
    """Deprecated upstream and never set; kept so objects round-trip."""
    selector: str | None = None
    """Label selector of this type's pods (used by the scale subresource)."""
    restarts: int = 0
    """kubetrain extension: restarts of replicas already replaced (deleted and recreated).

    Kubernetes resets a pod's ``restartCount`` when the pod is recreated, so the engine keeps the
    count of replaced replicas here; live replicas' restart counts add to it. This is what makes
    ``backoffLimit`` count ``ExitCode`` recreations (upstream issue #2045).
    """
    disruptions: int = 0
    """kubetrain extension: replicas replaced after a disruption (preemption, eviction, a lost node), which
    do not count against ``backoffLimit``; bounded by ``kubetrain.dev/disruption-limit``."""

    @model_serializer(mode="wrap")
    def _omit_zero_counters(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        # Upstream marshals the counters with omitempty; match it so status diffs stay quiet.
        return {k: v for k, v in data.items() if v != 0 or k not in _COUNTERS}


_COUNTERS = {"active", "succeeded", "failed", "restarts", "disruptions"}


class JobStatus(WireModel):
    conditions: list[JobCondition] = Field(default_factory=list)
    """The job's conditions; the last one is its current state."""
    replica_statuses: dict[str, ReplicaStatus] = Field(default_factory=dict)
    """Counts per replica type."""
    start_time: Time | None = None
    """When the job started (reset when it resumes after a suspension)."""
    completion_time: Time | None = None
    """When the job succeeded or failed."""
    last_reconcile_time: Time | None = None
    """Last time gang scheduling forced a reconcile."""
    trainer_status: TrainerStatus | None = None
    """The progress and metrics the training last reported (Kubeflow Trainer v2's ``trainerStatus``);
    empty until it reports."""

    @model_serializer(mode="wrap")
    def _omit_empty_replica_statuses(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        # Upstream writes none before it has counted a replica (a job created suspended has none).
        return {k: v for k, v in data.items() if v != {} or k not in ("replicaStatuses", "replica_statuses")}

    def condition(self, type_: ConditionType) -> JobCondition | None:
        return next((c for c in self.conditions if c.type == type_), None)

    def is_true(self, type_: ConditionType) -> bool:
        found = self.condition(type_)
        return found is not None and found.status == ConditionStatus.TRUE

    @property
    def is_finished(self) -> bool:
        return self.is_true(ConditionType.SUCCEEDED) or self.is_true(ConditionType.FAILED)
