"""Two real nodes (``envtest start --real-nodes 2``): pods of one reach pods of the other by name, and a node
lost (``envtest node stop``) goes NotReady with its pods' processes gone, then comes back (``node start``).

The cluster is this module's own, started before the session's single node (conftest orders the module
right after the node lifecycle test): bridge names are fixed, one real-node cluster runs on a machine at a
time, and the session's tests expect every pod on ``real-node-0``. With a shared envtest
(``KUBETRAIN_E2E_ENVTEST_DIR``) the module uses it when it has two real nodes and is skipped otherwise.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from e2e.realpods import RealCluster, pod, scratch_namespace, wait_for_phase, wait_until
from kubetrain.envtest import controlplane, realnode
from kubetrain.envtest.kubeapi import KubeApi

pytestmark = pytest.mark.e2e

NODES = realnode.real_nodes(2)
# The node-lifecycle controller's grace period (50 s) plus its taint and status writes, with room for load.
NOT_READY_TIMEOUT_SECONDS = 150.0

SERVER = textwrap.dedent(
    """
    import socket
    server = socket.create_server(("", 23456))
    connection, _ = server.accept()
    connection.sendall(b"hello from " + socket.gethostname().encode() + b"\\n")
    connection.close()
    """
)

CLIENT = textwrap.dedent(
    """
    import socket, time
    for attempt in range(300):
        try:
            print("resolves to", socket.gethostbyname("server-0.peers"), flush=True)
            with socket.create_connection(("server-0.peers", 23456), timeout=2) as connection:
                print(connection.recv(100).decode().strip(), flush=True)
                break
        except OSError:
            time.sleep(0.2)
    else:
        raise SystemExit("no connection")
    """
)


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    shared = os.environ.get("KUBETRAIN_E2E_ENVTEST_DIR")
    if shared:
        state = controlplane.EnvtestState.read(Path(shared))
        if state is None or len(state.real_nodes) < len(NODES):
            pytest.skip("the shared envtest has fewer than two real nodes (start it with --real-nodes 2)")
        run_dir = Path(shared)
        yield _cluster(run_dir)
        return
    run_dir = tmp_path_factory.mktemp("two-nodes")
    options = controlplane.EnvtestOptions(nodes=0, real_nodes=len(NODES))
    try:
        controlplane.start(run_dir, options)
        yield _cluster(run_dir)
    finally:
        controlplane.stop(run_dir)
        assert realnode.leftovers(run_dir, NODES) == []


def _cluster(run_dir: Path) -> RealCluster:
    for node in NODES:
        realnode.load_images(node.paths(run_dir), ["python"])
    kubeconfig = run_dir / controlplane.ADMIN_KUBECONFIG
    return RealCluster(run_dir, kubeconfig, KubeApi.from_kubeconfig(kubeconfig))


@pytest.fixture
def namespace(two_nodes: RealCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    with scratch_namespace(two_nodes, request.node.name.lower().replace("_", "-")[:40].strip("-")) as name:
        yield name


def _on(node: realnode.RealNode, manifest: dict[str, Any]) -> dict[str, Any]:
    manifest["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node.name}
    return manifest


def _ready(api: KubeApi, node: realnode.RealNode) -> str:
    conditions = api.get(f"/api/v1/nodes/{node.name}")["status"]["conditions"]
    return str(next(c["status"] for c in conditions if c["type"] == "Ready"))


def _processes_with(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if any(marker in part for part in process.info["cmdline"] or []):
            found.append(process)
    return found


def test_nodes_get_their_own_bridge_address_and_pod_subnet(two_nodes: RealCluster) -> None:
    for node in NODES:
        got = two_nodes.api.get(f"/api/v1/nodes/{node.name}")

        assert {"type": "InternalIP", "address": node.address} in got["status"]["addresses"]
        assert got["spec"]["podCIDR"] == node.pod_subnet
        assert _ready(two_nodes.api, node) == "True"


def test_pod_on_one_node_reaches_a_pod_on_the_other_by_its_headless_service_name(
    two_nodes: RealCluster, namespace: str
) -> None:
    api = two_nodes.api
    api.create(
        f"/api/v1/namespaces/{namespace}/services",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "peers"},
            "spec": {"clusterIP": "None", "selector": {"app": "server-0"}, "ports": [{"port": 23456}]},
        },
    )
    pods = f"/api/v1/namespaces/{namespace}/pods"
    server = pod("server-0", SERVER, hostname="server-0", subdomain="peers", restartPolicy="Never")
    api.create(pods, _on(NODES[1], server))
    api.create(pods, _on(NODES[0], pod("client", CLIENT, restartPolicy="Never")))

    client = wait_for_phase(api, namespace, "client", ("Succeeded", "Failed"))
    served = wait_for_phase(api, namespace, "server-0", ("Succeeded", "Failed"))
    logs = two_nodes.kubectl("logs", "-n", namespace, "client").stdout.splitlines()

    assert (client["spec"]["nodeName"], served["spec"]["nodeName"]) == (NODES[0].name, NODES[1].name)
    assert (client["status"]["phase"], served["status"]["phase"]) == ("Succeeded", "Succeeded")
    resolved = ipaddress.ip_address(logs[0].removeprefix("resolves to "))
    assert resolved == ipaddress.ip_address(served["status"]["podIP"])
    assert resolved in ipaddress.ip_network(NODES[1].pod_subnet)
    assert logs[-1] == "hello from server-0"


def test_node_stop_is_a_node_loss_and_node_start_brings_it_back_ready(
    two_nodes: RealCluster, namespace: str
) -> None:
    api = two_nodes.api
    lost, kept = NODES[1], NODES[0]
    markers = {node.name: f"kubetrain-e2e-{node.name}-{secrets.token_hex(4)}" for node in NODES}
    pods = f"/api/v1/namespaces/{namespace}/pods"
    for node in NODES:
        sleeper = pod(f"sleeper-{node.index}", f"import time  # {markers[node.name]}\ntime.sleep(3600)")
        api.create(pods, _on(node, sleeper))
    for node in NODES:
        wait_for_phase(api, namespace, f"sleeper-{node.index}", ("Running",))
        wait_until(f"{node.name}'s sleeper process", lambda n=node: _processes_with(markers[n.name]))

    stopped = two_nodes.kubetrain("envtest", "node", "stop", lost.name, "--dir", str(two_nodes.run_dir))
    try:
        assert stopped.returncode == 0, stopped.stderr
        assert _processes_with(markers[lost.name]) == []
        assert _processes_with(markers[kept.name]) != []
        wait_until(f"{lost.name} NotReady", lambda: _ready(api, lost) != "True", NOT_READY_TIMEOUT_SECONDS)
        taints = api.get(f"/api/v1/nodes/{lost.name}")["spec"].get("taints") or []
        assert "node.kubernetes.io/unreachable" in {taint["key"] for taint in taints}
        assert _ready(api, kept) == "True"
    finally:
        started = two_nodes.kubetrain("envtest", "node", "start", lost.name, "--dir", str(two_nodes.run_dir))

    assert started.returncode == 0, started.stderr
    assert _ready(api, lost) == "True"
    # The kubelet back finds its pod's sandbox dead and runs the pod again (restartPolicy Always).
    wait_until(f"the sleeper on {lost.name} running again", lambda: _processes_with(markers[lost.name]))
