"""MPIJob kubeflow.org/v1 (the kubectl-exec design, §2.7) on its own control plane: its CRD shares the
name mpijobs.kubeflow.org with the v2beta1 one the shared envtest serves, so the two cannot coexist."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from operator_support import StartOperator, create_job, eventually, pod, replica, wait_condition, wait_pods

from kubetrain.envtest import controlplane
from kubetrain.envtest.crds import install_crds
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.poddriver import PodDriver

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

MANIFESTS = Path(__file__).resolve().parents[3] / "manifests"


@pytest.fixture(scope="module")
def mpi_v1_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    run_dir = tmp_path_factory.mktemp("envtest-mpi-v1")
    state = controlplane.start(run_dir)
    try:
        crds = tmp_path_factory.mktemp("crds")
        shutil.copy(MANIFESTS / "crds-mpijob-v1" / "kubeflow.org_mpijobs.yaml", crds)
        with KubeApi.from_kubeconfig(state.kubeconfig) as api:
            install_crds(api, crds)
        yield state.kubeconfig
    finally:
        controlplane.stop(run_dir)


def set_phase(api: KubeApi, name: str, phase: str) -> None:
    """The launcher's upstream kubectl-delivery init container asks for 5Gi of ephemeral storage, which
    envtest's fake nodes do not offer; it stays unbound, so its phase is written here, not by the driver."""
    api.patch(f"/api/v1/namespaces/default/pods/{name}/status", {"status": {"phase": phase}})


def test_mpijob_v1_gets_its_launcher_rbac_config_map_and_pods_and_follows_the_launcher(
    mpi_v1_cluster: Path, start_operator: StartOperator
) -> None:
    start_operator(
        "--kubeconfig", str(mpi_v1_cluster), "--enable-scheme", "mpijob", watch_namespace="default"
    )
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MPIJob",
        "metadata": {"name": "j"},
        "spec": {
            "slotsPerWorker": 2,
            "mpiReplicaSpecs": {"Launcher": replica("mpi"), "Worker": replica("mpi", 2)},
        },
    }
    with KubeApi.from_kubeconfig(mpi_v1_cluster) as api, PodDriver(api) as driver:
        create_job(api, "default", job)
        wait_pods(api, "default", ["j-launcher", "j-worker-0", "j-worker-1"])
        for path in (
            "/api/v1/namespaces/default/serviceaccounts/j-launcher",
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles/j-launcher",
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings/j-launcher",
        ):
            assert api.exists(path), f"{path} missing"
        config = api.get("/api/v1/namespaces/default/configmaps/j-config")["data"]
        assert config["hostfile"] == "j-worker-0 slots=2\nj-worker-1 slots=2\n"
        launcher = pod(api, "default", "j-launcher")
        assert launcher["spec"]["serviceAccountName"] == "j-launcher"
        assert [c["name"] for c in launcher["spec"]["initContainers"]] == ["kubectl-delivery"]

        for name in ("j-worker-0", "j-worker-1"):
            driver.run(("default", name))
        set_phase(api, "j-launcher", "Running")
        eventually(
            lambda: (
                "echo j-worker-1:2"
                in api.get("/api/v1/namespaces/default/configmaps/j-config")["data"]["discover_hosts.sh"]
            ),
            what="discover_hosts.sh lists the running workers",
        )
        wait_condition(api, "MPIJob", "default", "j", "Running")
        set_phase(api, "j-launcher", "Succeeded")
        wait_condition(api, "MPIJob", "default", "j", "Succeeded")


def test_a_deleted_launcher_role_binding_is_made_again_by_the_resync(
    mpi_v1_cluster: Path, start_operator: StartOperator
) -> None:
    start_operator(
        "--kubeconfig",
        str(mpi_v1_cluster),
        "--enable-scheme",
        "mpijob",
        "--resync-period",
        "2",
        watch_namespace="default",
    )
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MPIJob",
        "metadata": {"name": "rb"},
        "spec": {"mpiReplicaSpecs": {"Launcher": replica("mpi"), "Worker": replica("mpi", 1)}},
    }
    binding = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings/rb-launcher"
    with KubeApi.from_kubeconfig(mpi_v1_cluster) as api:
        create_job(api, "default", job)
        first_uid = eventually(
            lambda: api.get(binding)["metadata"]["uid"] if api.exists(binding) else None,
            what="the launcher RoleBinding",
        )
        api.delete(binding)
        eventually(
            lambda: api.exists(binding) and api.get(binding)["metadata"]["uid"] != first_uid,
            what="the launcher RoleBinding made again",
        )
