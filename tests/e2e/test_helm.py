"""The operator installed by ``helm install`` of charts/kubetrain on the real node: two replicas from the
operator image under the chart's ServiceAccount and least-privilege ClusterRole, one of them leading; delete
the leader's pod and the other takes the Lease over and reconciles the next job.

The session's operator (the kustomize overlay, namespace kubeflow) watches every namespace under a Lease of
its own namespace, so while this release runs it is scaled to zero, and brought back after: two operators
must never reconcile the same jobs. The CRDs stay the overlay's (``crds.install=false``, the chart's switch
for CRDs managed elsewhere).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from builders import container, manifest
from e2e.realpods import TEST_IMAGE, RealCluster, wait_until
from kubetrain.envtest import coscheduler

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kubetrain"
RELEASE = "kubetrain"
LEASE_NAME = "1ca428e5.training-operator.kubeflow.org"
SHARED_OPERATOR = "/apis/apps/v1/namespaces/kubeflow/deployments/training-operator"
POD_SELECTOR = "app.kubernetes.io/name=kubetrain"


class Release:
    def __init__(self, cluster: RealCluster, namespace: str, helm: Path, home: Path) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.helm = helm
        # helm's own dirs, so the test neither reads nor writes the user's.
        self.env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "KUBECONFIG": str(cluster.kubeconfig)}

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.helm), *args, "--namespace", self.namespace],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            env=self.env,
        )

    def pods(self) -> list[dict[str, Any]]:
        found = self.cluster.api.get(
            f"/api/v1/namespaces/{self.namespace}/pods", {"labelSelector": POD_SELECTOR}
        )
        return [p for p in found["items"] if "deletionTimestamp" not in p["metadata"]]

    def ready_pods(self) -> list[str]:
        return [
            p["metadata"]["name"]
            for p in self.pods()
            if any(
                c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or []
            )
        ]

    def leader(self) -> str | None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{LEASE_NAME}"
        if not self.cluster.api.exists(path):
            return None
        holder = self.cluster.api.get(path)["spec"].get("holderIdentity") or ""
        return holder.split("_", 1)[0] or None  # <hostname>_<uuid>, the hostname being the pod's name


def _build_helm() -> Path:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "helm" / "build.py")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip())


def _scale_shared_operator(cluster: RealCluster, replicas: int) -> None:
    cluster.api.patch(SHARED_OPERATOR, {"spec": {"replicas": replicas}})

    def settled() -> bool:
        status = cluster.api.get(SHARED_OPERATOR).get("status", {})
        pods = cluster.api.get(
            "/api/v1/namespaces/kubeflow/pods", {"labelSelector": "control-plane=kubeflow-training-operator"}
        )["items"]
        return len(pods) == replicas and status.get("availableReplicas", 0) == replicas

    wait_until(f"the shared operator at {replicas} replicas", settled, 120.0)


@pytest.fixture(scope="module")
def release(operator: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    helm = Release(operator, "kubetrain-system", _build_helm(), tmp_path_factory.mktemp("helm-home"))
    _scale_shared_operator(operator, 0)
    try:
        installed = helm.run(
            "install",
            RELEASE,
            str(CHART),
            "--create-namespace",
            "--set",
            "crds.install=false",
            "--set",
            "replicaCount=2",
            "--set",
            "operator.pytorchInitContainerImage=localhost/kubetrain/busybox:1.35",
            "--set",
            f"operator.gangSchedulerName={coscheduler.SCHEDULER_NAME}",
        )
        assert installed.returncode == 0, installed.stderr
        wait_until("two ready operator pods", lambda: len(helm.ready_pods()) == 2, 180.0)
        yield helm
    finally:
        helm.run("uninstall", RELEASE, "--wait", "--timeout", "120s")
        _scale_shared_operator(operator, 1)


def _run_job(cluster: RealCluster, namespace: str, name: str) -> None:
    replica = container(
        "pytorch", TEST_IMAGE, imagePullPolicy="Never", command=["python", "-c", f"print('{name} ran')"]
    )
    body = manifest("PyTorchJob", {"Master": 1}, name=name, namespace=None, containers=[replica])
    path = f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs"
    cluster.api.create(path, body)

    def succeeded() -> bool:
        conditions = cluster.api.get(f"{path}/{name}").get("status", {}).get("conditions") or []
        return any(c["type"] == "Succeeded" and c["status"] == "True" for c in conditions)

    wait_until(f"{name} Succeeded", succeeded, 180.0)


def test_helm_install_runs_the_operator_image_as_its_own_service_account(release: Release) -> None:
    pods = release.pods()

    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["serviceAccountName"] == "kubetrain"
        assert pod["spec"]["containers"][0]["image"].startswith("localhost/kubetrain/operator:")


def test_the_leader_reconciles_a_job_with_no_forbidden_request_in_either_log(
    release: Release, namespace: str
) -> None:
    _run_job(release.cluster, namespace, "under-helm")

    for pod in release.ready_pods():
        logs = release.cluster.kubectl("logs", "-n", release.namespace, pod)
        assert logs.returncode == 0, logs.stderr
        assert "403" not in logs.stdout
        assert "forbidden" not in logs.stdout.lower()


def test_deleting_the_leader_pod_hands_the_lease_to_the_other_replica_which_reconciles(
    release: Release, namespace: str
) -> None:
    leader = wait_until("a Lease holder", release.leader, 60.0)
    [standby] = [name for name in release.ready_pods() if name != leader]

    release.cluster.api.delete(f"/api/v1/namespaces/{release.namespace}/pods/{leader}")

    successor = wait_until("a new Lease holder", lambda: release.leader() not in (None, leader), 120.0)
    assert release.leader() == standby, f"{successor}: the Lease went to {release.leader()}, not to {standby}"
    _run_job(release.cluster, namespace, "after-handover")
