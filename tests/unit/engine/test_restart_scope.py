"""Restart scope Job: one replica's failure restarts every replica together, counted once
(engine.restart_scope)."""

from __future__ import annotations

from datetime import timedelta

from kubetrain.api.common import ConditionType, JobStatus, ReplicaStatus, RestartPolicy, RunPolicy
from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.fault_policy import RESTART_SCOPE_ANNOTATION
from kubetrain.engine.types import (
    CreateReplica,
    DeleteReplica,
    Disruption,
    EmitEvent,
    ObservedContainer,
    ObservedReplica,
    Phase,
)

from .fakes import NOW, observe, replica, toy_job
from .support import actions_of, decide


def annotated(job: TrainingJob, **annotations: str) -> TrainingJob:
    metadata = job.metadata.model_copy(
        update={"annotations": {**(job.metadata.annotations or {}), **annotations}}
    )
    return job.model_copy(update={"metadata": metadata})


def whole_job(
    policy: RestartPolicy = RestartPolicy.ON_FAILURE, backoff_limit: int | None = None, workers: int = 2
) -> TrainingJob:
    job = toy_job(
        masters=1, workers=workers, policy=policy, run_policy=RunPolicy(backoff_limit=backoff_limit)
    )
    return annotated(job, **{RESTART_SCOPE_ANNOTATION: "Job"})


def restarted_in_place(
    replica_type: str, index: int, exit_code: int = 1, restarts: int = 1, ended: float | None = None
) -> ObservedReplica:
    container = ObservedContainer(
        "toy",
        last_exit_code=exit_code,
        last_reason="Error",
        restart_count=restarts,
        last_finished_at=None if ended is None else NOW - timedelta(seconds=ended),
    )
    return replica(replica_type, index, restart_count=restarts, containers=(container,))


def test_a_failed_replica_deletes_every_replica_of_the_job() -> None:
    decision = decide(
        whole_job(),
        observe(
            replica("Master", 0), replica("Worker", 0), replica("Worker", 1, Phase.FAILED, exit_code=137)
        ),
    )
    assert sorted(actions_of(decision, DeleteReplica), key=lambda d: (d.replica_type, d.index)) == [
        DeleteReplica("Master", 0, "job-restart"),
        DeleteReplica("Worker", 0, "job-restart"),
        DeleteReplica("Worker", 1, "job-restart"),
    ]


def test_the_default_scope_restarts_only_the_failed_replica() -> None:
    job = toy_job(masters=1, workers=2, policy=RestartPolicy.ON_FAILURE)
    decision = decide(
        job,
        observe(
            replica("Master", 0), replica("Worker", 0), replica("Worker", 1, Phase.FAILED, exit_code=137)
        ),
    )
    assert actions_of(decision, DeleteReplica) == [DeleteReplica("Worker", 1, "restart")]


def test_a_replica_the_kubelet_restarted_in_place_restarts_the_job() -> None:
    decision = decide(
        whole_job(), observe(replica("Master", 0), replica("Worker", 0), restarted_in_place("Worker", 1))
    )
    assert {(d.replica_type, d.index) for d in actions_of(decision, DeleteReplica)} == {
        ("Master", 0),
        ("Worker", 0),
        ("Worker", 1),
    }


def test_the_job_restart_counts_once_however_many_replicas_failed() -> None:
    decision = decide(
        whole_job(),
        observe(
            restarted_in_place("Master", 0),
            replica("Worker", 0, Phase.FAILED, exit_code=1),
            replica("Worker", 1, Phase.FAILED, exit_code=1),
        ),
    )
    assert sum(status.restarts for status in decision.status.replica_statuses.values()) == 1


def test_replicas_restarted_in_place_count_once_against_backoff_limit() -> None:
    job = whole_job(backoff_limit=2)
    observation = observe(
        restarted_in_place("Master", 0), restarted_in_place("Worker", 0), replica("Worker", 1)
    )
    assert not decide(job, observation).status.is_true(ConditionType.FAILED)


def test_the_backoff_limit_th_job_restart_fails_the_job() -> None:
    status = JobStatus(replica_statuses={"Worker": ReplicaStatus(restarts=1)})
    job = whole_job(backoff_limit=2).with_status(status)
    observation = observe(
        replica("Master", 0), restarted_in_place("Worker", 0), restarted_in_place("Worker", 1)
    )
    assert decide(job, observation).status.is_true(ConditionType.FAILED)


def test_nothing_is_created_while_any_replica_is_still_terminating() -> None:
    decision = decide(whole_job(), observe(replica("Master", 0, terminating=True)))
    assert not actions_of(decision, CreateReplica)


def test_every_replica_is_created_again_together_once_all_are_gone() -> None:
    decision = decide(whole_job(), observe())
    assert actions_of(decision, CreateReplica) == [
        CreateReplica("Master", 0),
        CreateReplica("Worker", 0),
        CreateReplica("Worker", 1),
    ]


def test_a_replica_deleted_by_someone_else_restarts_the_others() -> None:
    decision = decide(
        whole_job(),
        observe(replica("Master", 0), replica("Worker", 0, terminating=True), replica("Worker", 1)),
    )
    assert {(d.replica_type, d.index) for d in actions_of(decision, DeleteReplica)} == {
        ("Master", 0),
        ("Worker", 1),
    }


def test_a_deletion_by_someone_else_does_not_count_against_backoff_limit() -> None:
    decision = decide(
        whole_job(),
        observe(replica("Master", 0), replica("Worker", 0, terminating=True), replica("Worker", 1)),
    )
    assert sum(status.restarts for status in decision.status.replica_statuses.values()) == 0


def running_whole_job() -> TrainingJob:
    """A job under restart scope Job whose last status counted all of its replicas running."""
    job = whole_job()
    statuses = {"Master": ReplicaStatus(active=1), "Worker": ReplicaStatus(active=2)}
    return job.with_status(JobStatus(replica_statuses=statuses))


def test_a_replica_that_vanished_while_its_peers_run_restarts_the_job() -> None:
    decision = decide(running_whole_job(), observe(replica("Master", 0), replica("Worker", 0)))
    assert not actions_of(decision, CreateReplica)
    assert {(d.replica_type, d.index) for d in actions_of(decision, DeleteReplica)} == {
        ("Master", 0),
        ("Worker", 0),
    }
    restarting = decision.status.condition(ConditionType.RESTARTING)
    assert restarting is not None
    assert "because Worker replica 1 (pod toy-worker-1) is gone" in (restarting.message or "")


def test_a_replica_not_yet_counted_running_is_created_not_taken_for_vanished() -> None:
    decision = decide(whole_job(), observe(replica("Master", 0), replica("Worker", 0)))
    assert actions_of(decision, CreateReplica) == [CreateReplica("Worker", 1)]
    assert not actions_of(decision, DeleteReplica)


def test_a_warning_names_the_replica_and_the_exit_code_that_restarted_the_job() -> None:
    decision = decide(
        whole_job(),
        observe(
            replica("Master", 0), replica("Worker", 0), replica("Worker", 1, Phase.FAILED, exit_code=137)
        ),
    )
    warnings = [e for e in actions_of(decision, EmitEvent) if e.reason == "ToyJobRestarting"]
    assert len(warnings) == 1
    assert "Worker replica 1 (pod toy-worker-1) exited with code 137" in warnings[0].message


def test_an_in_place_restart_is_named_with_its_container_and_exit_code() -> None:
    decision = decide(
        whole_job(), observe(replica("Master", 0), replica("Worker", 0), restarted_in_place("Worker", 1, 9))
    )
    restarting = decision.status.condition(ConditionType.RESTARTING)
    assert restarting is not None and restarting.status == "True"
    assert "(pod toy-worker-1) container toy exited with code 9 and was restarted in place" in (
        restarting.message or ""
    )


def test_the_replica_that_failed_first_is_named_as_the_trigger() -> None:
    killed_first = restarted_in_place("Worker", 1, exit_code=137, ended=2.0)
    crashed_after = restarted_in_place("Master", 0, exit_code=1, ended=1.0)
    decision = decide(whole_job(), observe(crashed_after, replica("Worker", 0), killed_first))
    restarting = decision.status.condition(ConditionType.RESTARTING)
    assert restarting is not None
    assert "because Worker replica 1 (pod toy-worker-1) container toy exited with code 137" in (
        restarting.message or ""
    )


def test_the_restarting_condition_says_the_whole_job_restarts() -> None:
    decision = decide(
        whole_job(),
        observe(replica("Master", 0, Phase.FAILED, exit_code=1), replica("Worker", 0), replica("Worker", 1)),
    )
    restarting = decision.status.condition(ConditionType.RESTARTING)
    assert restarting is not None
    assert f"every replica together ({RESTART_SCOPE_ANNOTATION}: Job)" in (restarting.message or "")


def test_a_failure_its_policy_does_not_restart_still_fails_the_job() -> None:
    decision = decide(
        whole_job(RestartPolicy.NEVER),
        observe(replica("Master", 0), replica("Worker", 0, Phase.FAILED, exit_code=1), replica("Worker", 1)),
    )
    assert decision.status.is_true(ConditionType.FAILED)
    assert not actions_of(decision, DeleteReplica)


def test_a_non_retryable_exit_code_still_fails_the_job() -> None:
    decision = decide(
        whole_job(RestartPolicy.EXIT_CODE),
        observe(replica("Master", 0), replica("Worker", 0, Phase.FAILED, exit_code=2), replica("Worker", 1)),
    )
    assert decision.status.is_true(ConditionType.FAILED)


def test_a_retryable_exit_code_restarts_the_job() -> None:
    decision = decide(
        whole_job(RestartPolicy.EXIT_CODE),
        observe(
            replica("Master", 0), replica("Worker", 0, Phase.FAILED, exit_code=143), replica("Worker", 1)
        ),
    )
    assert len(actions_of(decision, DeleteReplica)) == 3


def test_a_disruption_restarts_the_job_without_counting_the_peers_crashes() -> None:
    evicted = replica("Worker", 1, Phase.FAILED, exit_code=137, disruption=Disruption("TerminationByKubelet"))
    decision = decide(
        whole_job(backoff_limit=0), observe(restarted_in_place("Master", 0), replica("Worker", 0), evicted)
    )
    assert not decision.status.is_true(ConditionType.FAILED)
    assert len(actions_of(decision, DeleteReplica)) == 3
    assert sum(status.restarts for status in decision.status.replica_statuses.values()) == 0


def test_a_terminating_replica_is_neither_failed_nor_active_during_a_job_restart() -> None:
    decision = decide(
        whole_job(), observe(replica("Master", 0, terminating=True), replica("Worker", 0, terminating=True))
    )
    master = decision.status.replica_statuses["Master"]
    assert (master.active, master.failed) == (0, 0)


def test_annotation_values_other_than_replica_and_job_are_refused() -> None:
    job = annotated(toy_job(), **{RESTART_SCOPE_ANNOTATION: "Pod"})
    failed = decide(job).status.condition(ConditionType.FAILED)
    assert failed is not None and failed.reason == "InvalidSpec"
    assert RESTART_SCOPE_ANNOTATION in (failed.message or "") and '"Replica", "Job"' in (failed.message or "")
