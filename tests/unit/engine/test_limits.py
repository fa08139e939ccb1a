"""backoffLimit and activeDeadlineSeconds (§4.5) with kubetrain's improvements (§8.1 #2045, #3358)."""

from __future__ import annotations

from datetime import timedelta

from kubetrain.api.common import ConditionType, JobStatus, ReplicaStatus, RestartPolicy, RunPolicy
from kubetrain.engine.types import CreateReplica, DeleteReplica, DeleteService, Phase

from .fakes import NOW, everything_running, observe, replica, toy_job
from .support import actions_of, decide, settled

SERVICES = frozenset({("Master", 0), ("Worker", 0)})


def test_backoff_limit_is_exceeded_when_in_place_restarts_reach_it() -> None:
    job = toy_job(masters=1, workers=1, run_policy=RunPolicy(backoff_limit=2), name="mnist")
    decision = decide(job, observe(replica("Master", 0), replica("Worker", 0, restart_count=2)))
    failed = decision.status.condition(ConditionType.FAILED)
    assert failed is not None
    assert failed.reason == "ToyJobFailed"
    assert failed.message == "Job mnist has failed because it has reached the specified backoff limit"


def test_backoff_limit_is_not_exceeded_below_it() -> None:
    job = toy_job(masters=1, workers=1, run_policy=RunPolicy(backoff_limit=2))
    decision = decide(job, observe(replica("Master", 0), replica("Worker", 0, restart_count=1)))
    assert not decision.status.is_true(ConditionType.FAILED)


def test_backoff_limit_zero_fails_on_the_first_restart() -> None:
    job = toy_job(masters=1, workers=1, run_policy=RunPolicy(backoff_limit=0))
    decision = decide(job, observe(replica("Master", 0), replica("Worker", 0, restart_count=1)))
    assert decision.status.is_true(ConditionType.FAILED)


def test_backoff_limit_zero_without_restarts_keeps_running() -> None:
    job = toy_job(masters=1, workers=1, run_policy=RunPolicy(backoff_limit=0))
    decision = decide(job, everything_running(job))
    assert not decision.status.is_true(ConditionType.FAILED)


def test_backoff_counts_restarts_of_replicas_already_replaced() -> None:
    status = JobStatus(replica_statuses={"Worker": ReplicaStatus(restarts=2)})
    job = toy_job(masters=1, workers=1, run_policy=RunPolicy(backoff_limit=2), status=status)
    decision = decide(job, everything_running(job))
    assert decision.status.is_true(ConditionType.FAILED)


def test_backoff_counts_exit_code_recreations() -> None:
    job = toy_job(masters=1, workers=1, policy=RestartPolicy.EXIT_CODE, run_policy=RunPolicy(backoff_limit=2))
    crash = observe(replica("Master", 0), replica("Worker", 0, Phase.FAILED, exit_code=137))
    job = settled(job, crash)
    assert not job.status.is_true(ConditionType.FAILED)
    job = settled(job, crash, NOW + timedelta(seconds=1))
    decision = decide(job, observe(replica("Master", 0)), NOW + timedelta(seconds=2))
    assert decision.status.is_true(ConditionType.FAILED)
    assert not actions_of(decision, CreateReplica)


def test_backoff_ignores_restart_counts_of_replica_types_with_policy_never() -> None:
    job = toy_job(masters=1, workers=1, policy=RestartPolicy.NEVER, run_policy=RunPolicy(backoff_limit=1))
    decision = decide(job, observe(replica("Master", 0), replica("Worker", 0, restart_count=3)))
    assert not decision.status.is_true(ConditionType.FAILED)


def test_backoff_ignores_terminating_replicas_whose_restarts_were_already_kept() -> None:
    status = JobStatus(replica_statuses={"Worker": ReplicaStatus(restarts=1)})
    job = toy_job(masters=1, workers=1, run_policy=RunPolicy(backoff_limit=2), status=status)
    gone = replica("Worker", 0, Phase.FAILED, restart_count=0, terminating=True)
    decision = decide(job, observe(replica("Master", 0), gone))
    assert not decision.status.is_true(ConditionType.FAILED)


def test_exceeding_a_limit_deletes_every_replica_and_service_whatever_clean_pod_policy() -> None:
    job = toy_job(masters=1, workers=1, run_policy=RunPolicy(backoff_limit=1))
    observation = observe(replica("Master", 0), replica("Worker", 0, restart_count=1), services=SERVICES)
    decision = decide(job, observation)
    assert actions_of(decision, DeleteReplica) == [
        DeleteReplica("Master", 0, "failed"),
        DeleteReplica("Worker", 0, "failed"),
    ]
    assert actions_of(decision, DeleteService) == [DeleteService("Master", 0), DeleteService("Worker", 0)]


def test_exceeding_a_limit_sets_completion_time_and_flips_running_to_false() -> None:
    job = toy_job(masters=1, workers=1, run_policy=RunPolicy(backoff_limit=1))
    job = settled(job, everything_running(job))
    assert job.status.is_true(ConditionType.RUNNING)
    later = NOW + timedelta(seconds=5)
    decision = decide(job, observe(replica("Master", 0), replica("Worker", 0, restart_count=1)), later)
    assert decision.status.completion_time == later
    assert not decision.status.is_true(ConditionType.RUNNING)


def test_active_deadline_fails_the_job_once_elapsed_since_start_time() -> None:
    job = toy_job(masters=1, workers=1, run_policy=RunPolicy(active_deadline_seconds=60), name="mnist")
    job = settled(job, everything_running(job))
    decision = decide(job, everything_running(job), NOW + timedelta(seconds=60))
    failed = decision.status.condition(ConditionType.FAILED)
    assert failed is not None
    assert failed.reason == "ToyJobFailed"
    assert failed.message == "Job mnist has failed because it was active longer than specified deadline"
    assert actions_of(decision, DeleteReplica)


def test_active_deadline_is_not_exceeded_a_second_early() -> None:
    job = toy_job(masters=1, workers=1, run_policy=RunPolicy(active_deadline_seconds=60))
    job = settled(job, everything_running(job))
    decision = decide(job, everything_running(job), NOW + timedelta(seconds=59))
    assert not decision.status.is_true(ConditionType.FAILED)


def test_active_deadline_sets_requeue_after_to_the_time_left() -> None:
    job = toy_job(masters=1, workers=1, run_policy=RunPolicy(active_deadline_seconds=60))
    job = settled(job, everything_running(job))
    decision = decide(job, everything_running(job), NOW + timedelta(seconds=45))
    assert decision.requeue_after == 15


def test_active_deadline_requeue_counts_from_the_start_time_set_now() -> None:
    job = toy_job(masters=1, workers=1, run_policy=RunPolicy(active_deadline_seconds=60))
    assert decide(job).requeue_after == 60


def test_a_failed_job_past_its_deadline_asks_for_no_deadline_requeue() -> None:
    job = toy_job(masters=1, workers=1, run_policy=RunPolicy(active_deadline_seconds=60))
    job = settled(job, everything_running(job))
    job = settled(job, everything_running(job), NOW + timedelta(seconds=61))
    assert decide(job, observe(), NOW + timedelta(seconds=62)).requeue_after is None


def test_in_place_and_recreated_restarts_fail_the_job_on_the_same_failure() -> None:
    """backoffLimit 2: the second failure needing a restart fails the job under either policy."""
    limit = RunPolicy(backoff_limit=2)
    in_place = toy_job(masters=1, workers=None, policy=RestartPolicy.ON_FAILURE, run_policy=limit)
    in_place_after_two = decide(in_place, observe(replica("Master", 0, restart_count=2)))

    recreated = toy_job(masters=1, workers=None, policy=RestartPolicy.EXIT_CODE, run_policy=limit)
    crash = observe(replica("Master", 0, Phase.FAILED, exit_code=137))
    recreated = settled(settled(recreated, crash), crash, NOW + timedelta(seconds=1))
    recreated_after_two = decide(recreated, observe(), NOW + timedelta(seconds=2))

    assert in_place_after_two.status.is_true(ConditionType.FAILED)
    assert recreated_after_two.status.is_true(ConditionType.FAILED)
    assert recreated_after_two.status.replica_statuses["Master"].restarts == 2
