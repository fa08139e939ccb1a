"""Hang detection: kubetrain.dev/progress-deadline-seconds and -action (engine/progress.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kubetrain.api.common import ConditionType, JobStatus, ReplicaStatus, RestartPolicy, RunPolicy
from kubetrain.api.errors import InvalidJobError
from kubetrain.api.jobs import TrainingJob
from kubetrain.api.progress import Metric, TrainerStatus
from kubetrain.engine.admission import admit
from kubetrain.engine.progress import PROGRESS_DEADLINE_ACTION_ANNOTATION, PROGRESS_DEADLINE_ANNOTATION
from kubetrain.engine.types import DeleteReplica, Phase

from .fakes import FRAMEWORK, NOW, everything_running, observe, replica, toy_job
from .support import actions_of, decide, event_reasons, settled

DEADLINE = 300


def reporting_job(
    *,
    action: str | None = None,
    reported_ago: float | None = 0.0,
    policy: RestartPolicy | None = None,
    run_policy: RunPolicy | None = None,
) -> TrainingJob:
    """A toy job with a 300 s progress deadline, Running since NOW, that last reported ``reported_ago``
    seconds after NOW (None: never)."""
    job = toy_job(masters=1, workers=2, policy=policy, run_policy=run_policy)
    annotations = {PROGRESS_DEADLINE_ANNOTATION: str(DEADLINE)}
    if action is not None:
        annotations[PROGRESS_DEADLINE_ACTION_ANNOTATION] = action
    job = job.model_copy(update={"metadata": job.metadata.model_copy(update={"annotations": annotations})})
    job = settled(job, everything_running(job))
    if reported_ago is None:
        return job
    report = TrainerStatus(
        progress_percentage=45,
        metrics=[Metric(name="loss", value="0.2347")],
        last_updated_time=NOW + timedelta(seconds=reported_ago),
    )
    return job.with_status(job.status.model_copy(update={"trainer_status": report}))


def test_a_job_within_its_deadline_is_not_stalled_and_is_looked_at_again_when_it_would_be() -> None:
    job = reporting_job(reported_ago=10)
    decision = decide(job, everything_running(job), NOW + timedelta(seconds=100))
    assert decision.status.condition(ConditionType.STALLED) is None
    assert decision.requeue_after == pytest.approx(DEADLINE + 10 - 100)


def test_a_job_silent_past_its_deadline_is_stalled_naming_its_silent_replicas_and_last_report() -> None:
    job = reporting_job(reported_ago=10)
    decision = decide(job, everything_running(job), NOW + timedelta(seconds=DEADLINE + 11))
    stalled = decision.status.condition(ConditionType.STALLED)
    assert stalled is not None
    assert stalled.reason == "ProgressDeadlineExceeded"
    assert stalled.message == (
        "ToyJob toy has had no progress report since 2026-03-01T12:00:10Z (45%, loss=0.2347), longer than "
        "its progress deadline of 300s (kubetrain.dev/progress-deadline-seconds); running without "
        "reporting: toy-master-0, toy-worker-0, toy-worker-1"
    )
    assert decision.status.conditions[-1].type == ConditionType.STALLED
    assert "ProgressDeadlineExceeded" in event_reasons(decision)


def test_a_stalled_job_keeps_running_when_it_only_asked_for_a_warning() -> None:
    job = reporting_job()
    decision = decide(job, everything_running(job), NOW + timedelta(seconds=DEADLINE + 1))
    assert not actions_of(decision, DeleteReplica)
    assert decision.status.is_true(ConditionType.RUNNING)


def test_a_job_that_never_reported_is_never_stalled() -> None:
    job = reporting_job(reported_ago=None)
    decision = decide(job, everything_running(job), NOW + timedelta(days=3))
    assert decision.status.condition(ConditionType.STALLED) is None


def test_a_job_without_a_deadline_is_never_stalled() -> None:
    job = toy_job()
    job = settled(job, everything_running(job))
    report = TrainerStatus(progress_percentage=1, last_updated_time=NOW)
    job = job.with_status(job.status.model_copy(update={"trainer_status": report}))
    decision = decide(job, everything_running(job), NOW + timedelta(days=3))
    assert decision.status.condition(ConditionType.STALLED) is None
    assert decision.requeue_after is None


def test_a_new_report_clears_stalled_and_says_progress_resumed() -> None:
    job = reporting_job()
    late = NOW + timedelta(seconds=DEADLINE + 1)
    job = job.with_status(decide(job, everything_running(job), late).status)
    report = TrainerStatus(progress_percentage=50, last_updated_time=late + timedelta(seconds=5))
    job = job.with_status(job.status.model_copy(update={"trainer_status": report}))
    decision = decide(job, everything_running(job), late + timedelta(seconds=6))
    assert decision.status.condition(ConditionType.STALLED) is None
    assert decision.status.conditions[-1].type == ConditionType.RUNNING
    assert "ProgressResumed" in event_reasons(decision)


def test_fail_restarts_the_silent_replicas_when_their_policy_restarts_them_counting_each_restart() -> None:
    job = reporting_job(action="Fail", policy=RestartPolicy.ON_FAILURE)
    decision = decide(job, everything_running(job), NOW + timedelta(seconds=DEADLINE + 1))
    assert actions_of(decision, DeleteReplica) == [
        DeleteReplica("Master", 0, "restart"),
        DeleteReplica("Worker", 0, "restart"),
        DeleteReplica("Worker", 1, "restart"),
    ]
    restarting = decision.status.condition(ConditionType.RESTARTING)
    assert restarting is not None and restarting.reason == "ProgressDeadlineExceeded"
    assert (restarting.message or "").endswith("; restarting them")
    assert decision.status.condition(ConditionType.STALLED) is None
    assert decision.status.replica_statuses["Worker"].restarts == 2
    assert decision.status.replica_statuses["Master"].restarts == 1


def test_fail_counts_against_the_backoff_limit() -> None:
    job = reporting_job(action="Fail", run_policy=RunPolicy(backoff_limit=2))
    job = settled(job, everything_running(job), NOW + timedelta(seconds=DEADLINE + 1))
    decision = decide(job, everything_running(job), NOW + timedelta(seconds=DEADLINE + 2))
    assert decision.status.is_true(ConditionType.FAILED)


def test_fail_fails_the_job_when_a_silent_replica_would_not_be_restarted() -> None:
    job = reporting_job(action="Fail", policy=RestartPolicy.NEVER)
    decision = decide(job, everything_running(job), NOW + timedelta(seconds=DEADLINE + 1))
    failed = decision.status.condition(ConditionType.FAILED)
    assert failed is not None and failed.reason == "ProgressDeadlineExceeded"
    assert (failed.message or "").endswith("; the job has failed")
    assert decision.status.condition(ConditionType.STALLED) is None


def test_restarted_replicas_get_the_whole_deadline_again_from_when_the_job_runs_again() -> None:
    job = reporting_job(action="Fail")
    job = settled(job, everything_running(job), NOW + timedelta(seconds=DEADLINE + 1))
    rerun = NOW + timedelta(seconds=DEADLINE + 30)
    job = settled(job, everything_running(job), rerun)
    assert job.status.is_true(ConditionType.RUNNING)
    decision = decide(job, everything_running(job), rerun + timedelta(seconds=DEADLINE - 1))
    assert not actions_of(decision, DeleteReplica)
    later = decide(job, everything_running(job), rerun + timedelta(seconds=DEADLINE + 1))
    stalled = later.status.condition(ConditionType.RESTARTING)
    assert stalled is not None and "since it became Running at" in (stalled.message or "")


def test_a_finished_job_drops_stalled() -> None:
    job = reporting_job()
    job = settled(job, everything_running(job), NOW + timedelta(seconds=DEADLINE + 1))
    done = observe(replica("Master", 0, Phase.SUCCEEDED, exit_code=0))
    decision = decide(job, done, NOW + timedelta(seconds=DEADLINE + 2))
    assert decision.status.is_true(ConditionType.SUCCEEDED)
    assert decision.status.condition(ConditionType.STALLED) is None


def test_the_stalled_message_counts_the_silent_replicas_it_does_not_name() -> None:
    job = toy_job(masters=1, workers=20)
    annotations = {PROGRESS_DEADLINE_ANNOTATION: "60"}
    job = job.model_copy(update={"metadata": job.metadata.model_copy(update={"annotations": annotations})})
    job = settled(job, everything_running(job))
    report = TrainerStatus(last_updated_time=NOW)
    job = job.with_status(job.status.model_copy(update={"trainer_status": report}))
    decision = decide(job, everything_running(job), NOW + timedelta(seconds=61))
    stalled = decision.status.condition(ConditionType.STALLED)
    assert stalled is not None
    assert (stalled.message or "").endswith("toy-worker-6 and 13 more")
    assert "(no values)" in (stalled.message or "")


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        (
            {PROGRESS_DEADLINE_ANNOTATION: "10m"},
            'metadata.annotations[kubetrain.dev/progress-deadline-seconds]: Invalid value: "10m": must be '
            'a whole number of seconds greater than 0, e.g. "600"',
        ),
        (
            {PROGRESS_DEADLINE_ANNOTATION: "0"},
            'metadata.annotations[kubetrain.dev/progress-deadline-seconds]: Invalid value: "0": must be '
            'a whole number of seconds greater than 0, e.g. "600"',
        ),
        (
            {PROGRESS_DEADLINE_ANNOTATION: "60", PROGRESS_DEADLINE_ACTION_ANNOTATION: "Restart"},
            'metadata.annotations[kubetrain.dev/progress-deadline-action]: Unsupported value: "Restart": '
            'supported values: "Warn", "Fail"',
        ),
        (
            {PROGRESS_DEADLINE_ACTION_ANNOTATION: "Fail"},
            "metadata.annotations[kubetrain.dev/progress-deadline-action]: Forbidden: only takes effect "
            "with kubetrain.dev/progress-deadline-seconds; set that too",
        ),
    ],
)
def test_admission_refuses_bad_deadline_annotations_naming_the_annotation(
    annotations: dict[str, str], message: str
) -> None:
    job = toy_job()
    job = job.model_copy(update={"metadata": job.metadata.model_copy(update={"annotations": annotations})})
    with pytest.raises(InvalidJobError) as raised:
        admit(job, FRAMEWORK)
    assert str(raised.value) == message


def test_the_restarts_a_stall_caused_are_kept_in_the_replica_statuses() -> None:
    status = JobStatus(replica_statuses={"Worker": ReplicaStatus(restarts=3)})
    job = reporting_job(action="Fail")
    job = job.with_status(job.status.model_copy(update={"replica_statuses": status.replica_statuses}))
    decision = decide(job, everything_running(job), NOW + timedelta(seconds=DEADLINE + 1))
    assert decision.status.replica_statuses["Worker"].restarts == 5
