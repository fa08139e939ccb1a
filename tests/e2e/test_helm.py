"""The operator installed by ``helm install`` of charts/kubetrain on the real node: two replicas from the
operator image under the chart's ServiceAccount and least-privilege ClusterRole, one of them leading; delete
the leader's pod and the other takes the Lease over and reconciles the next job.

Two operators must never reconcile the same job. The release watches only its own namespace
(``operator.namespace``) and elects its leader there, and the CRDs stay the overlay's (``crds.install=false``,
the chart's switch for CRDs managed elsewhere), so it touches nothing outside that namespace. The session's
operator (the kustomize overlay, namespace kubeflow) watches every namespace, that one included, so it is held
at zero replicas while the release runs, and the release's namespace, with its jobs, is deleted before it
comes back: it never sees them. Its absence only delays other jobs (conftest waits for it to come back).
"""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from builders import container, manifest
from e2e.realpods import TEST_IMAGE, RealCluster, delete_namespace, wait_until
from e2e.session_operator import held_at_zero, leader, operator_pods
from waiting import PATIENCE

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kubetrain"
INIT_IMAGE = "localhost/kubetrain/busybox:1.35"
POD_SECURITY = "pod-security.kubernetes.io"
OPERATOR = "app.kubernetes.io/component!=dashboard"
DASHBOARD = "app.kubernetes.io/component=dashboard"


class Release:
    """A helm release of the chart, alone in its namespace."""

    def __init__(self, cluster: RealCluster, helm: Path, home: Path) -> None:
        self.cluster = cluster
        self.name = f"kubetrain-{secrets.token_hex(3)}"
        self.namespace = self.name
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

    def pods(self, component: str = OPERATOR) -> list[dict[str, Any]]:
        """The release's operator pods, or its dashboard's (``DASHBOARD``), not being deleted."""
        selector = {"labelSelector": f"app.kubernetes.io/instance={self.name},{component}"}
        found = self.cluster.api.get(f"/api/v1/namespaces/{self.namespace}/pods", selector)
        return [p for p in found["items"] if "deletionTimestamp" not in p["metadata"]]

    def ready_pods(self, component: str = OPERATOR) -> list[str]:
        return [
            p["metadata"]["name"]
            for p in self.pods(component)
            if any(
                c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or []
            )
        ]

    def leader(self) -> str | None:
        return leader(self.cluster, self.namespace)

    def log(self, pod: str) -> str:
        logs = self.cluster.kubectl("logs", "-n", self.namespace, pod)
        assert logs.returncode == 0, logs.stderr
        return logs.stdout

    def run_job(self, name: str) -> None:
        """A one-replica PyTorchJob in the release's namespace, run to Succeeded. The namespace enforces
        Pod Security's restricted profile, so the job's pod meets it too, as a user's there must."""
        replica = container(
            "pytorch",
            TEST_IMAGE,
            imagePullPolicy="Never",
            command=["python", "-c", f"print('{name} ran')"],
            securityContext={"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        )
        body = manifest("PyTorchJob", {"Master": 1}, name=name, namespace=None, containers=[replica])
        body["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["securityContext"] = {
            "runAsNonRoot": True,
            "runAsUser": 65534,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        path = f"/apis/kubeflow.org/v1/namespaces/{self.namespace}/pytorchjobs"
        self.cluster.api.create(path, body)

        def succeeded() -> bool:
            conditions = self.cluster.api.get(f"{path}/{name}").get("status", {}).get("conditions") or []
            return any(c["type"] == "Succeeded" and c["status"] == "True" for c in conditions)

        wait_until(f"{name} Succeeded", succeeded, 180.0)


def _build_helm() -> Path:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "helm" / "build.py")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip())


def _install_values(namespace: str) -> list[str]:
    values = [
        "crds.install=false",
        f"operator.namespace={namespace}",
        f"operator.pytorchInitContainerImage={INIT_IMAGE}",
        # The Jobs view too, without Istio (none here): its pod must meet the profile as well.
        "dashboard.enabled=true",
        "dashboard.istio.enabled=false",
        # JobSet runs as envtest's host process in this tier (no registry serves its image), and the shared
        # overlay's install already holds its cluster-scoped objects, which helm would not adopt.
        "jobset.enabled=false",
    ]
    return [f"--set={value}" for value in values]


@pytest.fixture(scope="module")
def release(operator: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    helm = Release(operator, _build_helm(), tmp_path_factory.mktemp("helm-home"))
    # As docs/install.md installs it: into a namespace that enforces Pod Security's restricted profile.
    labels = {f"{POD_SECURITY}/enforce": "restricted", f"{POD_SECURITY}/enforce-version": "latest"}
    namespace = {"metadata": {"name": helm.namespace, "labels": labels}}
    with held_at_zero(operator):
        try:
            operator.api.create("/api/v1/namespaces", namespace)
            installed = helm.run("install", helm.name, str(CHART), *_install_values(helm.namespace))
            assert installed.returncode == 0, installed.stderr
            # The chart's default: two replicas (on one node here, the spread being preferred).
            wait_until("two ready operator pods", lambda: len(helm.ready_pods()) == 2, 180.0)
            wait_until("the ready dashboard pod", lambda: len(helm.ready_pods(DASHBOARD)) == 1, 180.0)
            wait_until(
                f"the default ServiceAccount of {helm.namespace}",
                lambda: operator.api.exists(f"/api/v1/namespaces/{helm.namespace}/serviceaccounts/default"),
                PATIENCE,
            )
            yield helm
        finally:
            helm.run("uninstall", helm.name, "--wait", "--timeout", "120s")
            # Its jobs go with it, before the shared operator, which watches every namespace, is back.
            delete_namespace(operator, helm.namespace)


def test_helm_install_runs_two_operator_pods_from_the_image_as_the_charts_service_account(
    release: Release,
) -> None:
    pods = release.pods()

    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["serviceAccountName"] == release.name
        assert pod["spec"]["containers"][0]["image"].startswith("localhost/kubetrain/operator:")


def test_the_operator_and_dashboard_pods_run_where_pod_security_restricted_is_enforced(
    release: Release,
) -> None:
    namespace = release.cluster.api.get(f"/api/v1/namespaces/{release.namespace}")
    assert namespace["metadata"]["labels"][f"{POD_SECURITY}/enforce"] == "restricted"
    pods = release.pods() + release.pods(DASHBOARD)
    assert len(release.ready_pods()) + len(release.ready_pods(DASHBOARD)) == len(pods) == 3
    for pod in pods:
        assert pod["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["spec"]["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_the_leader_reconciles_a_job_in_its_namespace_with_no_forbidden_request_in_either_log(
    release: Release,
) -> None:
    leader = wait_until("a Lease holder", release.leader, PATIENCE)

    release.run_job("under-helm")

    # The shared operator stayed away: no pod of it ran while the job did.
    assert operator_pods(release.cluster) == []
    assert f"{release.namespace}/under-helm" in release.log(leader)
    for pod in release.ready_pods():
        # "403 Forbidden: ... is forbidden": not a bare "403", which a leader's random identity may hold.
        assert "forbidden" not in release.log(pod).lower()


def test_deleting_the_leader_pod_hands_the_lease_to_a_live_replica_which_reconciles(
    release: Release,
) -> None:
    leader = wait_until("a Lease holder", release.leader, PATIENCE)

    release.cluster.api.delete(f"/api/v1/namespaces/{release.namespace}/pods/{leader}")

    # The leader empties the Lease as it shuts down; the standby, retrying every 2 s, and the Deployment's
    # replacement pod, asking as it starts, both stand for it, and either may win: what matters is that a
    # live replica leads and reconciles, with no second leader.
    def new_holder() -> str | None:
        holder = release.leader()
        return holder if holder not in (None, leader) else None

    successor = wait_until("a new Lease holder", new_holder, PATIENCE)
    assert successor in [pod["metadata"]["name"] for pod in release.pods()]  # alive, not terminating
    release.run_job("after-handover")
    log = release.log(successor)
    assert f"{release.namespace}/after-handover" in log
