"""A lone operator replica says what it gives up: the count is its Deployment's, found through its pod's and
its ReplicaSet's controller references."""

from __future__ import annotations

from typing import Any

import httpx2

from kubetrain.kube.replicas import DeclaredReplicas, availability_warning, declared_replicas

NAMESPACE = "kubeflow"
POD = "training-operator-7d9c-abcde"
REPLICA_SET = "training-operator-7d9c"


def _owned_by(kind: str, name: str) -> dict[str, Any]:
    return {"ownerReferences": [{"kind": kind, "name": name, "controller": True}]}


def _api(objects: dict[str, dict[str, Any]]) -> httpx2.AsyncClient:
    def handle(request: httpx2.Request) -> httpx2.Response:
        found = objects.get(request.url.path)
        if found is None:
            return httpx2.Response(404, json={"reason": "NotFound"})
        return httpx2.Response(200, json=found)

    return httpx2.AsyncClient(transport=httpx2.MockTransport(handle), base_url="https://api")


def _installed(replicas: int) -> dict[str, dict[str, Any]]:
    apps = f"/apis/apps/v1/namespaces/{NAMESPACE}"
    return {
        f"/api/v1/namespaces/{NAMESPACE}/pods/{POD}": {"metadata": _owned_by("ReplicaSet", REPLICA_SET)},
        f"{apps}/replicasets/{REPLICA_SET}": {
            "metadata": _owned_by("Deployment", "training-operator"),
            # A rollout's new ReplicaSet counts up from zero: not what the install asked for.
            "spec": {"replicas": 0},
        },
        f"{apps}/deployments/training-operator": {"spec": {"replicas": replicas}},
    }


async def test_the_count_is_the_deployments_found_through_the_controller_references() -> None:
    declared = await declared_replicas(_api(_installed(2)), NAMESPACE, POD)

    assert declared == DeclaredReplicas("kubeflow/training-operator", 2)


async def test_nothing_is_known_for_a_pod_no_deployment_runs() -> None:
    objects: dict[str, dict[str, Any]] = {f"/api/v1/namespaces/{NAMESPACE}/pods/{POD}": {"metadata": {}}}

    assert await declared_replicas(_api(objects), NAMESPACE, POD) is None


async def test_nothing_is_known_where_the_deployment_may_not_be_read() -> None:
    objects = _installed(1)
    del objects[f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/training-operator"]

    assert await declared_replicas(_api(objects), NAMESPACE, POD) is None


def test_one_replica_with_leader_election_says_what_a_lost_node_costs() -> None:
    warning = availability_warning(True, DeclaredReplicas("kubeflow/training-operator", 1))

    assert warning is not None
    assert warning.startswith("Deployment kubeflow/training-operator runs one replica: if its node is lost")
    assert "High availability" in warning


def test_a_replica_without_leader_election_says_it_must_be_alone() -> None:
    warning = availability_warning(False, DeclaredReplicas("kubeflow/training-operator", 1))

    assert warning is not None
    assert warning.startswith("leader election is off, so Deployment kubeflow/training-operator must run one")


def test_two_replicas_or_a_host_process_say_nothing() -> None:
    assert availability_warning(True, DeclaredReplicas("kubeflow/training-operator", 2)) is None
    assert availability_warning(False, None) is None
