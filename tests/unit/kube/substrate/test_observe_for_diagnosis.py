"""What diagnosis reads of a pod: its containers, the scheduler's reason, readiness and gang membership."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from builders import job
from kubetrain.engine.types import ObservedContainer, ObservedReplica
from kubetrain.frameworks.registry import framework_for
from kubetrain.kube.observe import observe, observe_pod, with_last_lines

PYTORCH = job("PyTorchJob", {"Master": 1, "Worker": 2})
FRAMEWORK = framework_for(PYTORCH)
LABELS = {"training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": "1"}


def pod(
    spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None, **metadata: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": "j-worker-1", "labels": {**LABELS, **metadata.pop("labels", {})}, **metadata},
        "spec": spec or {"containers": [{"name": "pytorch", "image": "trainer:1"}]},
        "status": {"phase": "Pending", **(status or {})},
    }


def observed(obj: dict[str, Any]) -> ObservedReplica:
    replica = observe_pod(obj, PYTORCH, FRAMEWORK)
    assert replica is not None
    return replica


def test_containers_are_the_init_containers_then_the_containers_with_their_spec_and_status() -> None:
    spec = {
        "initContainers": [{"name": "init-pytorch", "image": "busybox:1"}],
        "containers": [
            {"name": "pytorch", "image": "trainer:1", "resources": {"limits": {"memory": "64Mi"}}}
        ],
    }
    status = {
        "phase": "Running",
        "initContainerStatuses": [
            {
                "name": "init-pytorch",
                "restartCount": 1,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
            }
        ],
        "containerStatuses": [
            {
                "name": "pytorch",
                "imageID": "localhost/trainer@sha256:abc",
                "restartCount": 3,
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled", "message": "bye"}},
            }
        ],
    }

    assert observed(pod(spec, status)).containers == (
        ObservedContainer(
            "init-pytorch",
            image="busybox:1",
            init=True,
            last_exit_code=0,
            last_reason="Completed",
            restart_count=1,
        ),
        ObservedContainer(
            "pytorch",
            image="trainer:1",
            image_id="localhost/trainer@sha256:abc",
            waiting_reason="CrashLoopBackOff",
            waiting_message="back-off 40s",
            last_exit_code=137,
            last_reason="OOMKilled",
            last_message="bye",
            memory_limit="64Mi",
            restart_count=3,
        ),
    )


def test_an_init_container_that_completed_at_its_first_try_is_left_out() -> None:
    spec = {
        "initContainers": [{"name": "init-pytorch"}, {"name": "fetch"}],
        "containers": [{"name": "pytorch"}],
    }
    done = {"terminated": {"exitCode": 0, "reason": "Completed"}}
    status = {
        "initContainerStatuses": [
            {"name": "init-pytorch", "state": done, "restartCount": 0},
            {"name": "fetch", "state": done, "restartCount": 2},
        ]
    }

    assert [c.name for c in observed(pod(spec, status)).containers] == ["fetch", "pytorch"]


def test_a_running_container_says_since_when_and_a_container_without_status_only_what_its_spec_says() -> None:
    spec = {
        "initContainers": [{"name": "init-pytorch", "image": "busybox:1"}],
        "containers": [{"name": "pytorch"}],
    }
    status = {
        "initContainerStatuses": [
            {"name": "init-pytorch", "state": {"running": {"startedAt": "2026-03-01T12:00:00Z"}}}
        ]
    }

    init, main = observed(pod(spec, status)).containers

    assert init.running_since == datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    assert main == ObservedContainer("pytorch")


def test_the_schedulers_reason_is_kept_while_the_pod_cannot_be_placed() -> None:
    refused = {
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
            }
        ]
    }

    assert (
        observed(pod(status=refused)).unschedulable
        == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    )
    assert observed(pod()).unschedulable is None


def test_ready_since_is_when_the_ready_condition_last_turned_true() -> None:
    ready = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-03-01T12:01:00Z"}],
    }
    not_ready = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": "2026-03-01T12:01:00Z"}],
    }

    assert observed(pod(status=ready)).ready_since == datetime(2026, 3, 1, 12, 1, tzinfo=UTC)
    assert observed(pod(status=not_ready)).ready_since is None


def test_a_pod_in_a_pod_group_going_to_a_gang_scheduler_is_gang_scheduled() -> None:
    spec = {"schedulerName": "scheduler-plugins-scheduler", "containers": [{"name": "pytorch"}]}
    grouped = pod(spec, labels={"scheduling.x-k8s.io/pod-group": "j"})
    volcano = pod({**spec, "schedulerName": "volcano"}, annotations={"scheduling.k8s.io/group-name": "j"})

    assert observed(grouped).gang_scheduled
    assert observed(volcano).gang_scheduled


def test_a_pod_group_member_whose_template_names_the_default_scheduler_is_not_gang_scheduled() -> None:
    spec = {"schedulerName": "default-scheduler", "containers": [{"name": "pytorch"}]}

    assert not observed(pod(spec, labels={"scheduling.x-k8s.io/pod-group": "j"})).gang_scheduled
    assert not observed(pod()).gang_scheduled


def test_last_lines_read_for_a_container_are_added_to_it_alone() -> None:
    spec = {"containers": [{"name": "pytorch"}, {"name": "sidecar"}]}
    observation = observe(PYTORCH, FRAMEWORK, [pod(spec)], None)

    [replica] = with_last_lines(observation, {("Worker", 1, "pytorch"): "boom\n"}).replicas

    assert [(c.name, c.last_lines) for c in replica.containers] == [("pytorch", "boom\n"), ("sidecar", None)]
