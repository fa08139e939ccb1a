"""MPIJob v2beta1 children as the operator observes them: roles from ``job-role``, the launcher from
its batch/v1 Job (§4.12)."""

from __future__ import annotations

from typing import Any

from builders import job
from kubetrain.engine.types import Phase
from kubetrain.frameworks.registry import framework_for
from kubetrain.kube.observe import observe_batch_job, observe_pod

V2BETA1 = "kubeflow.org/v2beta1"
MPIJOB = job("MPIJob", {"Launcher": 1, "Worker": 2}, name="pi", api_version=V2BETA1)
AS_WORKER = job(
    "MPIJob", {"Launcher": 1, "Worker": 2}, name="pi", api_version=V2BETA1, spec={"runLauncherAsWorker": True}
)
FRAMEWORK = framework_for(MPIJOB)


def labelled(role: str, index: str | None = None, **extra: Any) -> dict[str, Any]:
    labels = {"training.kubeflow.org/job-role": role}
    if index is not None:
        labels["training.kubeflow.org/replica-index"] = index
    return {"metadata": {"labels": labels, "name": "x"}, **extra}


def launcher_pod(phase: str, created: str = "2026-01-01T00:00:00Z", **status: Any) -> dict[str, Any]:
    pod = labelled("launcher", status=({"phase": phase} | status))
    pod["metadata"]["creationTimestamp"] = created
    return pod


def batch_job(*conditions: dict[str, str]) -> dict[str, Any]:
    """A launcher Job as the mpi-operator makes it: ``app: <job>`` on it, the replica's labels on its
    pod template."""
    template = labelled("launcher")
    return {
        "metadata": {"labels": {"app": "pi"}, "name": "pi-launcher"},
        "spec": {"template": {"metadata": template["metadata"]}},
        "status": {"conditions": list(conditions)},
    }


def test_a_worker_pod_is_identified_by_its_job_role_and_index() -> None:
    replica = observe_pod(labelled("worker", "1", status={"phase": "Running"}), MPIJOB, FRAMEWORK)
    assert replica is not None and (replica.replica_type, replica.index) == ("Worker", 1)


def test_worker_indices_are_their_labels_also_when_the_launcher_is_a_worker() -> None:
    # mpi-operator v0.6.0 labels worker-1 with index 1 whether or not the launcher is a worker too.
    replica = observe_pod(labelled("worker", "1", status={"phase": "Running"}), AS_WORKER, FRAMEWORK)
    assert replica is not None and (replica.replica_type, replica.index) == ("Worker", 1)


def test_a_complete_launcher_job_is_a_succeeded_launcher() -> None:
    replica = observe_batch_job(batch_job({"type": "Complete", "status": "True"}), [], MPIJOB, FRAMEWORK)
    assert replica is not None and (replica.replica_type, replica.phase) == ("Launcher", Phase.SUCCEEDED)


def test_a_failed_launcher_job_keeps_its_reason_and_message() -> None:
    failed = {"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": "too long"}
    replica = observe_batch_job(batch_job(failed), [], MPIJOB, FRAMEWORK)
    assert replica is not None and replica.phase is Phase.FAILED
    assert (replica.reason, replica.message) == ("DeadlineExceeded", "too long")


def test_past_its_backoff_limit_the_reason_names_the_last_failed_pods_reason() -> None:
    failed = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "limit"}
    pods = [
        launcher_pod("Failed", "2026-01-01T00:00:00Z", reason="Old", message="first"),
        launcher_pod("Failed", "2026-01-01T00:01:00Z", reason="OOMKilled", message="out of memory"),
    ]
    replica = observe_batch_job(batch_job(failed), pods, MPIJOB, FRAMEWORK)
    assert replica is not None
    assert (replica.reason, replica.message) == ("BackoffLimitExceeded/OOMKilled", "limit: out of memory")


def test_an_unfinished_launcher_job_runs_while_one_of_its_pods_runs() -> None:
    pods = [launcher_pod("Failed"), launcher_pod("Running")]
    replica = observe_batch_job(batch_job(), pods, MPIJOB, FRAMEWORK)
    assert replica is not None and replica.phase is Phase.RUNNING and replica.restart_count == 0


def test_an_unfinished_launcher_job_without_a_running_pod_is_pending() -> None:
    replica = observe_batch_job(batch_job(), [launcher_pod("Failed")], MPIJOB, FRAMEWORK)
    assert replica is not None and replica.phase is Phase.PENDING


def test_a_running_launcher_job_reports_its_failed_attempts_as_history() -> None:
    running = batch_job()
    running["status"]["failed"] = 2
    replica = observe_batch_job(running, [launcher_pod("Running")], MPIJOB, FRAMEWORK)
    assert replica is not None and (replica.phase, replica.retried_failures) == (Phase.RUNNING, 2)
