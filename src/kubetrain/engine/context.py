"""The working state of one reconcile: the status being built, the actions so far, the next wake-up.

Every rule of the reconciler writes through this one object, so the bookkeeping that keeps a
``Decision`` sane lives in one place: a replica is deleted at most once and never while it is
already terminating, every condition change goes through the state machine and emits its event,
and ``requeue_after`` is the earliest of the wake-ups any rule asked for.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kubetrain.api.common import ConditionStatus, ConditionType, JobStatus
from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.conditions import set_condition
from kubetrain.engine.fault_policy import FaultPolicy
from kubetrain.engine.fault_policy import fault_policy as read_fault_policy
from kubetrain.engine.types import (
    Action,
    CreateReplica,
    CreateService,
    Decision,
    DeletePodGroup,
    DeleteReplica,
    DeleteService,
    EmitEvent,
    EventType,
    Observation,
    ObservedNode,
    ObservedReplica,
    Traits,
)
from kubetrain.frameworks.base import ConditionProposal, Framework, StatusEvent

if TYPE_CHECKING:
    from kubetrain.engine.diagnosis import Finding
    from kubetrain.engine.disruptions import DisruptionView

ReplicaKey = tuple[str, int]


@dataclass
class ReconcileContext:
    job: TrainingJob
    """The job being reconciled: defaulted once admission succeeded, as stored before that."""
    framework: Framework[Any]
    observation: Observation
    now: datetime
    traits: Traits
    status: JobStatus
    """A private copy of the job's status, updated in place into the new status."""
    actions: list[Action] = field(default_factory=list)
    wake_ups: list[float] = field(default_factory=list)
    _deleted_replicas: set[ReplicaKey] = field(default_factory=set)
    _deleted_services: set[ReplicaKey] = field(default_factory=set)
    _pod_group_deleted: bool = False
    admitted: bool = False
    """``job`` has been through admission (defaulted and valid)."""
    findings: tuple[Finding, ...] = ()
    """What ``engine.diagnosis`` found this round (the reconciler sets it)."""
    disruption_view: DisruptionView | None = None
    """The job's disruptions this round, once ``engine.disruptions`` has looked."""
    _fault_policy: tuple[TrainingJob, FaultPolicy] | None = None
    _lost_nodes: dict[str, ObservedNode] | None = None
    _by_key: dict[ReplicaKey, tuple[ObservedReplica, ...]] | None = None
    _notable: list[ObservedReplica] | None = None

    @classmethod
    def start(
        cls,
        job: TrainingJob,
        framework: Framework[Any],
        observation: Observation,
        now: datetime,
        traits: Traits,
    ) -> ReconcileContext:
        return cls(job, framework, observation, now, traits, job.status.model_copy(deep=True))

    @property
    def kind(self) -> str:
        return self.framework.kind

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def fault_policy(self) -> FaultPolicy:
        """The job's annotations read once a reconcile (the rules ask for each replica: 5,000 readings made
        a third of a big job's reconcile), again only if the job is replaced (by its defaulted form)."""
        if self._fault_policy is None or self._fault_policy[0] is not self.job:
            self._fault_policy = (self.job, read_fault_policy(self.job))
        return self._fault_policy[1]

    # --- observation --------------------------------------------------------------------------

    @property
    def lost_nodes(self) -> dict[str, ObservedNode]:
        """The observed nodes that stopped reporting or are out of service, by name: looked up per replica."""
        if self._lost_nodes is None:
            self._lost_nodes = {node.name: node for node in self.observation.nodes if node.lost}
        return self._lost_nodes

    @property
    def notable_replicas(self) -> list[ObservedReplica]:
        """The observed replicas that are not ``steady``, in the observation's order: the few a rule about
        anything but running replicas looks at (a running job's reconcile looks at the one that changed)."""
        if self._notable is None:
            self._notable = [replica for replica in self.observation.replicas if not replica.steady]
        return self._notable

    def observed_by_key(self) -> dict[ReplicaKey, tuple[ObservedReplica, ...]]:
        """The observed replicas by ``(type, index)``, in the observation's order (made once a reconcile)."""
        if self._by_key is None:
            replicas = self.observation.replicas
            self._by_key = {(replica.replica_type, replica.index): (replica,) for replica in replicas}
            if len(self._by_key) != len(replicas):  # two at one index (one replaced, still going): keep both
                grouped: dict[ReplicaKey, list[ObservedReplica]] = defaultdict(list)
                for replica in replicas:
                    grouped[(replica.replica_type, replica.index)].append(replica)
                self._by_key = {key: tuple(group) for key, group in grouped.items()}
        return self._by_key

    def retried_by_controller(self, replica_type: str) -> bool:
        """The replica type runs as a batch Job: its controller restarts it, a failure seen is final."""
        return self.traits.batch_jobs and self.framework.runs_as_batch_job(self.job, replica_type)

    def run_policy_carried_by_batch_job(self) -> bool:
        """backoffLimit, activeDeadlineSeconds and TTL are copied onto a batch Job (MPI v2beta1)."""
        return any(self.retried_by_controller(t) for t in self.job.replica_specs)

    def has_service(self, key: ReplicaKey) -> bool:
        return self.observation.services is not None and key in self.observation.services

    def pod_group_exists(self) -> bool:
        group = self.observation.pod_group
        return self.traits.gang_scheduler is not None and group is not None and group.exists

    # --- actions ------------------------------------------------------------------------------

    def emit(self, type_: EventType, reason: str, message: str) -> None:
        self.actions.append(EmitEvent(type_, reason, message))

    def create_replica(self, key: ReplicaKey) -> None:
        self.actions.append(CreateReplica(*key))

    def create_service(self, key: ReplicaKey) -> None:
        self.actions.append(CreateService(*key))

    def delete_replica(self, replica: ObservedReplica, reason: str, *, force: bool = False) -> bool:
        """Ask for a replica's deletion; False when it is already going (never ask twice)."""
        key = (replica.replica_type, replica.index)
        if key in self._deleted_replicas or (replica.terminating and not force):
            return False
        self._deleted_replicas.add(key)
        self.actions.append(DeleteReplica(replica.replica_type, replica.index, reason, force=force))
        return True

    def delete_service(self, key: ReplicaKey) -> None:
        if self.has_service(key) and key not in self._deleted_services:
            self._deleted_services.add(key)
            self.actions.append(DeleteService(*key))

    def delete_replica_and_service(self, replica: ObservedReplica, reason: str) -> None:
        self.delete_replica(replica, reason)
        self.delete_service((replica.replica_type, replica.index))

    def delete_everything(self, reason: str) -> None:
        """Every replica and every service of the job (suspend, backoff / deadline failure).

        A batch Job's replica stays: the Job is suspended with the job, never deleted (as upstream)."""
        for replica in self.observation.replicas:
            if not self.retried_by_controller(replica.replica_type):
                self.delete_replica(replica, reason)
        for key in sorted(self.observation.services or ()):
            self.delete_service(key)

    def delete_pod_group(self) -> None:
        if self.pod_group_exists() and not self._pod_group_deleted:
            self._pod_group_deleted = True
            self.emit(EventType.NORMAL, "JobTerminated", "Job has been terminated. Deleting PodGroup")
            self.actions.append(DeletePodGroup())

    def drop_creations(self) -> None:
        """The job finished in this reconcile: starting replicas for it now would be waste."""
        self.actions = [a for a in self.actions if not isinstance(a, CreateReplica | CreateService)]

    def wake_up_in(self, seconds: float) -> None:
        self.wake_ups.append(max(seconds, 0.0))

    # --- status -------------------------------------------------------------------------------

    def set_condition(
        self,
        type_: ConditionType,
        reason: str,
        message: str,
        value: ConditionStatus = ConditionStatus.TRUE,
        *,
        announce: EventType | None = None,
    ) -> bool:
        """Apply a condition through the state machine; a change emits an event of type ``announce`` with
        the condition's reason and message (None: no event, as upstream records none for most of its
        conditions, or records its own whether or not they change)."""
        changed = set_condition(self.status, type_, value, reason, message, self.now)
        if changed and announce is not None:
            self.emit(announce, reason, message)
        return changed

    def propose(self, proposal: ConditionProposal | StatusEvent) -> None:
        """A status rule's condition, and the event it records each time it holds (or only the event)."""
        if isinstance(proposal, StatusEvent):
            self.emit(EventType(proposal.type), proposal.reason, proposal.message)
            return
        self.set_condition(proposal.type, proposal.reason, proposal.message)
        if proposal.event is not None:
            event = proposal.event
            self.emit(
                EventType(event.type), event.reason or proposal.reason, event.message or proposal.message
            )

    def decision(self) -> Decision:
        return Decision(
            actions=tuple(self.actions),
            status=self.status,
            requeue_after=min(self.wake_ups) if self.wake_ups else None,
            admitted=self.job if self.admitted else None,
            findings=self.findings,
        )
