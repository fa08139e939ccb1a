"""The real node's life: it joins the control plane Ready, and stop leaves nothing of it on the host."""

from __future__ import annotations

import os

import pytest

from kubetrain.envtest import controlplane, processes, realnode
from kubetrain.envtest.kubeapi import KubeApi

# Runs first in the tier (conftest orders it), before the session's node starts: one real node per
# machine. A shared dev node (conftest's KUBETRAIN_E2E_ENVTEST_DIR) is that node, so there it cannot run.
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        bool(os.environ.get("KUBETRAIN_E2E_ENVTEST_DIR")), reason="a shared real node runs (one per machine)"
    ),
]


def test_real_node_joins_ready_running_containerd_and_stop_leaves_nothing_behind(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # A short run directory: the kubelet's unix sockets live under it, and a socket path has at most 107
    # bytes (the test's own tmp_path, named after it, left the kubelet unable to bind one).
    run_dir = tmp_path_factory.mktemp("node")
    state = controlplane.start(run_dir, controlplane.EnvtestOptions(nodes=0, real_node=True))
    try:
        with KubeApi.from_kubeconfig(state.kubeconfig) as api:
            node = api.get(f"/api/v1/nodes/{realnode.NODE_NAME}")
        assert controlplane.status(run_dir).running
    finally:
        controlplane.stop(run_dir)

    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    assert {"type": "InternalIP", "address": realnode.NODE_IP} in node["status"]["addresses"]
    assert realnode.leftovers(run_dir) == []


def test_start_removes_a_bridge_whose_node_no_longer_runs(tmp_path_factory: pytest.TempPathFactory) -> None:
    # A machine restart that keeps the network namespace kills the node's processes but keeps its bridge.
    dead_run_dir = tmp_path_factory.mktemp("dead")
    realnode.setup_network(dead_run_dir)
    said: list[str] = []

    realnode.clear_stale_node(said.append)

    assert not realnode.BRIDGE_SYSFS.exists()
    assert str(dead_run_dir) in said[0]


def test_start_refuses_the_bridge_of_a_node_that_still_runs(tmp_path_factory: pytest.TempPathFactory) -> None:
    live_run_dir = tmp_path_factory.mktemp("live")
    realnode.setup_network(live_run_dir)
    processes.spawn(live_run_dir, "kubelet", ["sleep", "60"])
    try:
        with pytest.raises(realnode.RealNodeError, match=f"still running from {live_run_dir}"):
            realnode.clear_stale_node(lambda _: None)
        assert realnode.BRIDGE_SYSFS.exists()
    finally:
        processes.terminate(live_run_dir, "kubelet")
        realnode.clear_stale_node(lambda _: None)
    assert not realnode.BRIDGE_SYSFS.exists()
