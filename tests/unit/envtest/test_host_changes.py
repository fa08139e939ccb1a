"""A real node's side effects on the host (sysctls its components set, fixed directories they make) are put
back after its stop as they were before its start, and nothing that was there before is removed."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from kubetrain.envtest import host_changes


@pytest.fixture
def proc_sys(tmp_path: Path) -> Path:
    root = tmp_path / "proc-sys"
    (root / "net" / "ipv4").mkdir(parents=True)
    (root / "net" / "ipv4" / "ip_forward").write_text("0\n")
    (root / "kernel").mkdir()
    (root / "kernel" / "panic").write_text("1\n")
    return root


def test_a_sysctl_a_component_changed_is_written_back(tmp_path: Path, proc_sys: Path) -> None:
    record = tmp_path / "host-before.json"
    host_changes.record(record, ["net.ipv4.ip_forward"], [], proc_sys)
    (proc_sys / "net" / "ipv4" / "ip_forward").write_text("1\n")  # the CNI bridge plugin

    done = host_changes.restore(record, proc_sys)

    assert (proc_sys / "net" / "ipv4" / "ip_forward").read_text() == "0\n"
    assert done == ["sysctl net.ipv4.ip_forward back to 0"]


def test_an_unchanged_sysctl_is_not_written(tmp_path: Path, proc_sys: Path) -> None:
    record = tmp_path / "host-before.json"
    host_changes.record(record, ["kernel.panic"], [], proc_sys)

    assert host_changes.restore(record, proc_sys) == []


def test_a_sysctl_this_kernel_lacks_is_skipped(tmp_path: Path, proc_sys: Path) -> None:
    record = tmp_path / "host-before.json"
    host_changes.record(record, ["net.bridge.bridge-nf-call-iptables"], [], proc_sys)

    assert host_changes.restore(record, proc_sys) == []


def test_a_directory_made_since_the_record_goes_when_empty(tmp_path: Path, proc_sys: Path) -> None:
    record = tmp_path / "host-before.json"
    made = tmp_path / "run" / "containerd"
    host_changes.record(record, [], [made], proc_sys)
    (made / "s").mkdir(parents=True)  # the shims' socket directory, empty once they exit

    done = host_changes.restore(record, proc_sys)

    assert not made.exists()
    assert done == [f"removed {made}"]


def test_a_made_directory_still_holding_a_file_keeps_it(tmp_path: Path, proc_sys: Path) -> None:
    record = tmp_path / "host-before.json"
    made = tmp_path / "var" / "lib" / "cni"
    host_changes.record(record, [], [made], proc_sys)
    (made / "results").mkdir(parents=True)
    (made / "networks").mkdir()
    (made / "results" / "live-pod").write_text("{}")

    host_changes.restore(record, proc_sys)

    assert (made / "results" / "live-pod").exists()
    assert not (made / "networks").exists()


def test_a_made_directory_a_stop_could_not_remove_is_the_next_stops_to_remove(
    tmp_path: Path, proc_sys: Path
) -> None:
    record = tmp_path / "host-before.json"
    made = tmp_path / "run" / "containerd"
    host_changes.record(record, [], [made], proc_sys)
    (made / "s").mkdir(parents=True)
    (made / "s" / "held").write_text("")
    host_changes.restore(record, proc_sys)
    host_changes.record(record, [], [made], proc_sys)  # the next node starts; the directory is there now
    (made / "s" / "held").unlink()

    done = host_changes.restore(record, proc_sys)

    assert not made.exists()
    assert done == [f"removed {made}"]
    assert not record.exists()


def test_a_directory_there_before_the_record_stays_even_when_empty(tmp_path: Path, proc_sys: Path) -> None:
    record = tmp_path / "host-before.json"
    there = tmp_path / "run" / "kubetrain"
    there.mkdir(parents=True)
    host_changes.record(record, [], [there], proc_sys)

    host_changes.restore(record, proc_sys)

    assert there.is_dir()


def test_a_second_record_keeps_the_values_from_before_the_first_start(tmp_path: Path, proc_sys: Path) -> None:
    record = tmp_path / "host-before.json"
    host_changes.record(record, ["net.ipv4.ip_forward"], [], proc_sys)
    (proc_sys / "net" / "ipv4" / "ip_forward").write_text("1\n")
    host_changes.record(record, ["net.ipv4.ip_forward"], [], proc_sys)

    host_changes.restore(record, proc_sys)

    assert (proc_sys / "net" / "ipv4" / "ip_forward").read_text() == "0\n"


def test_without_a_record_nothing_is_done(tmp_path: Path, proc_sys: Path) -> None:
    assert host_changes.restore(tmp_path / "host-before.json", proc_sys) == []


def _kubelet_dir_made_since_the_record(tmp_path: Path, proc_sys: Path) -> tuple[Path, Path]:
    kubelet = tmp_path / "var-lib-kubelet"
    record = tmp_path / "host-before.json"
    host_changes.record(record, [], [kubelet], proc_sys)
    (kubelet / "device-plugins").mkdir(parents=True)
    socket = kubelet / "device-plugins" / "kubelet.sock"
    socket.write_text("")
    return record, socket


def test_a_stopped_kubelets_files_go_with_the_directory_it_made(tmp_path: Path, proc_sys: Path) -> None:
    record, socket = _kubelet_dir_made_since_the_record(tmp_path, proc_sys)
    no_processes = tmp_path / "proc"
    no_processes.mkdir()

    host_changes.restore(record, proc_sys, [socket], no_processes)

    assert not socket.parents[1].exists()


def test_a_running_kubelets_files_are_kept(tmp_path: Path, proc_sys: Path) -> None:
    record, kubelet_socket = _kubelet_dir_made_since_the_record(tmp_path, proc_sys)
    proc = tmp_path / "proc"
    fake_process(proc, 4242, "kubelet", "S")

    host_changes.restore(record, proc_sys, [kubelet_socket], proc)

    assert kubelet_socket.exists()


def fake_process(proc: Path, pid: int, command: str, state: str) -> None:
    """``/proc/<pid>`` as ``kubelet_running`` reads it: the command's name and the process's state."""
    (proc / str(pid)).mkdir(parents=True, exist_ok=True)
    (proc / str(pid) / "comm").write_text(f"{command}\n")
    (proc / str(pid) / "stat").write_text(f"{pid} ({command}) {state} 1 {pid} {pid} 0 -1\n")


KUBELET_RULES = """*mangle
:PREROUTING ACCEPT [0:0]
:KUBE-IPTABLES-HINT - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
COMMIT
*filter
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-FIREWALL - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:NETAVARK_FORWARD - [0:0]
-A INPUT -j KUBE-FIREWALL
-A OUTPUT -j KUBE-FIREWALL
-A INPUT -j NETAVARK_FORWARD
-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m conntrack ! --ctstate RELATED -j DROP
COMMIT
"""


def test_the_kubelets_chains_are_read_per_table_and_no_other_chain() -> None:
    assert host_changes.kubelet_chains(KUBELET_RULES) == {
        "mangle KUBE-IPTABLES-HINT",
        "mangle KUBE-KUBELET-CANARY",
        "filter KUBE-FIREWALL",
        "filter KUBE-KUBELET-CANARY",
    }


def test_a_kubelet_chain_made_since_the_record_goes_after_the_rules_jumping_to_it() -> None:
    removals = host_changes.chain_removals(KUBELET_RULES, kept={"mangle KUBE-IPTABLES-HINT"})

    assert removals == [
        ["-t", "filter", "-D", "INPUT", "-j", "KUBE-FIREWALL"],
        ["-t", "filter", "-D", "OUTPUT", "-j", "KUBE-FIREWALL"],
        ["-t", "filter", "-F", "KUBE-FIREWALL"],
        ["-t", "filter", "-X", "KUBE-FIREWALL"],
        ["-t", "filter", "-F", "KUBE-KUBELET-CANARY"],
        ["-t", "filter", "-X", "KUBE-KUBELET-CANARY"],
        ["-t", "mangle", "-F", "KUBE-KUBELET-CANARY"],
        ["-t", "mangle", "-X", "KUBE-KUBELET-CANARY"],
    ]


def test_a_socket_nothing_listens_on_goes_and_a_served_one_stays(tmp_path: Path) -> None:
    served = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    served.bind(str(tmp_path / "served"))
    served.listen()
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(tmp_path / "dead"))
    dead.close()  # a killed shim's socket: the file stays, nobody listens
    (tmp_path / "plain").write_text("not a socket")

    with served:
        assert host_changes.remove_stale_sockets(tmp_path) == [tmp_path / "dead"]

    assert sorted(path.name for path in tmp_path.iterdir()) == ["plain", "served"]


def test_a_zombie_kubelet_is_not_a_running_one(tmp_path: Path) -> None:
    fake_process(tmp_path, 41, "kubelet", "Z")
    assert not host_changes.kubelet_running(tmp_path)

    fake_process(tmp_path, 42, "kubelet", "S")
    assert host_changes.kubelet_running(tmp_path)


def test_a_made_directory_held_by_a_live_socket_goes_once_its_server_exits(
    tmp_path: Path, proc_sys: Path
) -> None:
    record = tmp_path / "host-before.json"
    shims = tmp_path / "run" / "containerd" / "s"
    host_changes.record(record, [], [tmp_path / "run" / "containerd"], proc_sys)
    shims.mkdir(parents=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(shims / "shim"))
    server.listen()

    def shim_exits() -> None:
        time.sleep(1)
        server.close()
        (shims / "shim").unlink(missing_ok=True)

    exiting = threading.Thread(target=shim_exits)
    exiting.start()
    host_changes.restore(record, proc_sys, [], tmp_path)
    exiting.join()

    assert not (tmp_path / "run" / "containerd").exists()
