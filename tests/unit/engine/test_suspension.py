"""Suspend and resume (§4.1 d/e, §4.7)."""

from __future__ import annotations

from datetime import timedelta
from typing import TypeVar

from kubetrain.api.common import CleanPodPolicy, ConditionStatus, ConditionType, RunPolicy
from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.types import (
    CreateReplica,
    CreateService,
    DeletePodGroup,
    DeleteReplica,
    DeleteService,
    Phase,
    PodGroupState,
    SyncPodGroup,
    Traits,
)

from .fakes import NOW, everything_running, observe, replica, toy_job
from .support import actions_of, decide, event_reasons, settled

LATER = NOW + timedelta(minutes=5)
J = TypeVar("J", bound=TrainingJob)


def _suspended(job: J, suspend: bool = True) -> J:
    return job.with_run_policy(job.run_policy.model_copy(update={"suspend": suspend}))


def _running_then_suspended() -> TrainingJob:
    job = toy_job(masters=1, workers=1, run_policy=RunPolicy(clean_pod_policy=CleanPodPolicy.NONE))
    return _suspended(settled(job, everything_running(job)))


def test_created_suspended_creates_nothing() -> None:
    decision = decide(_suspended(toy_job()))
    assert not actions_of(decision, CreateReplica)
    assert not actions_of(decision, CreateService)


def test_created_suspended_has_no_start_time() -> None:
    assert decide(_suspended(toy_job())).status.start_time is None


def test_suspended_condition_with_upstream_reason_and_message() -> None:
    decision = decide(_suspended(toy_job(name="mnist")))
    suspended = decision.status.condition(ConditionType.SUSPENDED)
    assert suspended is not None
    assert suspended.status == ConditionStatus.TRUE
    assert suspended.reason == "ToyJobSuspended"
    assert suspended.message == "ToyJob mnist is suspended."
    assert "ToyJobSuspended" in event_reasons(decision)


def test_suspending_deletes_every_replica_and_service_regardless_of_clean_pod_policy() -> None:
    job = _running_then_suspended()
    decision = decide(job, everything_running(job), LATER)
    assert actions_of(decision, DeleteReplica) == [
        DeleteReplica("Master", 0, "suspend"),
        DeleteReplica("Worker", 0, "suspend"),
    ]
    assert actions_of(decision, DeleteService) == [DeleteService("Master", 0), DeleteService("Worker", 0)]


def test_suspending_sets_active_to_zero() -> None:
    job = _running_then_suspended()
    decision = decide(job, everything_running(job), LATER)
    assert all(status.active == 0 for status in decision.status.replica_statuses.values())


def test_suspending_sets_running_false_with_reason_suspended() -> None:
    job = _running_then_suspended()
    decision = decide(job, everything_running(job), LATER)
    running = decision.status.condition(ConditionType.RUNNING)
    assert running is not None
    assert (running.status, running.reason) == (ConditionStatus.FALSE, "ToyJobSuspended")


def test_suspending_deletes_the_pod_group() -> None:
    job = _running_then_suspended()
    traits = Traits(colocated=False, gang_scheduler="scheduler-plugins-scheduler")
    observation = observe(replica("Master", 0), pod_group=PodGroupState(exists=True))
    decision = decide(job, observation, LATER, traits)
    assert actions_of(decision, DeletePodGroup) == [DeletePodGroup()]
    assert not actions_of(decision, SyncPodGroup)


def test_a_suspended_job_ignores_its_deadline() -> None:
    job = toy_job(run_policy=RunPolicy(active_deadline_seconds=1))
    job = _suspended(settled(job, everything_running(job)))
    decision = decide(job, observe(), NOW + timedelta(hours=1))
    assert not decision.status.is_true(ConditionType.FAILED)
    assert decision.requeue_after is None


def test_resuming_sets_suspended_false_with_reason_resumed() -> None:
    job = _suspended(settled(_running_then_suspended(), observe(), LATER), suspend=False)
    decision = decide(job, observe(services=frozenset()), LATER + timedelta(minutes=1))
    suspended = decision.status.condition(ConditionType.SUSPENDED)
    assert suspended is not None
    assert (suspended.status, suspended.reason) == (ConditionStatus.FALSE, "ToyJobResumed")
    assert suspended.message == "ToyJob toy is resumed."
    assert "ToyJobResumed" in event_reasons(decision)


def test_resuming_resets_start_time_to_now() -> None:
    job = _suspended(settled(_running_then_suspended(), observe(), LATER), suspend=False)
    resumed_at = LATER + timedelta(minutes=1)
    assert decide(job, observe(services=frozenset()), resumed_at).status.start_time == resumed_at


def test_resuming_recreates_every_replica() -> None:
    job = _suspended(settled(_running_then_suspended(), observe(), LATER), suspend=False)
    decision = decide(job, observe(services=frozenset()), LATER + timedelta(minutes=1))
    assert actions_of(decision, CreateReplica) == [CreateReplica("Master", 0), CreateReplica("Worker", 0)]


def test_resuming_a_job_created_suspended_sets_start_time() -> None:
    job = settled(_suspended(toy_job()), observe())
    decision = decide(_suspended(job, suspend=False), observe(services=frozenset()), LATER)
    assert decision.status.start_time == LATER


def test_a_suspended_job_waits_for_terminating_replicas_without_deleting_them_again() -> None:
    job = _running_then_suspended()
    observation = observe(replica("Master", 0, Phase.RUNNING, terminating=True))
    assert not actions_of(decide(job, observation, LATER), DeleteReplica)
