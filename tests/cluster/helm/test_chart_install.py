"""charts/kubetrain on the envtest API server: the rendered manifests are accepted server-side (dry run on
the shared control plane, whose CRDs other tests own), and ``helm install`` / ``upgrade`` / ``uninstall``
work for real on a private one with the v1 MPIJob CRD."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helm_chart import CHART, RELEASE, ROOT, Helm, build_helm, find, kubectl

from kubetrain.envtest import controlplane
from kubetrain.envtest.crds import install_crds
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.pytest_plugin import EnvtestCluster
from waiting import PATIENCE, eventually

pytestmark = pytest.mark.cluster

KUBETRAIN = Path(sys.executable).parent / "kubetrain"

# Just enough of the Prometheus Operator's CRD for the API server to accept a ServiceMonitor.
SERVICE_MONITOR_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  names:
    kind: ServiceMonitor
    listKind: ServiceMonitorList
    plural: servicemonitors
    singular: servicemonitor
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"""


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(build_helm(), tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="module")
def service_monitor_crd(envtest: EnvtestCluster) -> Iterator[None]:
    created = kubectl(envtest.kubeconfig, "create", "-f", "-", stdin=SERVICE_MONITOR_CRD)
    assert created.returncode == 0 or "AlreadyExists" in created.stderr, created.stderr
    established = kubectl(
        envtest.kubeconfig,
        "wait",
        "--for=condition=Established",
        f"--timeout={PATIENCE:g}s",
        "crd/servicemonitors.monitoring.coreos.com",
    )
    assert established.returncode == 0, established.stderr
    yield
    if created.returncode == 0:
        kubectl(envtest.kubeconfig, "delete", "crd", "servicemonitors.monitoring.coreos.com", "--wait=false")


def dry_run_apply(kubeconfig: Path, manifests: str) -> str:
    done = kubectl(
        kubeconfig,
        "apply",
        "--server-side",
        "--force-conflicts",
        "--dry-run=server",
        "-f",
        "-",
        stdin=manifests,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_default_rendering_is_accepted_server_side(
    helm: Helm, envtest: EnvtestCluster, namespace: str
) -> None:
    applied = dry_run_apply(envtest.kubeconfig, helm.template_text(namespace=namespace))
    for created in (
        "customresourcedefinition.apiextensions.k8s.io/pytorchjobs.kubeflow.org",
        "customresourcedefinition.apiextensions.k8s.io/mpijobs.kubeflow.org",
        "serviceaccount/kubetrain",
        "clusterrole.rbac.authorization.k8s.io/kubetrain",
        "clusterrolebinding.rbac.authorization.k8s.io/kubetrain",
        "role.rbac.authorization.k8s.io/kubetrain",
        "rolebinding.rbac.authorization.k8s.io/kubetrain",
        "deployment.apps/kubetrain",
        "poddisruptionbudget.policy/kubetrain",
        "service/kubetrain",
    ):
        assert f"{created} serverside-applied (server dry run)" in applied


def test_a_non_default_rendering_with_a_service_monitor_is_accepted_server_side(
    helm: Helm, envtest: EnvtestCluster, namespace: str, service_monitor_crd: None
) -> None:
    manifests = helm.template_text(
        "--set=metrics.serviceMonitor.enabled=true",
        "--set=metrics.port=9090",
        "--set=operator.gangSchedulerName=volcano",
        "--set=operator.replicas=3",
        '--set-json=operator.enabledSchemes=["pytorchjob"]',
        '--set-json=tolerations=[{"key":"gpu","operator":"Exists"}]',
        namespace=namespace,
    )
    applied = dry_run_apply(envtest.kubeconfig, manifests)
    assert "servicemonitor.monitoring.coreos.com/kubetrain serverside-applied (server dry run)" in applied


@pytest.fixture(scope="module")
def private_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A control plane of its own: the v1 MPIJob CRD cannot coexist with the shared one's v2beta1, and a
    real install owns cluster-scoped objects."""
    run_dir = tmp_path_factory.mktemp("envtest-helm")
    state = controlplane.start(run_dir)
    try:
        yield state.kubeconfig
    finally:
        controlplane.stop(run_dir)


def jsonpath(kubeconfig: Path, *args: str) -> str:
    done = kubectl(kubeconfig, "get", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
def test_helm_installs_upgrades_and_uninstalls_the_chart_keeping_the_crds(
    helm: Helm, private_cluster: Path
) -> None:
    release = ("--kubeconfig", str(private_cluster), "--namespace", "kubeflow")
    install = helm.run("install", RELEASE, str(CHART), *release, "--create-namespace", "--set=mpiJobAPI=v1")
    assert install.returncode == 0, install.stderr
    served = jsonpath(
        private_cluster, "crd", "mpijobs.kubeflow.org", "-o", "jsonpath={.spec.versions[*].name}"
    )
    assert served == "v1"

    upgrade = helm.run(
        "upgrade", RELEASE, str(CHART), *release, "--reuse-values", "--set=operator.controllerThreads=3"
    )
    assert upgrade.returncode == 0, upgrade.stderr
    args = jsonpath(
        private_cluster,
        "-n",
        "kubeflow",
        "deployment",
        RELEASE,
        "-o",
        "jsonpath={.spec.template.spec.containers[0].args}",
    )
    assert "--controller-threads=3" in args

    uninstall = helm.run("uninstall", RELEASE, *release)
    assert uninstall.returncode == 0, uninstall.stderr
    deployments = jsonpath(private_cluster, "-n", "kubeflow", "deployments", "-o", "name")
    crds = jsonpath(private_cluster, "crd", "-o", "name")
    assert (deployments, crds.count(".kubeflow.org")) == ("", 10), "the seven kinds and Trainer's three"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_the_operator_accepts_the_deployments_arguments_and_becomes_ready(
    helm: Helm, envtest: EnvtestCluster, kube_api: KubeApi, namespace: str, tmp_path: Path
) -> None:
    install_crds(kube_api, ROOT / "manifests" / "crds")
    health = free_port()
    rendered = helm.template(
        f"--set=operator.namespace={namespace}",  # not to reconcile other tests' jobs on the shared cluster
        f"--set=operator.healthProbePort={health}",
        f"--set=metrics.port={free_port()}",
        namespace=namespace,
    )
    [container] = find(rendered, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["kubetrain", "operator"]
    command = [str(KUBETRAIN), "operator", *container["args"], "--kubeconfig", str(envtest.kubeconfig)]
    with (tmp_path / "operator.log").open("wb") as log:
        operator = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            eventually(lambda: ready(health) or operator.poll() is not None, "the operator ready or exited")
            assert ready(health), (tmp_path / "operator.log").read_text()
        finally:
            operator.send_signal(signal.SIGTERM)
            operator.wait(PATIENCE)
