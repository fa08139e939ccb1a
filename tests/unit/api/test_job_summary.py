"""A listing's view of a job, read from its wire form: the same facts as the model's, and never an error."""

from __future__ import annotations

from typing import Any

import pytest

from builders import job
from kubetrain.api.common import JobCondition, JobStatus, ReplicaStatus
from kubetrain.api.summary import JobSummary, ReplicaCounts, is_finished
from kubetrain.frameworks.registry import FRAMEWORKS

KINDS = [(f.api_version, f.kind) for f in FRAMEWORKS]


@pytest.mark.parametrize(("api_version", "kind"), KINDS)
def test_every_kinds_replica_map_is_found_by_its_suffix(api_version: str, kind: str) -> None:
    parsed = job(
        kind, {"Launcher": 1, "Worker": 3} if "MPI" in kind else {"Worker": 3}, api_version=api_version
    )
    summary = JobSummary.from_wire(parsed.to_wire())
    assert [(r.replica_type, r.desired) for r in summary.replicas] == [
        (replica_type, spec.replicas) for replica_type, spec in parsed.replica_specs.items()
    ]
    assert (summary.kind, summary.api_version) == (kind, api_version)


def test_the_summary_reads_state_message_counts_and_restarts_from_the_status() -> None:
    status = JobStatus(
        conditions=[
            JobCondition(type="Created", status="True", message="created"),
            JobCondition(type="Running", status="True", message="it runs"),
        ],
        replica_statuses={"Master": ReplicaStatus(active=1), "Worker": ReplicaStatus(active=2, restarts=1)},
    )
    wire = job("PyTorchJob", {"Master": 1, "Worker": None}, name="mnist").with_status(status).to_wire()
    summary = JobSummary.from_wire(wire)
    assert (summary.name, summary.namespace, summary.state, summary.message) == (
        "mnist",
        "default",
        "Running",
        "it runs",
    )
    assert summary.replicas == (ReplicaCounts("Master", 1, 1), ReplicaCounts("Worker", 1, 2))
    assert summary.replaced_restarts == 1


def test_a_job_without_status_has_no_state_and_no_active_replicas() -> None:
    summary = JobSummary.from_wire(job("TFJob", {"Worker": 2}).to_wire())
    assert summary.state == ""
    assert summary.replicas == (ReplicaCounts("Worker", 2, 0),)
    assert summary.created is None


@pytest.mark.parametrize(
    "wire",
    [
        {},
        {"metadata": "x", "spec": [], "status": 3},
        {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": "3"}}}, "status": {"conditions": {"a": 1}}},
        {"status": {"conditions": [None, "Running"], "replicaStatuses": {"Worker": {"active": True}}}},
        {"metadata": {"creationTimestamp": "yesterday", "labels": ["a"]}},
    ],
)
def test_a_field_of_the_wrong_shape_reads_as_absent(wire: dict[str, Any]) -> None:
    summary = JobSummary.from_wire(wire)
    assert summary.created is None
    assert all(r.active == 0 for r in summary.replicas)
    assert not is_finished(wire)


def test_a_true_succeeded_or_failed_condition_finishes_the_job() -> None:
    def with_condition(type_: str, status: str) -> dict[str, Any]:
        return {"status": {"conditions": [{"type": type_, "status": status}]}}

    assert is_finished(with_condition("Succeeded", "True"))
    assert is_finished(with_condition("Failed", "True"))
    assert not is_finished(with_condition("Failed", "False"))
    assert not is_finished(with_condition("Running", "True"))
