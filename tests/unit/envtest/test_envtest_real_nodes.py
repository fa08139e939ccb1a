"""Several real nodes (`envtest start --real-nodes N`): what each node gets, derived from its index, and the
CLI that starts them and loses one (`envtest node stop/start`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import psutil
import pytest

from builders import cli_runner
from kubetrain.cli.main import app
from kubetrain.envtest import controlplane, processes, realnode
from kubetrain.envtest.binaries import Binaries
from kubetrain.envtest.pki import generate_pki

PORTS = controlplane.Ports(etcd_client=1, etcd_peer=2, apiserver=3, controller_manager=4, scheduler=5)


def _state(
    run_dir: Path, real_nodes: list[str], stopped: list[str] | None = None
) -> controlplane.EnvtestState:
    return controlplane.EnvtestState(
        run_dir,
        "v1.34.4",
        "https://10.244.0.1:3",
        PORTS,
        [],
        0.0,
        {},
        real_nodes=real_nodes,
        stopped_nodes=stopped or [],
    )


def test_each_node_gets_its_own_name_bridge_subnet_address_and_cgroup_parent() -> None:
    second = realnode.RealNode(1)

    assert (second.name, second.bridge) == ("real-node-1", "kt1")
    assert (second.pod_subnet, second.address) == ("10.244.1.0/24", "10.244.1.1")
    assert second.cgroup_parent == "kubetrain-real-node-1"


def test_node_zero_keeps_the_single_nodes_names_directory_and_process_names(tmp_path: Path) -> None:
    first, second = realnode.real_nodes(2)

    assert (first.name, first.bridge, first.address) == ("real-node-0", "kt0", "10.244.0.1")
    assert first.paths(tmp_path).root == tmp_path / "node"
    assert first.process("kubelet") == "kubelet"
    assert second.paths(tmp_path).root == tmp_path / "node-1"
    assert second.process("kubelet") == "kubelet-1"


def test_nodes_have_distinct_containerd_sockets(tmp_path: Path) -> None:
    sockets = {node.paths(tmp_path).containerd_socket for node in realnode.real_nodes(3)}

    assert len(sockets) == 3


@pytest.mark.parametrize("name", ["real-node-16", "real-node-x", "node-1", "real-node--1"])
def test_a_name_that_is_no_real_node_is_refused_naming_the_form(name: str) -> None:
    with pytest.raises(realnode.RealNodeError, match="real-node-<i>"):
        realnode.RealNode.named(name)


def test_a_real_node_is_found_by_its_name() -> None:
    assert realnode.RealNode.named("real-node-3") == realnode.RealNode(3)


@pytest.mark.parametrize("count", [0, realnode.MAX_REAL_NODES + 1])
def test_a_count_of_real_nodes_out_of_range_is_refused(count: int) -> None:
    with pytest.raises(realnode.RealNodeError, match="--real-nodes"):
        realnode.real_nodes(count)


def test_kubelet_of_a_second_node_serves_on_its_address_under_its_own_cgroup_parent_with_dns_on_node_zero(
    tmp_path: Path,
) -> None:
    pki = generate_pki(tmp_path / "pki")
    second = realnode.RealNode(1)

    config = realnode.kubelet_config(second.paths(tmp_path), pki, second)

    assert config["address"] == config["healthzBindAddress"] == "10.244.1.1"
    assert config["cgroupRoot"] == "/kubetrain-real-node-1"
    assert config["clusterDNS"] == [realnode.NODE_IP]
    assert config["containerRuntimeEndpoint"] == f"unix://{second.paths(tmp_path).containerd_socket}"


def test_cni_of_a_second_node_hands_out_its_subnet_on_its_bridge(tmp_path: Path) -> None:
    second = realnode.RealNode(1)

    (bridge,) = realnode.cni_config(second.paths(tmp_path), second)["plugins"]

    assert bridge["bridge"] == "kt1"
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.244.1.0/24", "gateway": "10.244.1.1"}]]
    assert bridge["ipam"]["dataDir"].startswith(str(tmp_path / "node-1"))


def test_forward_rule_accepts_pod_network_traffic_between_the_bridges() -> None:
    rule = realnode.forward_rule()

    assert rule[0] == "FORWARD"
    assert rule[rule.index("-s") + 1] == rule[rule.index("-d") + 1] == realnode.POD_NETWORK
    assert rule[-2:] == ["-j", "ACCEPT"]


def test_real_nodes_are_marked_not_ready_after_upstreams_grace_period_fake_ones_after_an_hour(
    tmp_path: Path,
) -> None:
    pki = generate_pki(tmp_path / "pki")
    binaries = Binaries("v1.34.4", tmp_path)

    def grace(real_nodes: bool) -> str:
        args = controlplane.controller_manager_args(binaries, tmp_path, pki, PORTS, real_nodes)
        return next(arg.split("=", 1)[1] for arg in args if arg.startswith("--node-monitor-grace-period="))

    assert grace(real_nodes=True) == "50s"
    assert grace(real_nodes=False) == "1h"


def test_a_stopped_nodes_processes_are_not_expected_to_run(tmp_path: Path) -> None:
    state = _state(tmp_path, ["real-node-0", "real-node-1"], stopped=["real-node-1"])

    assert state.components[-3:] == ("containerd", "kubelet", "coredns")


def test_every_running_nodes_processes_are_components(tmp_path: Path) -> None:
    state = _state(tmp_path, ["real-node-0", "real-node-1"])

    assert state.components[-5:] == ("containerd", "kubelet", "containerd-1", "kubelet-1", "coredns")


def test_a_state_file_from_before_several_real_nodes_reads_as_one(tmp_path: Path) -> None:
    data = json.loads(_state(tmp_path, []).to_json())
    del data["real_nodes"], data["stopped_nodes"]
    data["real_node"] = "real-node-0"
    (tmp_path / controlplane.STATE_FILE).write_text(json.dumps(data))

    read = controlplane.EnvtestState.read(tmp_path)

    assert read is not None
    assert (read.real_nodes, read.real_node) == (["real-node-0"], "real-node-0")


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["--real-nodes", "2"], (2, 0)),
        (["--real-node"], (1, 0)),
        ([], (0, 2)),
        (["--real-nodes", "3", "--nodes", "1"], (3, 1)),
    ],
)
def test_start_asks_for_real_nodes_and_no_fake_ones_unless_told(
    tmp_path: Path,
    start_options: list[controlplane.EnvtestOptions],
    arguments: list[str],
    expected: tuple[int, int],
) -> None:
    result = cli_runner().invoke(app, ["envtest", "start", "--dir", str(tmp_path), *arguments])

    assert result.exit_code == 1
    assert [(options.real_node_count, options.nodes) for options in start_options] == [expected]


def test_node_stop_of_a_node_the_envtest_does_not_have_names_the_nodes_it_has(tmp_path: Path) -> None:
    (tmp_path / controlplane.STATE_FILE).write_text(
        _state(tmp_path, ["real-node-0", "real-node-1"]).to_json()
    )

    result = cli_runner().invoke(app, ["envtest", "node", "stop", "real-node-2", "--dir", str(tmp_path)])

    assert result.exit_code == 1
    assert "real-node-2 is not a real node" in result.stderr
    assert "real-node-0, real-node-1" in result.stderr


def test_node_start_of_a_running_node_says_to_stop_it_first(tmp_path: Path) -> None:
    (tmp_path / controlplane.STATE_FILE).write_text(
        _state(tmp_path, ["real-node-0", "real-node-1"]).to_json()
    )

    result = cli_runner().invoke(app, ["envtest", "node", "start", "real-node-1", "--dir", str(tmp_path)])

    assert result.exit_code == 1
    assert "real-node-1 is running" in result.stderr


def test_node_stop_without_an_envtest_says_none_was_started(tmp_path: Path) -> None:
    result = cli_runner().invoke(app, ["envtest", "node", "stop", "real-node-0", "--dir", str(tmp_path)])

    assert result.exit_code == 1
    assert "no envtest was started" in result.stderr


def _exits_saying(text: str) -> list[str]:
    return [sys.executable, "-c", f"print({text!r})"]


def test_a_kubelet_that_found_its_runtime_not_yet_initialized_is_started_again(tmp_path: Path) -> None:
    node = realnode.RealNode(1)
    first = processes.spawn(tmp_path, node.process("kubelet"), _exits_saying(realnode.CRI_NOT_INITIALIZED))
    waited: list[int] = []

    def wait(what: str, ready: object, process: processes.ProcessRecord | None) -> float:
        assert process is not None
        waited.append(process.pid)
        if len(waited) == 1:
            psutil.Process(process.pid).wait(10)
            raise controlplane.EnvtestError(f"{what}: the process exited")
        return 0.0

    realnode._wait_ready(tmp_path, node, first, wait, lambda name: True)

    assert len(waited) == 2 and waited[0] != waited[1], "waited again on a kubelet started anew"


def test_a_kubelet_that_failed_for_another_reason_is_not_started_again(tmp_path: Path) -> None:
    node = realnode.RealNode(1)
    first = processes.spawn(tmp_path, node.process("kubelet"), _exits_saying("bad flag"))

    def wait(what: str, ready: object, process: processes.ProcessRecord | None) -> float:
        assert process is not None
        psutil.Process(process.pid).wait(10)
        raise controlplane.EnvtestError(f"{what}: the process exited")

    with pytest.raises(controlplane.EnvtestError):
        realnode._wait_ready(tmp_path, node, first, wait, lambda name: True)
