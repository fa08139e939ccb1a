"""A finished job: cleanPodPolicy, PodGroup removal, replica counts and TTL (§4.1 c, §4.6)."""

from __future__ import annotations

from datetime import timedelta

from kubetrain.api.common import (
    CleanPodPolicy,
    ConditionStatus,
    ConditionType,
    JobCondition,
    JobStatus,
    ReplicaStatus,
    RunPolicy,
)
from kubetrain.engine.types import (
    CreateReplica,
    DeleteJob,
    DeletePodGroup,
    DeleteReplica,
    DeleteService,
    Phase,
    PodGroupState,
    Traits,
)

from .fakes import NOW, ToyJob, observe, replica, toy_job
from .support import actions_of, decide, event_reasons

FINISHED_AT = NOW - timedelta(minutes=10)


def _finished(
    condition: ConditionType = ConditionType.SUCCEEDED,
    clean: CleanPodPolicy | None = None,
    ttl: int | None = None,
    suspend: bool | None = None,
    active: int = 0,
) -> ToyJob:
    status = JobStatus(
        conditions=[JobCondition(type=condition, status=ConditionStatus.TRUE, reason=f"ToyJob{condition}")],
        replica_statuses={"Worker": ReplicaStatus(active=active, succeeded=1)},
        start_time=FINISHED_AT - timedelta(minutes=1),
        completion_time=FINISHED_AT,
    )
    run_policy = RunPolicy(clean_pod_policy=clean, ttl_seconds_after_finished=ttl, suspend=suspend)
    return toy_job(masters=1, workers=2, run_policy=run_policy, status=status)


MIXED = observe(
    replica("Master", 0, Phase.SUCCEEDED, exit_code=0),
    replica("Worker", 0, Phase.RUNNING),
    replica("Worker", 1, Phase.PENDING),
    services=frozenset({("Master", 0), ("Worker", 0), ("Worker", 1)}),
)


def test_clean_pod_policy_none_deletes_nothing() -> None:
    decision = decide(_finished(clean=CleanPodPolicy.NONE), MIXED)
    assert not actions_of(decision, DeleteReplica)
    assert not actions_of(decision, DeleteService)


def test_cleanpodpolicy_running_also_deletes_pending_replicas() -> None:
    decision = decide(_finished(clean=CleanPodPolicy.RUNNING), MIXED)
    assert actions_of(decision, DeleteReplica) == [
        DeleteReplica("Worker", 0, "clean-pod-policy"),
        DeleteReplica("Worker", 1, "clean-pod-policy"),
    ]


def test_cleanpodpolicy_running_deletes_the_same_name_services_only() -> None:
    decision = decide(_finished(clean=CleanPodPolicy.RUNNING), MIXED)
    assert actions_of(decision, DeleteService) == [DeleteService("Worker", 0), DeleteService("Worker", 1)]


def test_cleanpodpolicy_all_deletes_every_replica_and_its_service() -> None:
    decision = decide(_finished(clean=CleanPodPolicy.ALL), MIXED)
    assert len(actions_of(decision, DeleteReplica)) == 3
    assert len(actions_of(decision, DeleteService)) == 3


def test_clean_pod_policy_applies_to_failed_jobs_too() -> None:
    decision = decide(_finished(ConditionType.FAILED, clean=CleanPodPolicy.ALL), MIXED)
    assert len(actions_of(decision, DeleteReplica)) == 3


def test_clean_pod_policy_does_not_delete_a_replica_already_terminating() -> None:
    observation = observe(replica("Worker", 0, terminating=True))
    assert not actions_of(decide(_finished(clean=CleanPodPolicy.ALL), observation), DeleteReplica)


def test_a_finished_job_creates_no_replicas() -> None:
    assert not actions_of(decide(_finished(), observe(services=frozenset())), CreateReplica)


def test_a_finished_job_deletes_its_pod_group_when_gang_scheduled() -> None:
    gang = Traits(colocated=False, gang_scheduler="volcano")
    observation = observe(pod_group=PodGroupState(exists=True, phase="Running"))
    decision = decide(_finished(), observation, traits=gang)
    assert actions_of(decision, DeletePodGroup) == [DeletePodGroup()]
    assert "JobTerminated" in event_reasons(decision)


def test_a_pod_group_already_gone_is_not_deleted_again() -> None:
    gang = Traits(colocated=False, gang_scheduler="volcano")
    decision = decide(_finished(), observe(pod_group=PodGroupState(exists=False)), traits=gang)
    assert not actions_of(decision, DeletePodGroup)


def test_succeeded_moves_active_into_succeeded() -> None:
    decision = decide(_finished(active=2), observe())
    worker = decision.status.replica_statuses["Worker"]
    assert (worker.active, worker.succeeded) == (0, 3)


def test_failed_keeps_active_as_is() -> None:
    decision = decide(_finished(ConditionType.FAILED, active=2), observe())
    assert decision.status.replica_statuses["Worker"].active == 2


def test_ttl_deletes_the_job_once_passed() -> None:
    decision = decide(_finished(ttl=600), observe())
    assert actions_of(decision, DeleteJob) == [DeleteJob()]
    assert "SuccessfulDeleteJob" in event_reasons(decision)


def test_ttl_not_yet_passed_requeues_after_the_remaining_time() -> None:
    decision = decide(_finished(ttl=900), observe())
    assert not actions_of(decision, DeleteJob)
    assert decision.requeue_after == 300


def test_suspended_finished_jobs_skip_ttl() -> None:
    decision = decide(_finished(ttl=0, suspend=True), observe())
    assert not actions_of(decision, DeleteJob)
    assert decision.requeue_after is None


def test_no_ttl_means_the_job_is_kept() -> None:
    decision = decide(_finished(), observe())
    assert not actions_of(decision, DeleteJob)
    assert decision.requeue_after is None


def test_ttl_zero_deletes_the_job_as_soon_as_it_finishes() -> None:
    job = toy_job(masters=1, workers=None, run_policy=RunPolicy(ttl_seconds_after_finished=0))
    decision = decide(job, observe(replica("Master", 0, Phase.SUCCEEDED, exit_code=0)))
    assert decision.status.is_true(ConditionType.SUCCEEDED)
    assert actions_of(decision, DeleteJob) == [DeleteJob()]


def test_a_job_finishing_now_is_cleaned_up_in_the_same_decision() -> None:
    job = toy_job(masters=1, workers=1, run_policy=RunPolicy(clean_pod_policy=CleanPodPolicy.RUNNING))
    observation = observe(replica("Master", 0, Phase.SUCCEEDED, exit_code=0), replica("Worker", 0))
    decision = decide(job, observation)
    assert decision.status.is_true(ConditionType.SUCCEEDED)
    assert actions_of(decision, DeleteReplica) == [DeleteReplica("Worker", 0, "clean-pod-policy")]


def test_a_finished_job_without_completion_time_gets_one() -> None:
    status = JobStatus(
        conditions=[JobCondition(type=ConditionType.SUCCEEDED, status=ConditionStatus.TRUE, reason="x")]
    )
    decision = decide(toy_job(status=status), observe())
    assert decision.status.completion_time == NOW
