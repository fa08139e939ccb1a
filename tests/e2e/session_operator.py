"""The e2e session's operator, installed from the standalone overlay in namespace kubeflow: its pods, its
leader, and holding it at zero replicas while a test runs an operator of its own in its place."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from e2e.realpods import RealCluster, wait_until
from waiting import PATIENCE

NAMESPACE = "kubeflow"
DEPLOYMENT = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/training-operator"
SELECTOR = "control-plane=kubeflow-training-operator"
LEASE_NAME = "1ca428e5.training-operator.kubeflow.org"


def lease_path(namespace: str = NAMESPACE) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{LEASE_NAME}"


def operator_pods(cluster: RealCluster) -> list[dict[str, Any]]:
    """Its pods that run or may run: an evicted one stays behind as a Failed pod, but is no operator."""
    found = cluster.api.get(f"/api/v1/namespaces/{NAMESPACE}/pods", {"labelSelector": SELECTOR})["items"]
    return [p for p in found if p.get("status", {}).get("phase") not in ("Succeeded", "Failed")]


def leader(cluster: RealCluster, namespace: str = NAMESPACE) -> str | None:
    """The pod holding the Lease: its identity is ``<hostname>_<uuid>``, the hostname being the pod's name."""
    path = lease_path(namespace)
    if not cluster.api.exists(path):
        return None
    holder = cluster.api.get(path)["spec"].get("holderIdentity") or ""
    return holder.split("_", 1)[0] or None


def wait_available(cluster: RealCluster, timeout: float = PATIENCE) -> int:
    """Every replica the Deployment asks for available; how many that is."""

    def available() -> int | None:
        deployment = cluster.api.get(DEPLOYMENT)
        wanted = int(deployment["spec"]["replicas"])
        available = deployment.get("status", {}).get("availableReplicas", 0)
        return wanted if len(operator_pods(cluster)) == available == wanted else None

    replicas: int = wait_until("the operator Deployment available", available, timeout)
    return replicas


def _scale(cluster: RealCluster, replicas: int) -> None:
    cluster.api.patch(DEPLOYMENT, {"spec": {"replicas": replicas}})

    def settled() -> bool:
        available = cluster.api.get(DEPLOYMENT).get("status", {}).get("availableReplicas", 0)
        return len(operator_pods(cluster)) == replicas and available == replicas

    wait_until(f"the session's operator at {replicas} replicas", settled, 180.0)


@contextmanager
def held_at_zero(cluster: RealCluster) -> Iterator[None]:
    """The session's operator at zero replicas inside, back at as many as it had after."""
    replicas = int(cluster.api.get(DEPLOYMENT)["spec"]["replicas"])
    _scale(cluster, 0)
    try:
        yield
    finally:
        _scale(cluster, replicas)
