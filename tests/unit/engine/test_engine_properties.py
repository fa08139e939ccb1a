"""Engine invariants over random event sequences, driven through a simulated substrate.

Each example builds a random job (restart policy, replica counts, backoff, deadline, TTL,
cleanPodPolicy), then feeds ``reconcile`` a random sequence of what happens to replicas (phase
changes, exits with chosen codes, in-place restarts, deletions completing), suspend flips and time
passing. Every Decision's actions are applied to the simulated substrate before the next event.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from kubetrain.api.common import CleanPodPolicy, ConditionType, JobStatus, RestartPolicy, RunPolicy
from kubetrain.engine.types import (
    CreateReplica,
    CreateService,
    Decision,
    DeleteJob,
    DeletePodGroup,
    DeleteReplica,
    DeleteService,
    Observation,
    ObservedReplica,
    Phase,
    PodGroupState,
    SyncPodGroup,
    Traits,
)

from .fakes import NOW, ToyJob, toy_job
from .support import KUBE, LOCAL, decide

Key = tuple[str, int]
VOLCANO = Traits(colocated=False, gang_scheduler="volcano")
SCHEDULER_PLUGINS = Traits(colocated=False, gang_scheduler="scheduler-plugins-scheduler")


@dataclass
class Substrate:
    """Replicas and services as a substrate would hold them, changed only by actions and events."""

    traits: Traits
    replicas: dict[Key, ObservedReplica] = field(default_factory=dict)
    services: set[Key] = field(default_factory=set)
    pod_group: PodGroupState = field(default_factory=lambda: PodGroupState(exists=False))
    job_deleted: bool = False

    def observe(self) -> Observation:
        services = frozenset(self.services) if not self.traits.colocated else None
        pod_group = self.pod_group if self.traits.gang_scheduler else None
        return Observation(replicas=tuple(self.replicas.values()), services=services, pod_group=pod_group)

    def apply(self, decision: Decision, now: datetime) -> None:
        for action in decision.actions:
            if isinstance(action, CreateReplica):
                key = (action.replica_type, action.index)
                assert key not in self.replicas, f"created {key}, which exists: {self.replicas[key]}"
                if self.traits.gang_scheduler == "volcano":
                    assert self.pod_group.phase == "Running", "created a replica before Volcano admitted it"
                self.replicas[key] = ObservedReplica(action.replica_type, action.index, Phase.PENDING)
            elif isinstance(action, DeleteReplica):
                key = (action.replica_type, action.index)
                assert key in self.replicas, f"deleted {key}, which does not exist"
                if action.force:
                    del self.replicas[key]
                else:
                    assert not self.replicas[key].terminating, f"deleted {key} again while terminating"
                    self.replicas[key] = replace(
                        self.replicas[key], terminating=True, deletion_timestamp=now + timedelta(seconds=30)
                    )
            elif isinstance(action, CreateService):
                self.services.add((action.replica_type, action.index))
            elif isinstance(action, DeleteService):
                self.services.discard((action.replica_type, action.index))
            elif isinstance(action, SyncPodGroup) and not self.pod_group.exists:
                self.pod_group = PodGroupState(exists=True, phase="Pending")
            elif isinstance(action, DeletePodGroup):
                self.pod_group = PodGroupState(exists=False)
            elif isinstance(action, DeleteJob):
                self.job_deleted = True


@dataclass(frozen=True)
class SetPhase:
    pick: int
    phase: Phase
    exit_code: int | None


@dataclass(frozen=True)
class RestartInPlace:
    pick: int


@dataclass(frozen=True)
class DeletionsComplete:
    """Every deletion in flight finishes (the kubelet confirms it)."""


@dataclass(frozen=True)
class FlipSuspend:
    """The user flips runPolicy.suspend."""


@dataclass(frozen=True)
class PodGroupAdmitted:
    """Volcano admits the job's PodGroup."""


@dataclass(frozen=True)
class TimePasses:
    seconds: int


Event = SetPhase | RestartInPlace | DeletionsComplete | FlipSuspend | PodGroupAdmitted | TimePasses

EXIT_CODES = st.sampled_from([None, 0, 1, 2, 127, 128, 137, 143])
PHASE_CHANGES = st.builds(
    SetPhase,
    st.integers(0, 7),
    st.sampled_from([Phase.RUNNING, Phase.RUNNING, Phase.SUCCEEDED, Phase.FAILED, Phase.PENDING]),
    EXIT_CODES,
)
EVENTS: st.SearchStrategy[Event] = st.one_of(
    PHASE_CHANGES,
    PHASE_CHANGES,
    PHASE_CHANGES,
    st.builds(RestartInPlace, st.integers(0, 7)),
    st.just(DeletionsComplete()),
    st.just(DeletionsComplete()),
    st.just(FlipSuspend()),
    st.just(PodGroupAdmitted()),
    st.builds(TimePasses, st.integers(1, 40)),
)


@st.composite
def jobs(draw: st.DrawFn) -> ToyJob:
    run_policy = RunPolicy(
        backoff_limit=draw(st.sampled_from([None, 0, 1, 3])),
        active_deadline_seconds=draw(st.sampled_from([None, None, 60, 300])),
        ttl_seconds_after_finished=draw(st.sampled_from([None, None, 0, 100])),
        clean_pod_policy=draw(st.sampled_from(list(CleanPodPolicy))),
        suspend=draw(st.sampled_from([None, False, False, True])),
    )
    return toy_job(
        masters=draw(st.sampled_from([None, 1])),
        workers=draw(st.integers(1, 3)),
        policy=draw(st.sampled_from(list(RestartPolicy))),
        run_policy=run_policy,
    )


def _happen(event: Event, substrate: Substrate, job: ToyJob) -> tuple[ToyJob, int]:
    """Apply one event; returns the job (suspend may flip) and the seconds that passed."""
    live = sorted(substrate.replicas)
    if isinstance(event, SetPhase) and live:
        key = live[event.pick % len(live)]
        exit_code = 0 if event.phase is Phase.SUCCEEDED else event.exit_code
        substrate.replicas[key] = replace(substrate.replicas[key], phase=event.phase, exit_code=exit_code)
    elif isinstance(event, RestartInPlace) and live:
        key = live[event.pick % len(live)]
        current = substrate.replicas[key]
        substrate.replicas[key] = replace(
            current, phase=Phase.RUNNING, restart_count=current.restart_count + 1
        )
    elif isinstance(event, DeletionsComplete):
        substrate.replicas = {k: r for k, r in substrate.replicas.items() if not r.terminating}
    elif isinstance(event, FlipSuspend):
        suspend = not job.run_policy.suspend
        job = job.with_run_policy(job.run_policy.model_copy(update={"suspend": suspend}))
    elif isinstance(event, PodGroupAdmitted) and substrate.pod_group.exists:
        substrate.pod_group = PodGroupState(exists=True, phase="Running")
    elif isinstance(event, TimePasses):
        return job, event.seconds
    return job, 0


def _check_invariants(before: JobStatus, after: JobStatus) -> None:
    if before.is_true(ConditionType.FAILED):
        assert after.conditions == before.conditions, "Failed is terminal: conditions changed after it"
    if after.is_true(ConditionType.FAILED):
        assert after.conditions[-1].type == ConditionType.FAILED, "nothing is set after Failed"
    assert not (after.is_true(ConditionType.RUNNING) and after.is_true(ConditionType.RESTARTING))
    assert (after.completion_time is not None) == after.is_finished
    if before.is_finished:
        assert after.is_finished, "a finished job never runs again"
    for replica_type, status in before.replica_statuses.items():
        assert after.replica_statuses[replica_type].restarts >= status.restarts, (
            "restarts are never forgotten"
        )


@settings(max_examples=120, deadline=None)
@given(
    job=jobs(),
    events=st.lists(EVENTS, min_size=5, max_size=40),
    traits=st.sampled_from([KUBE, LOCAL, VOLCANO, SCHEDULER_PLUGINS]),
)
def test_engine_invariants_hold_over_random_event_sequences(
    job: ToyJob, events: list[Event], traits: Traits
) -> None:
    substrate = Substrate(traits)
    now = NOW
    for event in [TimePasses(0), *events]:
        job, elapsed = _happen(event, substrate, job)
        now += timedelta(seconds=elapsed)
        decision = decide(job, substrate.observe(), now, substrate.traits)
        _check_invariants(job.status, decision.status)
        substrate.apply(decision, now)
        job = job.with_status(decision.status)
        if substrate.job_deleted:
            return
