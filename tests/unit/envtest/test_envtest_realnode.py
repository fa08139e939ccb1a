"""The real node's configuration: what the API server, containerd and the kubelet are given."""

from __future__ import annotations

import tomllib
from pathlib import Path

from kubetrain.envtest import realnode
from kubetrain.envtest.binaries import Binaries
from kubetrain.envtest.controlplane import Ports, apiserver_args
from kubetrain.envtest.pki import SERVICE_IP, generate_pki

PORTS = Ports(etcd_client=1, etcd_peer=2, apiserver=3, controller_manager=4, scheduler=5)


def _flags(args: list[str]) -> dict[str, str]:
    return dict(arg.split("=", 1) for arg in args[1:] if "=" in arg)


def test_real_node_api_server_listens_on_the_node_address_and_admits_service_account_tokens(
    tmp_path: Path,
) -> None:
    pki = generate_pki(tmp_path / "pki", extra_ips=(realnode.NODE_IP,))

    flags = _flags(apiserver_args(Binaries("v1.34.4", tmp_path), pki, PORTS, real_node=True))

    assert flags["--bind-address"] == realnode.NODE_IP
    assert "ServiceAccount" not in flags["--disable-admission-plugins"]
    assert flags["--authorization-mode"] == "Node,RBAC"
    assert Path(flags["--kubelet-client-certificate"]).is_file()
    assert flags["--api-audiences"] == flags["--service-account-issuer"]


def test_fake_node_api_server_stays_on_loopback_without_service_account_admission(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path / "pki")

    flags = _flags(apiserver_args(Binaries("v1.34.4", tmp_path), pki, PORTS))

    assert flags["--bind-address"] == "127.0.0.1"
    assert "ServiceAccount" in flags["--disable-admission-plugins"]


def test_containerd_keeps_its_state_under_the_node_directory_and_never_lowers_oom_score(
    tmp_path: Path,
) -> None:
    paths = realnode.NodePaths(tmp_path / "node")

    config = tomllib.loads(realnode.containerd_config(paths))

    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["restrict_oom_score_adj"] is True
    assert cri["netns_mounts_under_state_dir"] is True
    assert cri["sandbox_image"] == realnode.PAUSE_IMAGE
    runc = cri["containerd"]["runtimes"]["runc"]["options"]
    for path in (config["root"], config["state"], runc["Root"]):
        assert path.startswith(str(paths.root))
    assert runc["SystemdCgroup"] is False


def test_kubelet_serves_on_the_node_address_with_cluster_dns_there(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path / "pki")

    config = realnode.kubelet_config(realnode.NodePaths(tmp_path / "node"), pki)

    assert config["address"] == realnode.NODE_IP
    assert config["clusterDNS"] == [realnode.NODE_IP]
    assert config["authentication"]["anonymous"]["enabled"] is False
    assert config["authentication"]["x509"]["clientCAFile"] == str(pki.ca_cert)


def test_kubernetes_service_rule_sends_only_pod_network_traffic_for_the_cluster_ip_to_the_api_server() -> (
    None
):
    rule = realnode._iptables_rule(6443)

    assert rule[rule.index("-s") + 1] == realnode.POD_NETWORK
    assert rule[rule.index("-d") + 1] == f"{SERVICE_IP}/32"
    assert rule[rule.index("--to-destination") + 1] == f"{realnode.NODE_IP}:6443"


def test_kubelet_never_deletes_images_to_reclaim_disk_as_none_can_be_pulled_back(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path / "pki")

    config = realnode.kubelet_config(realnode.NodePaths(tmp_path / "node"), pki)

    # Thresholds left out are not defaulted once evictionHard is set: no disk signal, no disk reclaim.
    assert set(config["evictionHard"]) == {"memory.available"}
    assert config["imageGCHighThresholdPercent"] == 100


def _cni_cache_with(cache: Path, names: list[str]) -> Path:
    results = cache / "results"
    results.mkdir(parents=True)
    for name in names:
        (results / name).write_text("{}")
    return results


def test_a_stopped_nodes_cni_cache_entries_are_removed(tmp_path: Path) -> None:
    paths = realnode.NodePaths(tmp_path / "node")
    (paths.containerd_root / "io.containerd.grpc.v1.cri" / "sandboxes" / "abc123").mkdir(parents=True)
    results = _cni_cache_with(tmp_path / "cni", ["kubetrain-abc123-eth0", "cni-loopback-abc123-lo"])

    realnode.remove_cni_cache_entries(paths, tmp_path / "cni")

    assert list(results.iterdir()) == []


def test_cni_cache_entries_of_other_sandboxes_are_kept(tmp_path: Path) -> None:
    paths = realnode.NodePaths(tmp_path / "node")
    (paths.containerd_root / "io.containerd.grpc.v1.cri" / "sandboxes" / "abc123").mkdir(parents=True)
    results = _cni_cache_with(tmp_path / "cni", ["kubetrain-def456-eth0", "cni-loopback-def456-lo"])

    assert realnode.remove_cni_cache_entries(paths, tmp_path / "cni") == []
    assert sorted(entry.name for entry in results.iterdir()) == [
        "cni-loopback-def456-lo",
        "kubetrain-def456-eth0",
    ]
