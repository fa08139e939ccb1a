"""What the operator sees of a pod: the engine's ObservedReplica, field by field (§4.3)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from builders import job
from kubetrain.engine.types import Phase
from kubetrain.frameworks.registry import framework_for
from kubetrain.kube.observe import observe, observe_pod

PYTORCH = job("PyTorchJob", {"Master": 1, "Worker": 2})
FRAMEWORK = framework_for(PYTORCH)


def pod(
    replica_type: str = "worker",
    index: str = "1",
    *,
    phase: str | None = "Running",
    statuses: list[dict[str, Any]] | None = None,
    **metadata: Any,
) -> dict[str, Any]:
    labels = {
        "training.kubeflow.org/replica-type": replica_type,
        "training.kubeflow.org/replica-index": index,
    }
    status: dict[str, Any] = {"containerStatuses": statuses or []}
    if phase is not None:
        status["phase"] = phase
    return {
        "metadata": {"name": f"j-{replica_type}-{index}", "labels": labels, **metadata},
        "spec": {"containers": [{"name": "sidecar"}, {"name": "pytorch"}]},
        "status": status,
    }


def terminated(name: str, code: int, state: str = "state") -> dict[str, Any]:
    return {"name": name, state: {"terminated": {"exitCode": code}}, "restartCount": 0}


def test_type_and_index_come_from_the_labels_with_the_type_in_its_canonical_case() -> None:
    replica = observe_pod(pod("worker", "1"), PYTORCH, FRAMEWORK)
    assert replica is not None
    assert (replica.replica_type, replica.index) == ("Worker", 1)


def test_a_pod_without_replica_labels_is_not_a_replica() -> None:
    unlabelled = pod()
    unlabelled["metadata"]["labels"] = {}
    assert observe_pod(unlabelled, PYTORCH, FRAMEWORK) is None


def test_a_pod_with_a_malformed_index_is_not_a_replica() -> None:
    assert observe_pod(pod(index="one"), PYTORCH, FRAMEWORK) is None


def test_a_pod_without_a_phase_is_pending() -> None:
    replica = observe_pod(pod(phase=None), PYTORCH, FRAMEWORK)
    assert replica is not None and replica.phase is Phase.PENDING


def test_the_exit_code_is_the_default_containers_not_the_first_containers() -> None:
    statuses = [terminated("sidecar", 0), terminated("pytorch", 137)]
    replica = observe_pod(pod(phase="Failed", statuses=statuses), PYTORCH, FRAMEWORK)
    assert replica is not None and replica.exit_code == 137


def test_a_running_pod_reports_no_exit_code_even_after_an_in_place_restart() -> None:
    statuses = [terminated("pytorch", 1, state="lastState")]
    replica = observe_pod(pod(phase="Running", statuses=statuses), PYTORCH, FRAMEWORK)
    assert replica is not None and replica.exit_code is None


def test_restart_count_is_summed_over_every_container() -> None:
    statuses = [{"name": "sidecar", "restartCount": 2}, {"name": "pytorch", "restartCount": 3}]
    replica = observe_pod(pod(statuses=statuses), PYTORCH, FRAMEWORK)
    assert replica is not None and replica.restart_count == 5


def test_a_deletion_timestamp_makes_the_replica_terminating_with_that_deadline() -> None:
    replica = observe_pod(pod(deletionTimestamp="2026-01-02T03:04:05Z"), PYTORCH, FRAMEWORK)
    assert replica is not None and replica.terminating
    assert replica.deletion_timestamp == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_ready_follows_the_pods_ready_condition_and_reason_its_status_reason() -> None:
    ready = pod()
    ready["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    ready["status"]["reason"] = "Evicted"
    replica = observe_pod(ready, PYTORCH, FRAMEWORK)
    assert replica is not None and replica.ready and replica.reason == "Evicted"


def test_services_are_observed_by_type_and_index() -> None:
    service = {"metadata": pod("master", "0")["metadata"]}
    observation = observe(PYTORCH, FRAMEWORK, [], [service])
    assert observation.services == frozenset({("Master", 0)})


def test_without_gang_scheduling_there_is_no_pod_group_state() -> None:
    assert observe(PYTORCH, FRAMEWORK, [], []).pod_group is None


def test_with_gang_scheduling_a_missing_pod_group_is_observed_as_absent() -> None:
    group = observe(PYTORCH, FRAMEWORK, [], [], None, gang_scheduling=True).pod_group
    assert group is not None and not group.exists


def test_with_gang_scheduling_the_volcano_phase_is_observed() -> None:
    existing = {"metadata": {"name": "j"}, "status": {"phase": "Running"}}
    group = observe(PYTORCH, FRAMEWORK, [], [], existing, gang_scheduling=True).pod_group
    assert group is not None and group.exists and group.phase == "Running"


def test_a_container_terminated_with_a_non_zero_code_is_a_warning_with_its_reason() -> None:
    status = {"name": "pytorch", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}
    replica = observe_pod(pod(statuses=[status]), PYTORCH, FRAMEWORK)
    assert replica is not None
    assert replica.warnings == (("OOMKilled", "container pytorch exitCode: 137 terminated message: "),)


def test_a_container_terminated_with_code_zero_is_no_warning() -> None:
    replica = observe_pod(pod(statuses=[terminated("sidecar", 0)]), PYTORCH, FRAMEWORK)
    assert replica is not None
    assert replica.warnings == ()


def test_a_container_waiting_with_a_message_is_a_warning_with_the_waiting_reason() -> None:
    waiting = {"reason": "CrashLoopBackOff", "message": "back-off 10s restarting failed container"}
    replica = observe_pod(
        pod(statuses=[{"name": "pytorch", "state": {"waiting": waiting}}]), PYTORCH, FRAMEWORK
    )
    assert replica is not None
    assert replica.warnings == (
        ("CrashLoopBackOff", "container pytorch waiting message: back-off 10s restarting failed container"),
    )


def test_a_container_waiting_without_a_message_is_no_warning() -> None:
    status = {"name": "pytorch", "state": {"waiting": {"reason": "ContainerCreating"}}}
    replica = observe_pod(pod(statuses=[status]), PYTORCH, FRAMEWORK)
    assert replica is not None
    assert replica.warnings == ()


def test_init_containers_are_read_only_while_no_container_has_a_status() -> None:
    waiting = {
        "name": "init-pytorch",
        "state": {"waiting": {"reason": "ErrImagePull", "message": "no image"}},
    }
    unstarted = pod(phase="Pending")
    unstarted["status"]["initContainerStatuses"] = [waiting]
    started = pod(statuses=[{"name": "pytorch", "state": {"running": {}}}])
    started["status"]["initContainerStatuses"] = [waiting]
    observed = [observe_pod(p, PYTORCH, FRAMEWORK) for p in (unstarted, started)]
    assert [r.warnings for r in observed if r is not None] == [
        (("ErrImagePull", "container init-pytorch waiting message: no image"),),
        (),
    ]


def condition(type_: str, status: str, at: str, reason: str = "", message: str = "") -> dict[str, Any]:
    return {"type": type_, "status": status, "lastTransitionTime": at, "reason": reason, "message": message}


def test_a_pod_whose_latest_condition_is_not_true_is_a_warning_with_the_conditions_reason() -> None:
    unschedulable = pod(phase="Pending")
    unschedulable["status"]["conditions"] = [
        condition(
            "PodScheduled", "False", "2026-03-01T12:00:05Z", "Unschedulable", "0/3 nodes are available"
        ),
        condition("Initialized", "True", "2026-03-01T12:00:00Z"),
    ]
    replica = observe_pod(unschedulable, PYTORCH, FRAMEWORK)
    assert replica is not None
    assert replica.warnings == (("Unschedulable", "condition message: 0/3 nodes are available"),)


def test_a_pod_whose_latest_condition_is_true_is_no_warning() -> None:
    scheduled = pod(phase="Pending")
    scheduled["status"]["conditions"] = [
        condition("PodScheduled", "False", "2026-03-01T12:00:00Z", "Unschedulable"),
        condition("PodScheduled", "True", "2026-03-01T12:00:09Z"),
    ]
    replica = observe_pod(scheduled, PYTORCH, FRAMEWORK)
    assert replica is not None
    assert replica.warnings == ()
