"""tools/containers/leftovers.py: after the containers tier, the engines' firewall chains made since the
record are removed with the jumps to them, and nothing that was there before."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts import load_script

leftovers = load_script("tools/containers/leftovers.py", "kubetrain_container_leftovers")

FILTER = """-P INPUT ACCEPT
-P FORWARD ACCEPT
-P OUTPUT ACCEPT
-N KUBE-FORWARD
-N NETAVARK_FORWARD
-N NETAVARK_ISOLATION_2
-A FORWARD -m comment --comment "kubetrain real node" -j ACCEPT
-A FORWARD -m comment --comment "netavark firewall plugin rules" -j NETAVARK_FORWARD
-A FORWARD -j KUBE-FORWARD
-A NETAVARK_FORWARD -j NETAVARK_ISOLATION_2
-A NETAVARK_FORWARD -d 10.89.0.0/24 -j ACCEPT
"""


def test_the_engines_new_chains_go_after_the_jumps_to_them_and_their_own_rules() -> None:
    commands = leftovers.removal_commands("iptables", "filter", FILTER, recorded=set())

    assert commands == [
        [
            "iptables", "-t", "filter", "-D", "FORWARD", "-m", "comment", "--comment",
            "netavark firewall plugin rules", "-j", "NETAVARK_FORWARD",
        ],
        ["iptables", "-t", "filter", "-F", "NETAVARK_FORWARD"],
        ["iptables", "-t", "filter", "-F", "NETAVARK_ISOLATION_2"],
        ["iptables", "-t", "filter", "-X", "NETAVARK_FORWARD"],
        ["iptables", "-t", "filter", "-X", "NETAVARK_ISOLATION_2"],
    ]  # fmt: skip


def test_chains_there_before_the_record_are_kept() -> None:
    recorded = {"iptables filter NETAVARK_FORWARD", "iptables filter NETAVARK_ISOLATION_2"}

    assert leftovers.removal_commands("iptables", "filter", FILTER, recorded) == []


def test_chains_of_anything_but_the_engines_are_never_touched() -> None:
    commands = leftovers.removal_commands("iptables", "filter", FILTER, recorded=set())

    assert not any("KUBE-FORWARD" in command for command in commands)


def test_a_table_without_new_chains_needs_nothing() -> None:
    assert leftovers.removal_commands("ip6tables", "nat", "-P PREROUTING ACCEPT\n", recorded=set()) == []


def test_docker_chains_are_the_engines_too() -> None:
    listing = "-N DOCKER\n-N DOCKER-USER\n-A FORWARD -j DOCKER-USER\n"

    commands = leftovers.removal_commands("iptables", "filter", listing, recorded=set())

    assert commands[0] == ["iptables", "-t", "filter", "-D", "FORWARD", "-j", "DOCKER-USER"]
    assert commands[-2:] == [
        ["iptables", "-t", "filter", "-X", "DOCKER"],
        ["iptables", "-t", "filter", "-X", "DOCKER-USER"],
    ]


def test_a_dockerd_pid_that_is_no_longer_dockerd_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid_file = tmp_path / "dockerd.pid"
    pid_file.write_text("4242\n")
    monkeypatch.setattr(leftovers, "pids_named", lambda name: [])
    killed: list[int] = []
    monkeypatch.setattr(leftovers.os, "kill", lambda pid, signal: killed.append(pid))

    said = leftovers.stop_dockerd(pid_file)

    assert (said, killed) == ([], [])
    assert not pid_file.exists()


def test_no_pid_file_means_the_tier_started_no_dockerd(tmp_path: Path) -> None:
    assert leftovers.stop_dockerd(tmp_path / "dockerd.pid") == []


def test_the_engines_bridges_are_recognised_by_name() -> None:
    names = ["podman0", "podman3", "docker0", "br-0123456789ab", "kt0", "cni0", "eth0", "br-lan"]

    assert [name for name in names if leftovers.ENGINE_BRIDGE.match(name)] == names[:4]


def test_a_file_an_engine_made_since_the_record_is_removed(tmp_path: Path) -> None:
    identity = tmp_path / "key.json"
    identity.write_text("{}")

    said = leftovers.remove_new_files([identity], kept=[])

    assert not identity.exists()
    assert said == [f"removed {identity}"]


def test_a_file_there_at_the_record_is_kept(tmp_path: Path) -> None:
    identity = tmp_path / "key.json"
    identity.write_text("{}")

    assert leftovers.remove_new_files([identity], kept=[str(identity)]) == []
    assert identity.exists()


def test_a_new_directory_of_empty_directories_is_removed(tmp_path: Path) -> None:
    opt = tmp_path / "containerd"
    (opt / "bin").mkdir(parents=True)
    (opt / "lib").mkdir()

    assert leftovers.remove_new_files([opt], kept=[]) == [f"removed {opt}"]
    assert not opt.exists()


def test_a_new_directory_holding_a_file_is_kept_as_in_use(tmp_path: Path) -> None:
    dns = tmp_path / "aardvark-dns"
    dns.mkdir()
    (dns / "podman1").write_text("10.89.0.1\n")

    assert leftovers.remove_new_files([dns], kept=[]) == [f"kept {dns}: not empty"]
    assert (dns / "podman1").exists()
