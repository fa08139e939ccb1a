"""A TrainJob's local run is shown as that TrainJob: the internal JobSetRun the runner runs never shows, its
conditions are Trainer's, its JobSet's jobs are counted from its processes, its events name the TrainJob."""

from __future__ import annotations

import time
from typing import Any

from kubetrain.api.summary import NodeTally
from kubetrain.local.state import ReplicaRecord, RunRecord

TRAINJOB = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "tj", "namespace": "default", "labels": {"team": "a"}},
    "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 2}},
}


def run(
    conditions: list[dict[str, str]] | None = None, suspend: bool = False, **status: Any
) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "node", "image": "img"}]}}
    return {
        "apiVersion": "kubetrain.dev/v1alpha1",
        "kind": "JobSetRun",
        "metadata": {"name": "tj", "namespace": "default"},
        "spec": {
            "runPolicy": {"backoffLimit": 6, **({"suspend": True} if suspend else {})},
            "replicatedJobs": {"node": {"replicas": 2, "template": template}},
            "shapes": {"node": {"jobs": 1, "parallelism": 2}},
            "trainjob": TRAINJOB,
        },
        "status": {"conditions": conditions or [], **status},
    }


def condition(type_: str, status: str = "True", reason: str = "", message: str = "") -> dict[str, str]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastUpdateTime": "2026-01-01T00:00:00Z",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def node(index: int, phase: str) -> ReplicaRecord:
    return ReplicaRecord(f"node-{index}", "node", index, None, phase, 0, None, [], "")


def record(job: dict[str, Any], *replicas: ReplicaRecord, finished: bool = True, **fields: Any) -> RunRecord:
    return RunRecord(
        job, list(replicas), runner_pid=1, runner_started_at=time.time(), finished=finished, **fields
    )


def test_a_trainjobs_run_shows_as_the_trainjob_as_written() -> None:
    shown = record(run()).job_wire()
    assert (shown["apiVersion"], shown["kind"]) == ("trainer.kubeflow.org/v1alpha1", "TrainJob")
    assert shown["spec"] == TRAINJOB["spec"]
    assert shown["metadata"]["labels"] == {"team": "a"}
    assert shown["metadata"]["creationTimestamp"]


def test_a_succeeded_jobset_run_is_a_complete_trainjob_with_the_jobsets_reason() -> None:
    done = condition("Succeeded", reason="AllJobsCompleted", message="jobset completed successfully")
    conditions = record(run([condition("Created"), condition("Running", "False"), done])).job_wire()[
        "status"
    ]["conditions"]
    assert conditions == [
        {
            "type": "Complete",
            "status": "True",
            "reason": "AllJobsCompleted",
            "message": "jobset completed successfully",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    ]


def test_a_failed_jobset_run_is_a_failed_trainjob() -> None:
    failed = condition("Failed", reason="FailedJobs", message="jobset failed due to one or more job failures")
    [shown] = record(run([failed])).job_wire()["status"]["conditions"]
    assert (shown["type"], shown["reason"]) == ("Failed", "FailedJobs")


def test_a_run_whose_runner_is_gone_is_a_failed_trainjob() -> None:
    gone = record(run([condition("Created")]), finished=False)
    gone.runner_pid = 2**22 + 1  # no such process
    [shown] = gone.job_wire()["status"]["conditions"]
    assert (shown["type"], shown["reason"]) == ("Failed", "LocalRunnerGone")


def test_a_suspended_run_has_trainers_suspended_and_resumed_reasons_and_messages() -> None:
    suspended = condition("Suspended", reason="JobSetRunSuspended", message="JobSetRun tj is suspended.")
    [shown] = record(run([suspended])).job_wire()["status"]["conditions"]
    assert (shown["reason"], shown["message"]) == ("Suspended", "TrainJob is suspended")
    resumed = condition("Suspended", "False", reason="JobSetRunResumed", message="JobSetRun tj is resumed.")
    [shown] = record(run([resumed])).job_wire()["status"]["conditions"]
    assert (shown["reason"], shown["message"]) == ("Resumed", "TrainJob is resumed")


def test_the_jobsets_jobs_are_counted_from_the_processes() -> None:
    running = record(run(), node(0, "Running"), node(1, "Pending")).job_wire()["status"]["jobsStatus"]
    assert running == [{"name": "node", "ready": 0, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}]
    ready = record(run(), node(0, "Running"), node(1, "Running")).job_wire()["status"]["jobsStatus"]
    assert (ready[0]["ready"], ready[0]["active"]) == (1, 1)
    done = record(run(), node(0, "Succeeded"), node(1, "Succeeded")).job_wire()["status"]["jobsStatus"]
    assert (done[0]["succeeded"], done[0]["active"]) == (1, 0)
    failed = record(run(), node(0, "Succeeded"), node(1, "Failed")).job_wire()["status"]["jobsStatus"]
    assert failed[0]["failed"] == 1
    held = record(run(suspend=True), node(0, "Pending"), node(1, "Pending")).job_wire()["status"][
        "jobsStatus"
    ]
    assert held[0]["suspended"] == 1


def test_the_runs_progress_is_the_trainjobs() -> None:
    reported = {"progressPercentage": 50, "lastUpdatedTime": "2026-01-01T00:00:00Z"}
    assert record(run(trainerStatus=reported)).job_wire()["status"]["trainerStatus"] == reported


def test_a_runs_nodes_are_its_node_processes_and_none_are_active_while_it_is_suspended() -> None:
    assert record(run(), node(0, "Running"), node(1, "Succeeded")).nodes == NodeTally(2, 1, 2)
    assert record(run(suspend=True), node(0, "Pending"), node(1, "Pending")).nodes == NodeTally(2, 0, 0)


def test_a_v1_jobs_run_has_no_nodes_and_shows_as_itself() -> None:
    v1 = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "p"}, "spec": {}}
    shown = record(v1)
    assert shown.nodes is None
    assert shown.job_wire()["kind"] == "PyTorchJob"


def test_the_runners_events_name_the_trainjob() -> None:
    event = {"type": "Normal", "reason": "JobSetRunSuspended", "message": "JobSetRun tj is suspended."}
    [shown] = record(run(), events=[event]).shown_events()
    assert (shown["reason"], shown["message"]) == ("TrainJobSuspended", "TrainJob tj is suspended.")


def test_the_runs_stalled_condition_and_findings_name_the_trainjob() -> None:
    said = "JobSetRun tj has had no progress report since 12:00"
    stalled = record(run([condition("Stalled", reason="ProgressDeadlineExceeded", message=said)]))
    stalled.findings = [{"reason": "ProgressDeadlineExceeded", "message": said, "replicas": ["tj-node-0-0"]}]
    [shown] = stalled.job_wire()["status"]["conditions"]
    assert (shown["type"], shown["message"]) == (
        "Stalled",
        "TrainJob tj has had no progress report since 12:00",
    )
    [finding] = stalled.shown_findings()
    assert finding["message"] == "TrainJob tj has had no progress report since 12:00"
