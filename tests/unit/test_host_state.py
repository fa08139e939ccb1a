"""tools/ci/host_state.py, the check that ends `make test`: what a run left on the machine outside the
checkout and its caches. Its collectors read a fake root here; the check itself is run by `make test`."""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import pytest

from scripts import load_script

if TYPE_CHECKING:
    import host_state  # a script, not an installed module: mypy finds it among its files (tools/ci)
else:
    host_state = load_script("tools/ci/host_state.py", "host_state")

HOME = PurePosixPath("/home/dev")
CHECKOUT = PurePosixPath("/work/kubetrain")
KERNEL_THREAD = 0x00200000


class FakeHost:
    """A machine's root under tmp_path: files, directories and /proc entries as the collectors read them."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, path: str, text: str = "") -> Path:
        file = self.root / path.lstrip("/")
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text)
        return file

    def directory(self, path: str) -> Path:
        directory = self.root / path.lstrip("/")
        directory.mkdir(parents=True, exist_ok=True)
        return directory

    def symlink(self, path: str, target: str) -> None:
        link = self.root / path.lstrip("/")
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)

    def process(
        self, pid: int, arguments: list[str], parent: int = 1, started: int = 100, flags: int = 0
    ) -> None:
        name = PurePosixPath(arguments[0]).name[:15] if arguments else "kworker/0:1"
        fields = ["S", str(parent), str(pid), str(pid), "0", "-1", str(flags)]
        fields += ["0"] * 12 + [str(started), "1000"]
        self.write(f"proc/{pid}/stat", f"{pid} ({name}) {' '.join(fields)}\n")
        (self.root / f"proc/{pid}/cmdline").write_bytes(b"".join(word.encode() + b"\0" for word in arguments))

    def paths(self) -> dict[str, str]:
        return host_state.collect_paths(self.root, HOME)

    def processes(self) -> dict[tuple[int, int], host_state.Process]:
        return host_state.read_processes(self.root)


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    return FakeHost(tmp_path)


def snapshot(**kinds: dict[str, str]) -> dict[str, dict[str, str]]:
    return {kind.name: kinds.get(kind.name, {}) for kind in host_state.KINDS}


def finding(kind: str, item: str, before: str | None = None, after: str = "") -> host_state.Finding:
    return host_state.Finding(kind, item, before, after)


def allowed(item: str, kind: str = "paths", packaged: frozenset[str] = frozenset()) -> bool:
    places = host_state.allowed_places(CHECKOUT, HOME, "dev")
    return host_state.is_allowed(finding(kind, item), places, packaged)


# ---------------------------------------------------------------------------------------------------- diff


def test_a_thing_present_now_and_not_before_is_a_finding() -> None:
    before = snapshot(interfaces={"lo": ""})
    after = snapshot(interfaces={"lo": "", "docker0": ""})

    assert host_state.diff(before, after) == [finding("interfaces", "docker0")]


def test_a_thing_gone_since_before_is_not_a_finding() -> None:
    assert host_state.diff(snapshot(netns={"cni-1": ""}), snapshot()) == []


def test_a_changed_sysctl_is_a_finding_with_both_values() -> None:
    before = snapshot(sysctls={"net.ipv4.ip_forward": "0"})
    after = snapshot(sysctls={"net.ipv4.ip_forward": "1"})

    assert host_state.diff(before, after) == [finding("sysctls", "net.ipv4.ip_forward", "0", "1")]


def test_a_firewall_chain_that_gained_rules_is_a_finding() -> None:
    before = snapshot(firewall={"iptables filter FORWARD": "policy ACCEPT, 0 rules"})
    after = snapshot(firewall={"iptables filter FORWARD": "policy DROP, 2 rules"})

    assert host_state.diff(before, after) == [
        finding("firewall", "iptables filter FORWARD", "policy ACCEPT, 0 rules", "policy DROP, 2 rules")
    ]


def test_more_processes_running_a_command_that_ran_before_are_not_a_finding() -> None:
    before = snapshot(processes={"/usr/sbin/sshd -D": "1"})
    after = snapshot(processes={"/usr/sbin/sshd -D": "3"})

    assert host_state.diff(before, after) == []


def test_findings_come_in_the_order_of_their_kinds() -> None:
    after = snapshot(sysctls={"net.ipv4.ip_forward": "1"}, paths={"/run/x": ""}, processes={"dockerd": "1"})

    kinds = [each.kind for each in host_state.diff(snapshot(), after)]

    assert kinds == ["paths", "processes", "sysctls"]


# ---------------------------------------------------------------------------------------------- allow-list


def test_the_service_account_directory_of_issue_38_is_not_allowed() -> None:
    assert not allowed("/run/secrets/kubernetes.io/serviceaccount")


def test_a_path_in_the_checkout_is_allowed() -> None:
    assert allowed(f"{CHECKOUT}/.state/host-state.json")


def test_a_path_under_an_allowed_cache_is_allowed() -> None:
    assert allowed(f"{HOME}/.cache/kubetrain/envtest/v1.34.4")


def test_a_new_directory_leading_to_an_allowed_place_is_allowed() -> None:
    assert allowed(f"{HOME}/.cache")


def test_a_path_beside_an_allowed_cache_is_not_allowed() -> None:
    assert not allowed(f"{HOME}/.cache/helm")


def test_a_path_whose_name_only_starts_like_an_allowed_place_is_not_allowed() -> None:
    assert not allowed("/var/lib/docker-leftover")


def test_a_file_a_debian_package_installed_is_allowed() -> None:
    assert allowed("/etc/containerd", packaged=frozenset({"/etc/containerd"}))


def test_pytest_temporary_directories_are_allowed_for_the_user_running_the_check() -> None:
    assert allowed("/tmp/pytest-of-dev")


def test_a_mount_left_in_an_image_store_is_not_allowed() -> None:
    assert not allowed("/var/lib/containers/storage/overlay/0123abcd/merged", kind="mounts")


def test_the_podman_stores_own_bind_mount_is_allowed() -> None:
    assert allowed("/var/lib/containers/storage/overlay", kind="mounts")


def test_a_process_is_never_allowed() -> None:
    assert not allowed("dockerd", kind="processes")


def test_every_allowed_place_gives_a_one_line_reason() -> None:
    places = host_state.allowed_places(CHECKOUT, HOME, "dev")

    assert all(place.reason and "\n" not in place.reason for place in places)


# ------------------------------------------------------------------------------------------------- paths


def test_paths_are_listed_down_to_the_depth_of_their_place(host: FakeHost) -> None:
    host.directory("run/secrets/kubernetes.io/serviceaccount/deeper")

    paths = host.paths()

    assert "/run/secrets/kubernetes.io/serviceaccount" in paths
    assert "/run/secrets/kubernetes.io/serviceaccount/deeper" not in paths


def test_a_symlinked_directory_is_an_entry_and_never_followed(host: FakeHost) -> None:
    host.write("srv/big/file")
    host.symlink("run/link", str(host.root / "srv/big"))

    paths = host.paths()

    assert "/run/link" in paths
    assert not any(path.startswith("/run/link/") for path in paths)


def test_a_place_that_is_a_symlink_is_left_to_the_place_it_points_to(host: FakeHost) -> None:
    host.directory("run/containerd/io.containerd.runtime.v2.task")
    host.symlink("var/run", "../run")

    paths = host.paths()

    assert "/run/containerd/io.containerd.runtime.v2.task" in paths
    assert not any(path.startswith("/var/run/") for path in paths)


def test_home_is_listed_as_its_top_level_and_its_cache(host: FakeHost) -> None:
    host.write(f"{HOME}/.cache/helm/repository/index.yaml")

    paths = host.paths()

    assert f"{HOME}/.cache" in paths
    assert f"{HOME}/.cache/helm" in paths
    assert f"{HOME}/.cache/helm/repository" not in paths


def test_a_missing_place_is_skipped(host: FakeHost) -> None:
    host.write("tmp/only")

    assert host.paths() == {"/tmp": "", "/tmp/only": ""}


# --------------------------------------------------------------------------------------------- processes


def test_a_process_seen_in_both_samples_is_counted_by_its_command(host: FakeHost) -> None:
    host.process(40, ["/usr/sbin/dockerd", "--debug"])
    host.process(41, ["/usr/sbin/dockerd", "--debug"])
    sample = host.processes()

    assert host_state.long_lived_commands(sample, sample, own_pid=99) == {"/usr/sbin/dockerd --debug": "2"}


def test_a_process_seen_in_one_sample_only_is_short_lived_and_left_out(host: FakeHost) -> None:
    first = host.processes()
    host.process(40, ["sleep", "1"])

    assert host_state.long_lived_commands(first, host.processes(), own_pid=99) == {}


def test_a_process_given_the_pid_of_one_that_exited_is_a_different_process(host: FakeHost) -> None:
    host.process(40, ["sleep", "1"], started=100)
    first = host.processes()
    host.process(40, ["sleep", "1"], started=200)

    assert host_state.long_lived_commands(first, host.processes(), own_pid=99) == {}


def test_kernel_threads_are_left_out(host: FakeHost) -> None:
    host.process(2, [], flags=KERNEL_THREAD)
    host.process(7, ["[kworker]"], parent=2, flags=KERNEL_THREAD)
    sample = host.processes()

    assert host_state.long_lived_commands(sample, sample, own_pid=99) == {}


def test_the_checks_own_ancestors_and_descendants_are_left_out(host: FakeHost) -> None:
    host.process(10, ["make", "test"])
    host.process(11, ["/bin/bash", "-c", "host_state.py compare"], parent=10)
    host.process(12, ["python3", "host_state.py", "compare"], parent=11)
    host.process(13, ["iptables-save"], parent=12)
    host.process(20, ["dockerd"], parent=1)
    sample = host.processes()

    assert host_state.long_lived_commands(sample, sample, own_pid=12) == {"dockerd": "1"}


def test_a_process_under_one_that_was_there_before_the_snapshot_is_not_the_runs(host: FakeHost) -> None:
    host.process(30, ["bash"], started=50)  # an engineer's shell, older than the snapshot (taken at 100)
    host.process(31, ["sleep", "600"], parent=30, started=150)
    host.process(40, ["dockerd"], parent=1, started=150)  # what a run leaves is orphaned to init
    host.process(41, ["containerd"], parent=40, started=160)
    sample = host.processes()

    # The shell itself is in the first snapshot too, so the comparison drops it; its sleep is never counted.
    assert host_state.long_lived_commands(sample, sample, own_pid=99, since=100) == {
        "bash": "1",
        "dockerd": "1",
        "containerd": "1",
    }


def test_a_process_that_rewrote_its_arguments_is_named_by_its_executable_too() -> None:
    assert host_state.process_command("postgres", ["postgres: checkpointer"]) == "postgres: checkpointer"
    assert (
        host_state.process_command("containerd-shim", ["shim", "-id", "x"]) == "[containerd-shim] shim -id x"
    )


def test_a_zombie_has_no_command_and_is_left_out(host: FakeHost) -> None:
    host.process(40, [])
    sample = host.processes()

    assert host_state.long_lived_commands(sample, sample, own_pid=99) == {}


# ----------------------------------------------------------------------------------------------- network


def test_interfaces_are_the_entries_of_sys_class_net(host: FakeHost) -> None:
    host.directory("sys/class/net/lo")
    host.directory("sys/class/net/kt0")

    assert host_state.collect_interfaces(host.root) == {"lo": "", "kt0": ""}


def test_ipv4_routes_read_as_prefix_device_and_gateway() -> None:
    table = (
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        "eth0\t00000000\t0100A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
        "kt0\t0000580A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
    )

    assert host_state.parse_ipv4_routes(table) == {
        "0.0.0.0/0 dev eth0 via 192.168.0.1": "",
        "10.88.0.0/16 dev kt0": "",
    }


def test_ipv6_routes_read_as_prefix_device_and_next_hop() -> None:
    zero = "0" * 32
    link_local = "fe80" + "0" * 28
    table = f"{link_local} 40 {zero} 00 {zero} 00000100 00000001 00000000 00000001 kt0\n"

    assert host_state.parse_ipv6_routes(table) == {"fe80::/64 dev kt0": ""}


def test_routes_are_read_from_proc_net(host: FakeHost) -> None:
    host.write("proc/net/route", "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n")
    host.write("proc/net/ipv6_route", f"{'0' * 32} 00 {'0' * 32} 00 {'0' * 32} 0 0 0 0 lo\n")

    assert host_state.collect_routes(host.root) == {"::/0 dev lo": ""}


def test_iptables_save_gives_each_chain_its_policy_and_rule_count() -> None:
    output = (
        "# Generated by iptables-save\n*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:DOCKER - [0:0]\n"
        "-A FORWARD -j DOCKER\n-A DOCKER -i docker0 -j ACCEPT\n-A DOCKER -o docker0 -j ACCEPT\nCOMMIT\n"
    )

    assert host_state.parse_iptables_save(output, "iptables") == {
        "iptables filter FORWARD": "policy DROP, 1 rules",
        "iptables filter DOCKER": "2 rules",
    }


def test_an_empty_built_in_chain_that_accepts_is_no_chain_at_all() -> None:
    output = (
        "*mangle\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -j MARK --set-mark 1\nCOMMIT\n"
    )

    assert host_state.parse_iptables_save(output, "ip6tables") == {
        "ip6tables mangle OUTPUT": "policy ACCEPT, 1 rules"
    }


def test_nft_ruleset_gives_each_chain_of_a_native_table_its_policy_and_rule_count() -> None:
    output = """table inet netavark {
\tset allowed { type ipv4_addr; elements = { 10.0.0.1, 10.0.0.2 } }
\tchain forward {
\t\ttype filter hook forward priority filter; policy accept;
\t\tip saddr { 10.88.0.0/16 } accept
\t\tct state established accept
\t}
\tchain nat {
\t}
}
"""

    assert host_state.parse_nft_ruleset(output) == {
        "nft inet netavark forward": "policy accept, 2 rules",
        "nft inet netavark nat": "0 rules",
    }


def test_nft_leaves_out_the_tables_iptables_save_shows() -> None:
    output = """table ip filter {
\tchain FORWARD {
\t\ttype filter hook forward priority filter; policy drop;
\t}
}
"""

    assert host_state.parse_nft_ruleset(output) == {}


def test_named_network_namespaces_are_the_entries_of_run_netns(host: FakeHost) -> None:
    host.write("run/netns/cni-1234")

    assert host_state.collect_netns(host.root) == {"cni-1234": ""}


# -------------------------------------------------------------------------------------- mounts and sysctls


def test_mountinfo_gives_each_mount_point_its_filesystem_types() -> None:
    table = (
        "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
        "45 27 0:40 / /run/secrets/kubernetes.io/serviceaccount rw shared:5 - tmpfs tmpfs rw\n"
        "46 45 0:41 / /run/secrets/kubernetes.io/serviceaccount rw - tmpfs tmpfs rw\n"
        "47 27 0:42 / /mnt/with\\040space rw - overlay overlay rw\n"
    )

    assert host_state.parse_mountinfo(table) == {
        "/": "ext4",
        "/run/secrets/kubernetes.io/serviceaccount": "tmpfs, tmpfs",
        "/mnt/with space": "overlay",
    }


def test_sysctls_are_read_from_proc_sys_and_a_missing_one_is_skipped(host: FakeHost) -> None:
    host.write("proc/sys/net/ipv4/ip_forward", "1\n")
    host.write("proc/sys/net/ipv4/conf/all/route_localnet", "0\n")

    assert host_state.collect_sysctls(host.root) == {
        "net.ipv4.ip_forward": "1",
        "net.ipv4.conf.all.route_localnet": "0",
    }


def test_a_sysctl_the_lanes_changed_is_put_back_and_an_unchanged_one_left_alone(host: FakeHost) -> None:
    forward = host.write("proc/sys/net/ipv4/ip_forward", "1\n")
    localnet = host.write("proc/sys/net/ipv4/conf/all/route_localnet", "0\n")
    before = snapshot(sysctls={"net.ipv4.ip_forward": "0", "net.ipv4.conf.all.route_localnet": "0"})

    restored = host_state.restore_sysctls(host.root, before)

    assert forward.read_text() == "0\n" and localnet.read_text() == "0\n"
    assert restored == ["host state: net.ipv4.ip_forward put back to 0 (the lanes left 1)"]


def test_a_shared_directory_made_by_the_lanes_and_left_empty_is_removed(host: FakeHost) -> None:
    (host.root / "run/containerd/s").mkdir(parents=True)

    removed = host_state.remove_shared_directories(host.root, snapshot(paths={}))

    assert not (host.root / "run/containerd").exists()
    assert removed == ["host state: /run/containerd removed (the lanes' shims left it empty)"]


def test_a_shared_directory_still_holding_a_file_is_left_for_the_comparison(host: FakeHost) -> None:
    host.write("run/containerd/s/0123abcd", "")

    assert host_state.remove_shared_directories(host.root, snapshot(paths={})) == []
    assert (host.root / "run/containerd/s/0123abcd").exists()


def test_a_shared_directory_there_before_the_lanes_stays(host: FakeHost) -> None:
    (host.root / "run/containerd/s").mkdir(parents=True)

    assert host_state.remove_shared_directories(host.root, snapshot(paths={"/run/containerd": ""})) == []
    assert (host.root / "run/containerd/s").is_dir()


def test_package_files_are_the_paths_dpkg_lists(host: FakeHost) -> None:
    host.write("var/lib/dpkg/info/docker.io.list", "/.\n/etc\n/etc/docker\n")
    host.write("var/lib/dpkg/info/runc:amd64.list", "/usr/sbin/runc\n")

    assert host_state.package_files(host.root) == {"/.", "/etc", "/etc/docker", "/usr/sbin/runc"}


# -------------------------------------------------------------------------------------------------- report


def test_a_clean_run_reports_one_line() -> None:
    lines = host_state.report([], checked=400, seconds=1.0)

    assert lines == ["host state: nothing left outside the checkout and its caches (400 things, 1.0 s)"]


def test_findings_are_grouped_under_their_kind() -> None:
    findings = [
        finding("paths", "/run/a"),
        finding("paths", "/run/b"),
        finding("processes", "dockerd", after="1"),
    ]

    assert host_state.report(findings, checked=9, seconds=1.0)[1:-1] == [
        "paths:",
        "  /run/a",
        "  /run/b",
        "processes:",
        "  dockerd",
    ]


def test_a_command_run_by_several_processes_says_how_many() -> None:
    assert finding("processes", "containerd-shim", after="3").line() == "  containerd-shim  (3 processes)"


def test_every_report_line_fits_in_100_columns() -> None:
    findings = [
        finding("processes", "java " + "-Dx=y " * 40, after="1"),
        finding("paths", "/tmp/" + "x" * 200),
    ]

    assert all(len(line) < 100 for line in host_state.report(findings, checked=2, seconds=1.0))


def test_a_line_too_long_keeps_its_start_and_its_end() -> None:
    line = finding("mounts", "/var/lib/containers/storage/overlay/" + "0" * 64 + "/merged").line()

    assert line.startswith("  /var/lib/containers/storage/overlay/00")
    assert line.endswith("/merged")


def test_a_command_line_holding_a_newline_is_printed_on_one_line() -> None:
    assert finding("processes", "bash -c 'wait\n'", after="1").line() == "  bash -c 'wait\\n'"


def test_a_file_name_that_is_not_utf_8_is_printed_escaped() -> None:
    assert finding("paths", "/tmp/\udcff").line() == "  /tmp/\\udcff"


# ---------------------------------------------------------------------------------------------- snapshots


def test_a_file_that_is_not_a_snapshot_cannot_be_compared(tmp_path: Path) -> None:
    file = tmp_path / "other.json"
    file.write_text(json.dumps({"format": 0, "kinds": {}}))

    assert host_state.main(["compare", str(file)]) == 2
