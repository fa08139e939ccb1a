"""How the SDK reads a TrainJob's pods (the JobSet's): which node each is, which container holds its log,
how many nodes run, and which states a wait may ask for."""

from __future__ import annotations

import pytest

from kubetrain.api.summary import NodeTally
from kubetrain.sdk import trainjobs
from kubetrain.sdk.trainjobs import PodSeen


def pod(name: str, job: str, completion: int, job_index: int = 0, phase: str = "Running") -> PodSeen:
    labels = {
        "jobset.sigs.k8s.io/jobset-name": "tj",
        "jobset.sigs.k8s.io/replicatedjob-name": job,
        "jobset.sigs.k8s.io/job-index": str(job_index),
        "batch.kubernetes.io/job-completion-index": str(completion),
    }
    return PodSeen(name, labels, phase)


def test_a_pods_replica_is_its_replicated_job_and_completion_index() -> None:
    found = trainjobs.replicas([pod("tj-node-0-1-x7k", "node", 1), pod("tj-node-0-0-q2w", "node", 0)])
    assert found == {"tj-node-0-1-x7k": ("node", 1), "tj-node-0-0-q2w": ("node", 0)}


def test_the_replicas_of_a_second_job_follow_the_firsts() -> None:
    pods = [
        pod("a", "node", 0),
        pod("b", "node", 1),
        pod("c", "node", 0, job_index=1),
        pod("d", "node", 1, 1),
    ]
    assert {name: index for name, (_, index) in trainjobs.replicas(pods).items()} == {
        "a": 0,
        "b": 1,
        "c": 2,
        "d": 3,
    }


def test_a_pod_without_jobset_labels_is_no_replica() -> None:
    assert trainjobs.replicas([PodSeen("stray", {}, "Running")]) == {}


@pytest.mark.parametrize(
    ("job", "container"),
    [("node", "node"), ("launcher", "node"), ("dataset-initializer", "dataset-initializer"), (None, "node")],
)
def test_a_steps_log_is_read_from_its_container(job: str | None, container: str) -> None:
    assert trainjobs.container_of(job) == container


def test_the_training_nodes_are_the_node_and_launcher_pods() -> None:
    pods = [
        pod("a", "node", 0, phase="Running"),
        pod("b", "node", 1, phase="Pending"),
        pod("c", "launcher", 0, phase="Succeeded"),
        pod("d", "dataset-initializer", 0, phase="Succeeded"),
    ]
    assert trainjobs.node_tally(pods) == NodeTally(seen=3, active=2, running=2)


def test_waiting_for_succeeded_on_a_trainjob_waits_for_complete() -> None:
    assert trainjobs.wanted_states({"Succeeded", "Failed"}) == {"Complete", "Failed"}


def test_a_trainjob_cannot_be_waited_for_to_restart() -> None:
    with pytest.raises(ValueError, match=r"must be a subset of .*'Complete'.* for a TrainJob"):
        trainjobs.wanted_states({"Restarting"})
