"""A TrainJob in a listing: its STATE as the Kubeflow SDK decides it (Complete and Failed from its conditions,
Suspended too, else Running once all its nodes run, else Created) and its training nodes as REPLICAS."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api.summary import JobSummary, NodeTally, ReplicaCounts, is_finished


def trainjob(
    num_nodes: int | None = 2, conditions: list[dict[str, str]] | None = None, **status: Any
) -> dict[str, Any]:
    trainer = {} if num_nodes is None else {"numNodes": num_nodes}
    wire: dict[str, Any] = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": "team"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer},
    }
    if conditions is not None or status:
        wire["status"] = {"conditions": conditions or [], **status}
    return wire


def condition(type_: str, status: str = "True", message: str = "") -> dict[str, str]:
    return {"type": type_, "status": status, "reason": type_, "message": message}


@pytest.mark.parametrize("final", ["Complete", "Failed", "Suspended"])
def test_a_trainjobs_true_final_condition_is_its_state_whatever_its_pods_show(final: str) -> None:
    wire = trainjob(conditions=[condition(final, message=f"it is {final}")])
    summary = JobSummary.from_wire(wire, NodeTally(seen=2, active=2, running=2))
    assert (summary.state, summary.message) == (final, f"it is {final}")


def test_a_trainjob_is_running_once_all_its_nodes_run_or_have_succeeded() -> None:
    summary = JobSummary.from_wire(trainjob(num_nodes=3), NodeTally(seen=3, active=2, running=3))
    assert summary.state == "Running"


def test_a_trainjob_is_created_while_fewer_than_its_nodes_run() -> None:
    summary = JobSummary.from_wire(trainjob(num_nodes=3), NodeTally(seen=3, active=3, running=2))
    assert summary.state == "Created"


def test_a_trainjob_without_pods_is_created() -> None:
    assert JobSummary.from_wire(trainjob(), NodeTally(seen=0, active=0, running=0)).state == "Created"
    assert JobSummary.from_wire(trainjob()).state == "Created"


def test_a_trainjob_that_leaves_its_node_count_to_its_runtime_runs_once_every_node_seen_runs() -> None:
    assert JobSummary.from_wire(trainjob(num_nodes=None), NodeTally(2, 2, 2)).state == "Running"
    assert JobSummary.from_wire(trainjob(num_nodes=None), NodeTally(2, 2, 1)).state == "Created"


def test_a_resumed_trainjob_is_read_from_its_pods_not_from_its_last_condition() -> None:
    resumed = [condition("Suspended", "False", "TrainJob is resumed")]
    summary = JobSummary.from_wire(trainjob(conditions=resumed), NodeTally(2, 2, 2))
    assert (summary.state, summary.message) == ("Running", "")


def test_a_trainjobs_replicas_are_its_active_nodes_of_its_num_nodes() -> None:
    assert JobSummary.from_wire(trainjob(num_nodes=4), NodeTally(4, 3, 3)).replicas == (
        ReplicaCounts("node", 4, 3),
    )
    assert JobSummary.from_wire(trainjob(num_nodes=None), NodeTally(2, 1, 1)).replicas == (
        ReplicaCounts("node", 2, 1),
    )
    assert JobSummary.from_wire(trainjob(num_nodes=4)).replicas == (ReplicaCounts("node", 4, 0),)


def test_a_complete_trainjob_is_finished() -> None:
    assert is_finished(trainjob(conditions=[condition("Complete")]))
    assert not is_finished(trainjob(conditions=[condition("Suspended")]))


def test_a_trainjobs_progress_is_read_from_its_trainer_status() -> None:
    reported = {
        "progressPercentage": 40,
        "estimatedRemainingSeconds": 90,
        "lastUpdatedTime": "2026-01-01T00:00:00Z",
    }
    summary = JobSummary.from_wire(trainjob(trainerStatus=reported))
    assert (summary.progress, summary.remaining_seconds) == (40, 90)


def test_a_trainjob_past_its_progress_deadline_is_stalled_as_a_v1_job_is() -> None:
    stalled = [condition("Stalled", message="TrainJob tj has had no progress report since ...")]
    summary = JobSummary.from_wire(trainjob(conditions=stalled), NodeTally(2, 2, 2))
    assert (summary.state, summary.message) == ("Stalled", "TrainJob tj has had no progress report since ...")
