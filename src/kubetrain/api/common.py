"""Types shared by every kind: replica specs, run policy, job status (upstream ``common_types.go``)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from kubetrain.api.base import IntOrString, Time, WireModel


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
    template: dict[str, Any] = Field(default_factory=dict)
    """A ``PodTemplateSpec``, kept as the user wrote it (validated by the frameworks)."""
    restart_policy: RestartPolicy | None = None


class SchedulingPolicy(WireModel):
    min_available: int | None = None
    queue: str | None = None
    min_resources: dict[str, IntOrString] | None = None
    priority_class: str | None = None
    schedule_timeout_seconds: int | None = None


class RunPolicy(WireModel):
    clean_pod_policy: CleanPodPolicy | None = None
    ttl_seconds_after_finished: int | None = None
    active_deadline_seconds: int | None = None
    backoff_limit: int | None = None
    scheduling_policy: SchedulingPolicy | None = None
    suspend: bool | None = None
    managed_by: str | None = None


class JobCondition(WireModel):
    type: ConditionType
    status: ConditionStatus
    reason: str | None = None
    message: str | None = None
    last_update_time: Time | None = None
    last_transition_time: Time | None = None


class ReplicaStatus(WireModel):
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    label_selector: dict[str, Any] | None = None
    """Deprecated upstream and never set; kept so objects round-trip."""
    selector: str | None = None
    restarts: int = 0
    """kubetrain extension: restarts of replicas already replaced (deleted and recreated).

    Kubernetes resets a pod's ``restartCount`` when the pod is recreated, so the engine keeps the
    count of replaced replicas here; live replicas' restart counts add to it. This is what makes
    ``backoffLimit`` count ``ExitCode`` recreations (upstream issue #2045).
    """

    @model_serializer(mode="wrap")
    def _omit_zero_counters(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        # Upstream marshals the counters with omitempty; match it so status diffs stay quiet.
        return {k: v for k, v in data.items() if v != 0 or k not in _COUNTERS}


_COUNTERS = {"active", "succeeded", "failed", "restarts"}


class JobStatus(WireModel):
    conditions: list[JobCondition] = Field(default_factory=list)
    replica_statuses: dict[str, ReplicaStatus] = Field(default_factory=dict)
    start_time: Time | None = None
    completion_time: Time | None = None
    last_reconcile_time: Time | None = None

    def condition(self, type_: ConditionType) -> JobCondition | None:
        return next((c for c in self.conditions if c.type == type_), None)

    def is_true(self, type_: ConditionType) -> bool:
        found = self.condition(type_)
        return found is not None and found.status == ConditionStatus.TRUE

    @property
    def is_finished(self) -> bool:
        return self.is_true(ConditionType.SUCCEEDED) or self.is_true(ConditionType.FAILED)
