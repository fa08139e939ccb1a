"""Replica types run as batch/v1 Jobs (MPIJob v2beta1's launcher on Kubernetes, §4.12): the Job
controller owns their retries, backoffLimit, deadline and TTL; the engine waits for Ready workers
under ``WaitForWorkersReady``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from builders import job
from kubetrain.api.common import ConditionType
from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.reconciler import reconcile
from kubetrain.engine.types import (
    CreateReplica,
    Decision,
    DeleteJob,
    DeleteReplica,
    Observation,
    Phase,
    Traits,
)

from .fakes import NOW, observe, replica
from .support import KUBE, LOCAL, actions_of

V2BETA1 = "kubeflow.org/v2beta1"
BATCH = Traits(colocated=False, batch_jobs=True)


def _mpijob(**spec: Any) -> TrainingJob:
    return job("MPIJob", {"Launcher": 1, "Worker": 2}, name="pi", api_version=V2BETA1, spec=spec)


def _decide(job_: TrainingJob, observation: Observation, traits: Traits = BATCH, at: float = 0) -> Decision:
    return reconcile(job_, observation, NOW + timedelta(seconds=at), traits)


def _workers(ready: bool = True) -> list[Any]:
    return [replica("Worker", i, ready=ready) for i in range(2)]


def test_wait_for_workers_ready_holds_the_launcher_while_a_worker_is_not_ready() -> None:
    waiting = _mpijob(launcherCreationPolicy="WaitForWorkersReady")
    observation = observe(replica("Worker", 0, ready=True), replica("Worker", 1, Phase.PENDING))
    assert CreateReplica("Launcher", 0) not in actions_of(_decide(waiting, observation), CreateReplica)


def test_wait_for_workers_ready_creates_the_launcher_once_every_worker_is_ready() -> None:
    waiting = _mpijob(launcherCreationPolicy="WaitForWorkersReady")
    assert actions_of(_decide(waiting, observe(*_workers())), CreateReplica) == [CreateReplica("Launcher", 0)]


def test_at_startup_creates_the_launcher_with_the_workers() -> None:
    created = actions_of(_decide(_mpijob(), observe()), CreateReplica)
    assert CreateReplica("Launcher", 0) in created and len(created) == 3


def test_wait_for_workers_ready_does_not_wait_locally_where_workers_are_not_processes() -> None:
    waiting = _mpijob(launcherCreationPolicy="WaitForWorkersReady")
    assert actions_of(_decide(waiting, observe(), LOCAL), CreateReplica) == [CreateReplica("Launcher", 0)]


def test_a_failed_batch_job_launcher_fails_the_job_with_the_jobs_reason_and_message() -> None:
    failed = replica(
        "Launcher", 0, Phase.FAILED, reason="BackoffLimitExceeded/Error", message="too many: oom"
    )
    decision = _decide(_mpijob(), observe(failed, *_workers()))
    condition = decision.status.condition(ConditionType.FAILED)
    assert condition is not None
    assert (condition.reason, condition.message) == ("BackoffLimitExceeded/Error", "too many: oom")


def test_a_failed_batch_job_launcher_is_never_restarted_by_the_engine() -> None:
    failed = replica("Launcher", 0, Phase.FAILED, reason="BackoffLimitExceeded")
    assert not actions_of(_decide(_mpijob(), observe(failed, *_workers())), DeleteReplica)


def test_a_failed_launcher_process_is_restarted_locally_under_on_failure() -> None:
    failed = replica("Launcher", 0, Phase.FAILED, exit_code=1)
    decision = _decide(_mpijob(), observe(failed), LOCAL)
    assert DeleteReplica("Launcher", 0, "restart") in actions_of(decision, DeleteReplica)


def test_the_active_deadline_is_the_batch_jobs_not_the_engines() -> None:
    started = _mpijob(runPolicy={"activeDeadlineSeconds": 10})
    first = _decide(started, observe(replica("Launcher", 0), *_workers()))
    later = _decide(started.with_status(first.status), observe(replica("Launcher", 0), *_workers()), at=60)
    assert not later.status.is_true(ConditionType.FAILED)


def test_past_the_batch_jobs_deadline_the_engine_sets_no_wake_up_of_its_own() -> None:
    # The deadline is the Job controller's, counted from the Job's own start: asking to be woken "now"
    # past the job's deadline reconciled it again and again until the Job failed (seen: every 20 ms for
    # 30 s).
    started = _mpijob(runPolicy={"activeDeadlineSeconds": 10})
    first = _decide(started, observe(replica("Launcher", 0), *_workers()))
    later = _decide(started.with_status(first.status), observe(replica("Launcher", 0), *_workers()), at=60)
    assert later.requeue_after is None or later.requeue_after > 0


def test_launcher_restarts_do_not_count_against_the_engines_backoff_limit() -> None:
    limited = _mpijob(runPolicy={"backoffLimit": 1})
    decision = _decide(limited, observe(replica("Launcher", 0, restart_count=3), *_workers()))
    assert not decision.status.is_true(ConditionType.FAILED)


def test_suspending_deletes_the_workers_but_keeps_the_launcher_job() -> None:
    suspended = _mpijob(runPolicy={"suspend": True})
    deleted = actions_of(_decide(suspended, observe(replica("Launcher", 0), *_workers())), DeleteReplica)
    assert {(d.replica_type, d.index) for d in deleted} == {("Worker", 0), ("Worker", 1)}


def test_the_job_object_is_not_ttl_deleted_when_its_ttl_went_to_the_batch_job() -> None:
    expiring = _mpijob(runPolicy={"ttlSecondsAfterFinished": 0})
    done = _decide(expiring, observe(replica("Launcher", 0, Phase.SUCCEEDED), *_workers()))
    again = _decide(expiring.with_status(done.status), observe(), at=60)
    assert done.status.is_true(ConditionType.SUCCEEDED)
    assert not actions_of(again, DeleteJob)


def test_without_batch_jobs_the_launcher_is_a_plain_replica() -> None:
    failed = replica("Launcher", 0, Phase.FAILED, exit_code=1)
    assert DeleteReplica("Launcher", 0, "restart") in actions_of(
        _decide(_mpijob(), observe(failed, *_workers()), KUBE), DeleteReplica
    )


def test_a_running_launcher_with_failed_attempts_counts_them_but_keeps_running() -> None:
    retried = replica("Launcher", 0, retried_failures=2)
    decision = _decide(_mpijob(), observe(retried, *_workers()))
    assert decision.status.replica_statuses["Launcher"].failed == 2
    assert decision.status.replica_statuses["Launcher"].active == 1
    assert not decision.status.is_true(ConditionType.FAILED)
    assert decision.status.is_true(ConditionType.RUNNING)


def test_the_launcher_is_listed_in_replica_statuses_once_it_exists() -> None:
    waiting = _mpijob(launcherCreationPolicy="WaitForWorkersReady")
    status = _decide(waiting, observe(replica("Worker", 0, Phase.PENDING))).status
    assert "Launcher" not in status.replica_statuses and "Worker" in status.replica_statuses


def test_workers_are_no_longer_counted_once_the_launcher_ended() -> None:
    # As the mpi-operator: it lists the workers only while its launcher Job has not finished.
    ended = observe(
        replica("Launcher", 0, Phase.SUCCEEDED), *[replica("Worker", i, Phase.SUCCEEDED) for i in range(2)]
    )
    status = _decide(_mpijob(), ended).status
    assert status.replica_statuses["Worker"].succeeded == 0
    assert status.replica_statuses["Launcher"].succeeded == 1


def test_a_job_created_suspended_gets_its_launcher_job_at_once_and_no_workers() -> None:
    """The mpi-operator makes the launcher Job at once, suspended, so a queue (Kueue) can admit it."""
    suspended = _mpijob(runPolicy={"suspend": True})
    assert actions_of(_decide(suspended, observe()), CreateReplica) == [CreateReplica("Launcher", 0)]


def test_a_suspended_job_whose_launcher_job_exists_creates_nothing() -> None:
    suspended = _mpijob(runPolicy={"suspend": True})
    observation = observe(replica("Launcher", 0, Phase.PENDING))
    assert not actions_of(_decide(suspended, observation), CreateReplica)


def test_a_job_created_suspended_is_not_running_and_lists_every_replica_type_without_counts() -> None:
    status = _decide(_mpijob(runPolicy={"suspend": True}), observe()).status
    assert [(c.type, c.status, c.reason) for c in status.conditions[1:]] == [
        (ConditionType.SUSPENDED, "True", "MPIJobSuspended"),
        (ConditionType.RUNNING, "False", "MPIJobSuspended"),
    ]
    assert sorted(status.replica_statuses) == ["Launcher", "Worker"]
    assert all(s.active == s.succeeded == s.failed == 0 for s in status.replica_statuses.values())
