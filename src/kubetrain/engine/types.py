"""The engine's inputs and outputs: plain, immutable data.

Substrates translate what they see (pods, processes) into an ``Observation``, call the engine, and
carry out the ``Decision``'s actions. They make no decisions of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from functools import cached_property
from typing import TYPE_CHECKING, Any

from kubetrain.api.common import JobStatus, RestartPolicy
from kubetrain.api.jobs import TrainingJob
from kubetrain.frameworks.base import Autoscaling

if TYPE_CHECKING:
    # diagnosis reads the observed replicas defined here; the Decision only carries its findings.
    from kubetrain.engine.diagnosis import Finding


class Phase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


@dataclass(frozen=True)
class ObservedContainer:
    """One container of a replica as the kubelet (or the local runner) reports it: what diagnosis reads."""

    name: str
    image: str = ""
    """The image reference the spec asks for."""
    image_id: str = ""
    """What the runtime resolved it to (``imageID``: the digest); empty until the container started."""
    init: bool = False
    running_since: datetime | None = None
    """When its current run started, while it runs."""
    waiting_reason: str | None = None
    """``CrashLoopBackOff``, ``ImagePullBackOff``, ``ErrImagePull``, ... while it waits."""
    waiting_message: str | None = None
    last_exit_code: int | None = None
    """Exit code of its current (terminated) or previous run."""
    last_reason: str | None = None
    """Why that run ended: ``OOMKilled``, ``Error``, ``Completed``."""
    last_message: str | None = None
    """That run's termination message (what it wrote to its ``terminationMessagePath``); usually empty."""
    last_lines: str | None = None
    """The last lines its previous run wrote (a log's tail, newline-separated), where the substrate read them:
    the kube substrate for a crash-looping container without a termination message, the local runner from
    the replica's log."""
    memory_limit: str | None = None
    """``resources.limits.memory`` as written (``4Gi``)."""
    restart_count: int = 0
    last_finished_at: datetime | None = None
    """When the run ``last_exit_code`` is of ended (``terminated.finishedAt``): which replica failed first."""

    @cached_property
    def steady(self) -> bool:
        """On its first try, never ended, restarted or held waiting for a reason; an init container that is
        not running (one that runs beside the others, or that a worker waits for its master in, is looked at)
        (see ``ObservedReplica.steady``)."""
        return (
            not (self.init and self.running_since is not None)
            and self.restart_count == 0
            and self.waiting_reason is None
            and self.last_exit_code is None
            and self.last_reason is None
            and self.last_message is None
            and self.last_lines is None
        )


@dataclass(frozen=True)
class Disruption:
    """Why a replica is ending through no fault of its own: a pod's ``DisruptionTarget`` condition
    (preemption by the scheduler, the Eviction API, the taint manager, the kubelet's node-pressure eviction or
    graceful node shutdown, the pod garbage collector), or the engine's own force-deletion of a pod on a lost
    node."""

    reason: str
    """``PreemptionByScheduler``, ``EvictionByEvictionAPI``, ``DeletionByTaintManager``,
    ``TerminationByKubelet``, ``DeletionByPodGC``; the engine's ``NodeLost`` and ``NodeOutOfService``."""
    message: str = ""


@dataclass(frozen=True)
class ObservedReplica:
    """One replica as the substrate sees it (a pod, or a local process)."""

    replica_type: str
    """Canonical CamelCase type (``Master``, ``Worker``, ``PS``)."""
    index: int
    phase: Phase
    exit_code: int | None = None
    """Exit code of the framework's default container once it terminated; -N signals are 128+N."""
    restart_count: int = 0
    """In-place restarts (kubelet's ``restartCount`` summed over containers, or the local runner's)."""
    terminating: bool = False
    """Deletion requested but not finished (``metadata.deletionTimestamp`` set)."""
    deletion_timestamp: datetime | None = None
    """When a terminating replica should be gone (``metadata.deletionTimestamp``: request time plus
    grace period). A replica still there well after it is stuck (lost node) and is force-deleted."""
    ready: bool = False
    reason: str | None = None
    """Pod ``status.reason`` such as ``Evicted``."""
    message: str | None = None
    """Why it failed, when its controller says (a batch Job's ``Failed`` condition message)."""
    retried_failures: int = 0
    """Failed attempts its controller already replaced (a batch Job's ``status.failed`` before it gave
    up); counted in the replica type's ``failed`` as mpi-operator reports them."""
    warnings: tuple[tuple[str, str], ...] = ()
    """``(reason, detail)`` for each abnormal sign the kubelet reports of the pod (a container that
    exited non-zero, one waiting with a message, a latest condition not True); the detail names the
    container, not the pod. Empty where the substrate has no such reports (local)."""
    containers: tuple[ObservedContainer, ...] = ()
    """Its containers (init containers first, less those that completed at their first try), where the
    substrate reports them."""
    unschedulable: str | None = None
    """The scheduler's reason while it cannot be placed (``0/4 nodes are available: 4 Insufficient
    nvidia.com/gpu``): the pod's ``PodScheduled`` condition is False with reason ``Unschedulable``."""
    ready_since: datetime | None = None
    """When it last became Ready, while it is."""
    placed: bool = False
    """Bound to a node (a pod's ``spec.nodeName``): it runs, or starts there (its init containers)."""
    gang_scheduled: bool = False
    """It belongs to a PodGroup and goes to a scheduler other than the default one (Volcano,
    scheduler-plugins' coscheduling), which places the group's pods all or none."""
    disruption: Disruption | None = None
    """Its ``DisruptionTarget`` condition, while True: it is being ended by a disruption, not by a failure."""
    created_at: datetime | None = None
    """When it was created (a pod's ``creationTimestamp``, a process's first start)."""
    node: str | None = None
    """The node it is bound to (``spec.nodeName``); None where the substrate has no nodes."""

    @cached_property
    def steady(self) -> bool:
        """Running as it was started, with nothing any rule finds in it but that it is active: not
        terminating, never restarted, ended, warned about, unschedulable or disrupted, every container
        ``steady``.

        The rules look at the others only; what they still read of a steady replica (its node, when a node is
        lost; its images' digests; whether it is Ready, of a master) they read where they need it. A function
        of its fields alone, never of the time, the job or the other replicas, so computed once per object and
        kept on it (the observation is frozen): a big job's unchanged pods are the same objects from one
        reconcile to the next, so each reconcile classifies only the replicas that changed."""
        return (
            self.phase is Phase.RUNNING
            and not self.terminating
            and self.deletion_timestamp is None
            and self.exit_code is None
            and self.restart_count == 0
            and self.retried_failures == 0
            and self.reason is None
            and self.message is None
            and not self.warnings
            and self.unschedulable is None
            and self.disruption is None
            and all(container.steady for container in self.containers)
        )

    @cached_property
    def started_images(self) -> frozenset[tuple[str, str]]:
        """``(image, imageID)`` of each of its own (not init) containers that started: which build it runs."""
        return frozenset((c.image, c.image_id) for c in self.containers if not c.init and c.image_id)


@dataclass(frozen=True)
class ObservedNode:
    """A node the job's pods are on, as far as losing it goes: its ``Ready`` condition and whether it is
    tainted ``node.kubernetes.io/out-of-service`` (declared down by its administrator)."""

    name: str
    ready: str = "True"
    """The ``Ready`` condition's status: ``True``, ``False`` (the kubelet says it is not ready) or ``Unknown``
    (the node controller heard nothing from its kubelet for the node-monitor grace period)."""
    since: datetime | None = None
    """When ``Ready`` last changed (its ``lastTransitionTime``)."""
    reason: str | None = None
    """``Ready``'s reason (``NodeStatusUnknown``, ``KubeletNotReady``)."""
    message: str | None = None
    out_of_service: bool = False

    @property
    def lost(self) -> bool:
        return self.ready != "True" or self.out_of_service


@dataclass(frozen=True)
class PodGroupState:
    exists: bool
    phase: str | None = None
    """Volcano's ``status.phase``; pods wait while it is empty or ``Pending``."""


@dataclass(frozen=True)
class Observation:
    replicas: tuple[ObservedReplica, ...] = ()
    services: frozenset[tuple[str, int]] | None = None
    """Existing per-replica services; ``None`` when the substrate has no services (local)."""
    pod_group: PodGroupState | None = None
    """``None`` when gang scheduling is off."""
    autoscaler: bool | None = None
    """Whether the job's HorizontalPodAutoscaler exists; ``None`` when the substrate has none (local)."""
    nodes: tuple[ObservedNode, ...] = ()
    """The nodes the job's replicas are bound to, where the substrate has nodes (empty locally)."""
    departed: tuple[ObservedReplica, ...] = ()
    """Disrupted replicas gone since the last reconcile, as last seen (the kube substrate keeps the last state
    of each pod with a ``DisruptionTarget`` condition, or on a lost node, that its watch saw deleted, until a
    reconcile has counted it): what counts a disruption exactly once, when it is over."""


DEFAULT_MAX_REPLICAS_PER_TYPE = 5_000
"""One pod per node of the largest cluster Kubernetes supports (5,000 nodes): a replica type larger
than that cannot be scheduled at once anywhere, and the biggest real training jobs (tens of thousands
of GPUs at 8 per pod) stay well under it."""

DEFAULT_MAX_REPLICAS_PER_JOB = 10_000
"""Two pods per node of the largest supported cluster, across all of a job's replica types (PS and
Workers, or a Launcher and Workers); far under Kubernetes' 150,000 pods per cluster."""


@dataclass(frozen=True)
class ReplicaLimits:
    """How many replicas one job may ask for; checked in admission, before anything per replica exists."""

    per_type: int = DEFAULT_MAX_REPLICAS_PER_TYPE
    per_job: int = DEFAULT_MAX_REPLICAS_PER_JOB


CLUSTER_CEILING = ReplicaLimits(per_type=150_000, per_job=150_000)
"""What no cluster can run, whatever an operator's limits: Kubernetes' 150,000 pods per cluster. For
clients that cannot know the operator's configured limits (``submit``, the SDK); the CRDs'
``maximum`` on a replica count is the same number."""


@dataclass(frozen=True)
class Traits:
    """What the substrate can do, so one engine serves both."""

    colocated: bool
    """Every replica on one host (local): frameworks may materialise fewer replicas."""
    gang_scheduler: str | None = None
    """``volcano``, a scheduler-plugins scheduler name, or None."""
    batch_jobs: bool = False
    """Replica types a framework ``runs_as_batch_job`` are ``batch/v1`` Jobs here (Kubernetes): their
    restarts, backoffLimit, deadline and TTL are the Job controller's, not the engine's."""
    limits: ReplicaLimits = ReplicaLimits()
    """The operator's (or the local runner's) replica limits."""


# --- actions ---------------------------------------------------------------------------------


class EventType(StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass(frozen=True)
class CreateReplica:
    replica_type: str
    index: int


@dataclass(frozen=True)
class DeleteReplica:
    replica_type: str
    index: int
    reason: str
    """Why: ``restart``, ``job-restart`` (every replica restarted together: restart scope Job),
    ``disruption``, ``node-lost``, ``scale-down``, ``clean-pod-policy``, ``suspend``, ``failed``,
    ``stuck``."""
    force: bool = False
    """Delete without waiting for the replica to stop (grace period 0): it is stuck terminating."""


@dataclass(frozen=True)
class CreateService:
    replica_type: str
    index: int


@dataclass(frozen=True)
class DeleteService:
    replica_type: str
    index: int


@dataclass(frozen=True)
class SyncPodGroup:
    min_member: int


@dataclass(frozen=True)
class DeletePodGroup:
    """The job finished, was suspended or exceeded its limits: its PodGroup goes."""


@dataclass(frozen=True)
class SyncAutoscaler:
    """Create the job's HPA, or update it to ``spec`` (elastic PyTorch, §4.10)."""

    spec: Autoscaling


@dataclass(frozen=True)
class DeleteAutoscaler:
    """Remove the job's HPA (it is suspended)."""


@dataclass(frozen=True)
class DeleteJob:
    """TTL after finishing has passed: delete the job object (children are garbage-collected)."""


@dataclass(frozen=True)
class EmitEvent:
    type: EventType
    reason: str
    message: str


Action = (
    CreateReplica
    | DeleteReplica
    | CreateService
    | DeleteService
    | SyncPodGroup
    | DeletePodGroup
    | SyncAutoscaler
    | DeleteAutoscaler
    | DeleteJob
    | EmitEvent
)


@dataclass(frozen=True)
class Decision:
    actions: tuple[Action, ...] = ()
    status: JobStatus = field(default_factory=JobStatus)
    requeue_after: float | None = None
    """Seconds until the engine must look again (deadline, TTL) even if nothing changes."""
    admitted: TrainingJob | None = None
    """The job defaulted and validated, what its children are planned from; None when admission failed
    or another controller manages the job."""
    findings: tuple[Finding, ...] = ()
    """The failure modes the job shows now (``engine.diagnosis``): the substrates turn each into a Warning
    event, on every reconcile while it holds."""


@dataclass(frozen=True)
class ReplicaPlan:
    """Everything both substrates need to start one replica, decided once by the engine.

    ``template`` is the replica's pod template after injection: labels added, the framework's env
    appended to the targeted containers, ``spec.restartPolicy`` set from the replica policy
    (``ExitCode`` becomes ``Never``). The kube substrate turns it into a Pod (adding namespace,
    ownerReference, init containers, gang-scheduling decoration); the local substrate runs
    ``main_container``'s command with that container's env.
    """

    name: str
    """``<job>-<type>-<index>``: pod name, service name, local log prefix."""
    replica_type: str
    index: int
    labels: dict[str, str]
    restart_policy: RestartPolicy
    """The replica-level policy (``ExitCode`` kept as such; the pod template says ``Never``)."""
    main_container: str
    """Name of the framework's default container, or the first container's name."""
    template: dict[str, Any]
    template_restart_policy_overridden: bool = False
    """The user's template set its own ``restartPolicy`` (upstream warns with an event)."""
