"""What the operator sees of disruptions, lost nodes and waiting pods: a pod's DisruptionTarget, creation time
and node; a node's Ready condition and out-of-service taint; a disrupted pod's departure, counted once."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx2

from builders import job
from kubetrain.engine.types import Disruption, ObservedNode, Traits
from kubetrain.frameworks.registry import framework_for
from kubetrain.kube.act import Actor
from kubetrain.kube.compact import compact_node
from kubetrain.kube.controller import ChildStores, JobController
from kubetrain.kube.events import EventRecorder
from kubetrain.kube.metrics import OperatorMetrics
from kubetrain.kube.observe import observe, observe_node, observe_pod
from kubetrain.kube.render import RenderSettings
from kubetrain.kube.runtime.expectations import Expectations
from kubetrain.kube.runtime.store import ChangeType, ObjectChange, Store

from .fakes import FakeApi

PYTORCH = job("PyTorchJob", {"Master": 1, "Worker": 1}, name="j")
FRAMEWORK = framework_for(PYTORCH)
LOST_AT = "2026-03-01T11:59:10Z"
EVICTION = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "EvictionByEvictionAPI",
    "message": "Eviction API: evicting",
}


def pod(
    replica_type: str = "worker", *conditions: dict[str, Any], node: str = "node-b", uid: str = "u1"
) -> Any:
    return {
        "metadata": {
            "name": f"j-{replica_type}-0",
            "namespace": "default",
            "uid": f"pod-{replica_type}",
            "creationTimestamp": "2026-03-01T11:00:00Z",
            "labels": {
                "training.kubeflow.org/replica-type": replica_type,
                "training.kubeflow.org/replica-index": "0",
                "training.kubeflow.org/operator-name": "pytorchjob-controller",
                "training.kubeflow.org/job-name": "j",
            },
            "ownerReferences": [{"controller": True, "uid": uid, "kind": "PyTorchJob", "name": "j"}],
        },
        "spec": {"nodeName": node, "containers": [{"name": "pytorch"}]},
        "status": {"phase": "Running", "conditions": list(conditions)},
    }


def node(name: str, ready: str = "True", *taints: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "3", "labels": {"a": "b"}},
        "spec": {"taints": list(taints)} if taints else {},
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {
                    "type": "Ready",
                    "status": ready,
                    "reason": "NodeStatusUnknown",
                    "message": "Kubelet stopped posting node status.",
                    "lastHeartbeatTime": "2026-03-01T11:58:00Z",
                    "lastTransitionTime": LOST_AT,
                },
            ],
            "images": [{"names": ["registry.example.com/big:1"], "sizeBytes": 1}],
        },
    }


OUT_OF_SERVICE = {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}


def test_a_pods_disruption_target_is_what_is_ending_it() -> None:
    replica = observe_pod(pod("worker", EVICTION), PYTORCH, FRAMEWORK)
    assert replica is not None
    assert replica.disruption == Disruption("EvictionByEvictionAPI", "Eviction API: evicting")


def test_a_disruption_target_that_is_not_true_is_no_disruption() -> None:
    replica = observe_pod(pod("worker", {**EVICTION, "status": "False"}), PYTORCH, FRAMEWORK)
    assert replica is not None and replica.disruption is None


def test_a_pod_is_seen_with_its_creation_time_and_node() -> None:
    replica = observe_pod(pod(), PYTORCH, FRAMEWORK)
    assert replica is not None
    assert (replica.created_at, replica.node) == (datetime(2026, 3, 1, 11, tzinfo=UTC), "node-b")


def test_a_node_is_its_ready_condition() -> None:
    assert observe_node(node("node-b", "Unknown")) == ObservedNode(
        "node-b",
        "Unknown",
        datetime(2026, 3, 1, 11, 59, 10, tzinfo=UTC),
        "NodeStatusUnknown",
        "Kubelet stopped posting node status.",
    )


def test_a_node_tainted_out_of_service_is_lost_even_while_ready() -> None:
    observed = observe_node(node("node-b", "True", OUT_OF_SERVICE))
    assert observed.out_of_service and observed.lost


def test_a_compacted_node_is_observed_exactly_as_the_whole_node() -> None:
    whole = node("node-b", "Unknown", OUT_OF_SERVICE)
    assert observe_node(compact_node(node("node-b", "Unknown", OUT_OF_SERVICE))) == observe_node(whole)


def test_a_compacted_node_drops_its_images_other_conditions_and_heartbeat() -> None:
    compacted = compact_node(node("node-b"))
    assert "images" not in compacted["status"]
    assert [c["type"] for c in compacted["status"]["conditions"]] == ["Ready"]
    assert "lastHeartbeatTime" not in compacted["status"]["conditions"][0]


def test_the_observation_holds_only_the_nodes_the_jobs_pods_are_on() -> None:
    nodes = {"node-a": node("node-a"), "node-b": node("node-b", "Unknown"), "node-c": node("node-c")}
    seen = observe(PYTORCH, FRAMEWORK, [pod("master", node="node-a"), pod()], None, nodes=nodes.get)
    assert [n.name for n in seen.nodes] == ["node-a", "node-b"]


class WritingApi(FakeApi):
    """Answers a status write as the API server does: the object, at a new resourceVersion."""

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        response = super().handle(request)
        body = response.json()
        if request.method == "PUT" and isinstance(body, dict) and "metadata" in body:
            version = int(body["metadata"].get("resourceVersion") or 0) + len(self.requests)
            body["metadata"] = {**body["metadata"], "resourceVersion": str(version)}
        return httpx2.Response(response.status_code, json=body)


def test_the_observation_holds_the_node_a_departed_pod_was_on() -> None:
    nodes = {"node-a": node("node-a"), "node-b": node("node-b", "Unknown")}
    seen = observe(
        PYTORCH, FRAMEWORK, [pod("master", node="node-a")], None, nodes=nodes.get, departed=[pod()]
    )
    assert [n.name for n in seen.nodes] == ["node-a", "node-b"]
    assert [(r.replica_type, r.node) for r in seen.departed] == [("Worker", "node-b")]


def _controller(api: FakeApi, nodes: Store | None = None) -> JobController:
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(api.handle), base_url="https://api")
    metrics = OperatorMetrics()
    expectations = Expectations()
    actor = Actor(http, expectations, EventRecorder(http), metrics, RenderSettings())
    jobs = Store()
    stored = {
        **PYTORCH.to_wire(),
        "metadata": {"name": "j", "namespace": "default", "uid": "u1", "resourceVersion": "7"},
    }
    jobs.apply(ChangeType.ADDED, stored)
    pods, services = Store(), Store()
    for replica_type in ("master", "worker"):
        # Every replica and its service there: nothing to create, so no expectation holds a reconcile back.
        replacement = pod(replica_type)
        replacement["metadata"]["uid"] = f"new-{replica_type}"
        pods.apply(ChangeType.ADDED, replacement)
        services.apply(ChangeType.ADDED, {"metadata": replacement["metadata"]})
    children = ChildStores(pods=pods, services=services, pod_groups=None, nodes=nodes)
    return JobController(FRAMEWORK, jobs, children, actor, expectations, metrics, Traits(colocated=False))


def _disruptions_written(api: FakeApi) -> list[int]:
    """The Worker's disruptions in each status the controller wrote."""
    statuses = [body["status"] for method, path, body in api.requests if method == "PUT" and "status" in path]
    return [
        int(((s.get("replicaStatuses") or {}).get("Worker") or {}).get("disruptions", 0)) for s in statuses
    ]


async def test_a_disrupted_pods_deletion_is_counted_by_the_next_reconcile() -> None:
    api = FakeApi()
    controller = _controller(api)
    controller.on_child_change(
        ObjectChange(ChangeType.DELETED, pod("worker", EVICTION), None), "pods", "j", "worker"
    )
    await controller.reconcile("default/j")
    assert _disruptions_written(api) == [1]


async def test_a_departure_is_handed_to_one_successful_reconcile_only() -> None:
    api = WritingApi()
    controller = _controller(api)
    controller.on_child_change(
        ObjectChange(ChangeType.DELETED, pod("worker", EVICTION), None), "pods", "j", "worker"
    )
    await controller.reconcile("default/j")
    await controller.reconcile("default/j")
    # The second found nothing more to count (it may still write the job's Restarting condition ended).
    assert set(_disruptions_written(api)) == {1}


async def test_a_pod_deleted_without_a_disruption_is_not_a_departure() -> None:
    api = FakeApi()
    controller = _controller(api)
    controller.on_child_change(ObjectChange(ChangeType.DELETED, pod("worker"), None), "pods", "j", "worker")
    await controller.reconcile("default/j")
    assert _disruptions_written(api) == [0]


async def test_a_pod_deleted_from_a_lost_node_is_a_departure() -> None:
    api = FakeApi()
    nodes = Store()
    nodes.apply(ChangeType.ADDED, compact_node(node("node-b", "Unknown", OUT_OF_SERVICE)))
    controller = _controller(api, nodes)
    controller.on_child_change(ObjectChange(ChangeType.DELETED, pod("worker"), None), "pods", "j", "worker")
    await controller.reconcile("default/j")
    assert _disruptions_written(api) == [1]


async def test_a_departed_pod_of_another_job_of_the_same_name_is_not_counted() -> None:
    api = FakeApi()
    controller = _controller(api)
    older = pod("worker", EVICTION, uid="an-older-job")
    controller.on_child_change(ObjectChange(ChangeType.DELETED, older, None), "pods", "j", "worker")
    await controller.reconcile("default/j")
    assert _disruptions_written(api) == [0]
