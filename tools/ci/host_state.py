#!/usr/bin/env python3
"""What a `make test` left on this machine outside the checkout and its caches.

`host_state.py snapshot FILE` records the host's state as JSON: the entries of the places a run could write
to outside the checkout, long-lived processes, network interfaces, routes, firewall chains, network
namespaces, mounts and a few sysctls a node touches. `host_state.py compare FILE` takes a new snapshot and
prints, grouped by kind, each thing present now and not in FILE (and each firewall chain, mount or sysctl
whose value changed), less the allow-list (`allowed_places`), and exits 1 when any remains.

`make test` snapshots before its lanes and compares after them: a run that left a mount point under
/var/run/secrets made the Kubeflow SDK believe it ran in a pod (issue #38), and one left dockerd running.
The check is for a machine running one `make test`: what another run does meanwhile shows up too.

Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import pwd
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

# kind -> item -> value; an item's value is "" where only its presence matters.
Snapshot = dict[str, dict[str, str]]

FORMAT = 1
MAX_COLUMNS = 99


@dataclass(frozen=True)
class Kind:
    name: str
    # Whether a changed value is reported: a sysctl's or a firewall chain's value is its state, and a mount
    # point's its filesystems (one mounted over another is new), while a process's is how many run the same
    # command, and more of a command that ran before is not a new thing.
    reports_changes: bool


KINDS = (
    Kind("paths", reports_changes=False),
    Kind("processes", reports_changes=False),
    Kind("interfaces", reports_changes=False),
    Kind("routes", reports_changes=False),
    Kind("firewall", reports_changes=True),
    Kind("netns", reports_changes=False),
    Kind("mounts", reports_changes=True),
    Kind("sysctls", reports_changes=True),
)


# Places a run could write to outside the checkout, and how deep to list each: deep enough to name what was
# left (/var/run/secrets/kubernetes.io/serviceaccount is three levels under /var/run), never into big trees.
@dataclass(frozen=True)
class Place:
    path: PurePosixPath
    depth: int


def places(home: PurePosixPath) -> tuple[Place, ...]:
    system = (
        ("/", 1),
        ("/etc", 1),
        ("/etc/cni", 3),
        ("/etc/containerd", 2),
        ("/etc/containers", 3),
        ("/etc/docker", 2),
        ("/var/run", 3),
        ("/run", 3),
        ("/var/lib", 1),
        ("/var/tmp", 1),  # `podman save` stages images for docker here
        ("/opt", 2),
        ("/usr/local/bin", 1),
        ("/tmp", 1),
    )
    in_home = (
        (".", 1),
        (".config", 1),
        (".cache", 1),
        (".local/share", 1),
        (".local/state", 3),  # kubetrain's own state: ~/.local/state/kubetrain/{envtest,runs/<job>}
    )
    return tuple(Place(PurePosixPath(path), depth) for path, depth in system) + tuple(
        Place(home / path, depth) for path, depth in in_home
    )


@dataclass(frozen=True)
class Allowed:
    """A place a run may leave things in: that path, what is under it, and the directories leading to it."""

    path: PurePosixPath
    reason: str

    def covers(self, path: PurePosixPath) -> bool:
        return path == self.path or path in self.path.parents or self.path in path.parents


def allowed_places(checkout: PurePosixPath, home: PurePosixPath, user: str) -> tuple[Allowed, ...]:
    system = PurePosixPath("/")
    return (
        Allowed(checkout, "the checkout: the venv, .state/ and every build output"),
        Allowed(home / ".cache/kubetrain", "the project's cache: Go-built tools, wheels, node images"),
        Allowed(home / ".cache/go-build", "Go's build cache, shared by every Go build of a run"),
        Allowed(home / "go", "Go's module cache (GOPATH's default)"),
        Allowed(home / ".cache/pip", "pip's download cache: the venv's and the images' wheels"),
        Allowed(system / "var/lib/containers", "podman's image store: the images the tiers build"),
        Allowed(system / "var/lib/docker", "docker's image store: the containers tier's images"),
        # Daemonless, podman keeps no process, but its first command on a machine makes these (tmpfs, until
        # reboot) and no later one removes them: on a fresh machine they are the first run's.
        Allowed(system / "run/containers/storage", "podman's run root: its store's locks and mount state"),
        Allowed(system / "run/libpod", "podman's run directory: its events log, exit codes, liveness lock"),
        Allowed(system / "etc/docker/daemon.json", "make docker's settings for the docker it installs"),
        Allowed(
            system / "etc/containers/containers.conf.d/50-kubetrain.conf",
            "podman's settings on hybrid cgroups (tools/containers/setup.sh)",
        ),
        Allowed(system / "run/lock/kubetrain-apt.lock", "the file apt installs take turns on (APT_LOCK)"),
        Allowed(system / "tmp" / f"pytest-of-{user}", "pytest's temporary directories: it keeps three"),
    )


# Mount points that stay after a run by design; any other mount left (a container's rootfs, a pod's volume, a
# network namespace) belongs to something still running or not cleaned up.
ALLOWED_MOUNTS = {
    "/var/lib/containers/storage/overlay": "podman's store keeps its overlay directory bind-mounted private",
}


# Files of the Debian packages a run installs (each step installs those it needs) are the machine's, not
# leaks: dpkg lists every path a package installed.
def package_files(root: Path) -> frozenset[str]:
    files: set[str] = set()
    try:
        lists = list((root / "var/lib/dpkg/info").glob("*.list"))
    except OSError:
        return frozenset()
    for listing in lists:
        try:
            files.update(line for line in listing.read_text(errors="replace").splitlines() if line)
        except OSError:
            continue
    return frozenset(files)


# ---------------------------------------------------------------------------------------------- collectors


def _host_path(root: Path, path: PurePosixPath) -> Path:
    return root / path.relative_to("/")


def collect_paths(root: Path, home: PurePosixPath) -> dict[str, str]:
    """Every entry down to each place's depth, as the host names it; symlinks are entries, never followed."""
    entries: dict[str, str] = {}
    for place in places(home):
        start = _host_path(root, place.path)
        if start.is_symlink():
            continue  # /var/run -> /run: the place it points to is listed in its own right
        _list_entries(start, place.path, place.depth, entries)
    return entries


def _list_entries(directory: Path, named: PurePosixPath, depth: int, entries: dict[str, str]) -> None:
    try:
        with os.scandir(directory) as scan:
            children = list(scan)
    except OSError:  # gone while reading, not a directory, or not readable
        return
    for child in children:
        child_name = named / child.name
        entries[str(child_name)] = ""
        try:
            is_directory = child.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if is_directory and depth > 1:
            _list_entries(Path(child.path), child_name, depth - 1, entries)


@dataclass(frozen=True)
class Process:
    pid: int
    parent: int
    # Clock ticks from boot to its start: with the pid, tells a process from a later one given the same pid.
    started: int
    command: str
    kernel_thread: bool


PF_KTHREAD = 0x00200000


def read_processes(root: Path) -> dict[tuple[int, int], Process]:
    processes: dict[tuple[int, int], Process] = {}
    try:
        pids = [int(entry.name) for entry in os.scandir(root / "proc") if entry.name.isdigit()]
    except OSError:
        return processes
    for pid in pids:
        process = _read_process(root / "proc" / str(pid), pid)
        if process is not None:
            processes[(process.pid, process.started)] = process
    return processes


def _read_process(directory: Path, pid: int) -> Process | None:
    try:
        stat = (directory / "stat").read_text(errors="replace")
        arguments = (directory / "cmdline").read_bytes().split(b"\0")
    except OSError:  # it exited while being read
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split at the last ")".
    name = stat[stat.find("(") + 1 : stat.rfind(")")]
    fields = stat[stat.rfind(")") + 2 :].split()
    if len(fields) < 20:
        return None
    words = [os.fsdecode(word) for word in arguments if word]
    return Process(
        pid=pid,
        parent=int(fields[1]),
        started=int(fields[19]),
        command=process_command(name, words),
        kernel_thread=bool(int(fields[6]) & PF_KTHREAD),
    )


def process_command(name: str, arguments: Sequence[str]) -> str:
    """Its command line, led by its executable's name in brackets when the command line does not start with it
    (a process that rewrote its arguments); a zombie has no command line and is left out."""
    if not arguments:
        return ""
    command_line = " ".join(arguments)
    if PurePosixPath(arguments[0]).name.startswith(name):  # comm: the first 15 bytes of its name
        return command_line
    return f"[{name}] {command_line}"


def own_tree(processes: Iterable[Process], own_pid: int) -> set[int]:
    """The check's ancestors (the make and shells that started it) and its descendants (iptables-save)."""
    parent_of = {process.pid: process.parent for process in processes}
    tree = {own_pid}
    pid = own_pid
    while pid in parent_of and parent_of[pid] not in tree and parent_of[pid] > 0:
        pid = parent_of[pid]
        tree.add(pid)
    for child in parent_of:
        ancestor = child
        seen: set[int] = set()
        while ancestor in parent_of and ancestor not in seen:
            if ancestor == own_pid:
                tree.add(child)
                break
            seen.add(ancestor)
            ancestor = parent_of[ancestor]
    return tree


def under_earlier_processes(processes: Iterable[Process], since: int) -> set[int]:
    """The processes with an ancestor other than init that started by ``since`` (clock ticks after boot):
    what a shell or service that was already there runs (an engineer's command beside the run) is theirs.
    What a run leaves is orphaned to init, or hangs under what it started itself. (Where a subreaper other
    than init adopts orphans, they are not seen: a leak missed, never a false alarm.)"""
    by_pid = {process.pid: process for process in processes}
    under: set[int] = set()
    for process in by_pid.values():
        ancestor = by_pid.get(process.parent)
        seen: set[int] = set()
        while ancestor is not None and ancestor.pid > 1 and ancestor.pid not in seen:
            if ancestor.started <= since:
                under.add(process.pid)
                break
            seen.add(ancestor.pid)
            ancestor = by_pid.get(ancestor.parent)
    return under


def long_lived_commands(
    first: Mapping[tuple[int, int], Process],
    second: Mapping[tuple[int, int], Process],
    own_pid: int,
    since: int | None = None,
) -> dict[str, str]:
    """Each command run by a process in both samples, with how many such processes run it: a process seen in
    only one lived less than the time between them, a passing command and not a thing left behind. With
    ``since`` (the first snapshot's time), those under a process that was there before are left out."""
    excluded = own_tree(second.values(), own_pid)
    if since is not None:
        excluded |= under_earlier_processes(second.values(), since)
    counts = Counter(
        process.command
        for key, process in second.items()
        if key in first and process.command and not process.kernel_thread and process.pid not in excluded
    )
    return {command: str(count) for command, count in counts.items()}


def collect_processes(
    root: Path, own_pid: int, since: int | None = None, gap_seconds: float = 1.0
) -> dict[str, str]:
    first = read_processes(root)
    time.sleep(gap_seconds)
    return long_lived_commands(first, read_processes(root), own_pid, since)


def boot_ticks(root: Path) -> int:
    """Now, in the clock ticks after boot that /proc/<pid>/stat gives a process's start in."""
    uptime = float((root / "proc/uptime").read_text().split()[0])
    return int(uptime * os.sysconf("SC_CLK_TCK"))


def collect_interfaces(root: Path) -> dict[str, str]:
    try:
        return {entry.name: "" for entry in os.scandir(root / "sys/class/net")}
    except OSError:
        return {}


def parse_ipv4_routes(table: str) -> dict[str, str]:
    """/proc/net/route: addresses in hex, in the host's (little-endian) byte order."""
    routes: dict[str, str] = {}
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8:
            continue
        device, destination, gateway, mask = fields[0], fields[1], fields[2], fields[7]
        prefix = bin(int(mask, 16)).count("1")
        route = f"{_ipv4(destination)}/{prefix} dev {device}"
        if int(gateway, 16):
            route += f" via {_ipv4(gateway)}"
        routes[route] = ""
    return routes


def _ipv4(little_endian_hex: str) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(int(little_endian_hex, 16).to_bytes(4, "little"))


def parse_ipv6_routes(table: str) -> dict[str, str]:
    """/proc/net/ipv6_route: destination, its prefix length, source, its length, next hop, ..., device."""
    routes: dict[str, str] = {}
    for line in table.splitlines():
        fields = line.split()
        if len(fields) < 10:
            continue
        destination = ipaddress.IPv6Address(bytes.fromhex(fields[0]))
        route = f"{destination}/{int(fields[1], 16)} dev {fields[9]}"
        next_hop = ipaddress.IPv6Address(bytes.fromhex(fields[4]))
        if next_hop != ipaddress.IPv6Address(0):
            route += f" via {next_hop}"
        routes[route] = ""
    return routes


def collect_routes(root: Path) -> dict[str, str]:
    routes: dict[str, str] = {}
    for table, parse in (("proc/net/route", parse_ipv4_routes), ("proc/net/ipv6_route", parse_ipv6_routes)):
        try:
            routes.update(parse((root / table).read_text()))
        except (OSError, ValueError):
            continue
    return routes


def _chain_state(policy: str, rules: int) -> str:
    return f"policy {policy}, {rules} rules" if policy != "-" else f"{rules} rules"


BUILT_IN_CHAINS = {"INPUT", "OUTPUT", "FORWARD", "PREROUTING", "POSTROUTING"}
"""Left out while empty and accepting: iptables-nft makes a table's built-in chains with its first rule and
never removes them, and an empty chain that accepts filters as a table never made does."""


def parse_iptables_save(output: str, command: str) -> dict[str, str]:
    """Each chain, as `<command> <table> <chain>`, with its policy and how many rules it holds."""
    policies: dict[tuple[str, str], str] = {}
    rules: Counter[tuple[str, str]] = Counter()
    table = ""
    for line in output.splitlines():
        if line.startswith("*"):
            table = line[1:].strip()
        elif line.startswith(":"):
            name, policy = [*line[1:].split(), "-"][:2]
            policies[(table, name)] = policy
        elif line.startswith("-A "):
            name = line.split()[1]
            rules[(table, name)] += 1
            policies.setdefault((table, name), "-")
    return {
        f"{command} {table} {name}": _chain_state(policy, rules[(table, name)])
        for (table, name), policy in policies.items()
        if not (name in BUILT_IN_CHAINS and policy == "ACCEPT" and not rules[(table, name)])
    }


# iptables-nft's tables, which iptables-save already reports.
IPTABLES_TABLES = {"filter", "nat", "mangle", "raw", "security"}


def parse_nft_ruleset(output: str) -> dict[str, str]:
    """Each chain of each table iptables-save does not show, as `nft <family> <table> <chain>`."""
    chains: dict[str, str] = {}
    depth = 0
    table = ""
    chain = ""
    policy = "-"
    rules = 0
    for raw_line in output.splitlines():
        line = raw_line.strip()
        if depth == 0 and line.startswith("table "):
            family, name = [*line.split(), "", ""][1:3]
            skipped = family in ("ip", "ip6") and name in IPTABLES_TABLES
            table = "" if skipped else f"{family} {name}"
        elif depth == 1 and line.startswith("chain "):
            chain, policy, rules = line.split()[1], "-", 0
        elif depth == 2 and chain:
            if line.startswith("type ") and "policy " in line:
                policy = line.split("policy ", 1)[1].rstrip(";").split(";")[0].strip()
            elif line and not line.startswith(("type ", "}", "comment ")):
                rules += 1
        depth += line.count("{") - line.count("}")
        if depth == 1 and chain:
            if table:
                chains[f"nft {table} {chain}"] = _chain_state(policy, rules)
            chain = ""
    return chains


def _output(command: Sequence[str]) -> str | None:
    if shutil.which(command[0]) is None:
        return None
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout if result.returncode == 0 else None


def collect_firewall() -> dict[str, str]:
    chains: dict[str, str] = {}
    for command in ("iptables-save", "ip6tables-save"):
        output = _output([command])
        if output is not None:
            chains.update(parse_iptables_save(output, command.removesuffix("-save")))
    ruleset = _output(["nft", "list", "ruleset"])
    if ruleset is not None:
        chains.update(parse_nft_ruleset(ruleset))
    return chains


def collect_netns(root: Path) -> dict[str, str]:
    """The named network namespaces, which `ip netns` lists from /run/netns."""
    try:
        return {entry.name: "" for entry in os.scandir(root / "run/netns")}
    except OSError:
        return {}


def parse_mountinfo(table: str) -> dict[str, str]:
    """Each mount point with its filesystem types (two when one is mounted over another)."""
    types: dict[str, list[str]] = {}
    for line in table.splitlines():
        fields = line.split()
        if "-" not in fields[6:]:
            continue
        separator = fields.index("-", 6)
        if len(fields) <= separator + 1:
            continue
        mount_point = _unescape_octal(fields[4])
        types.setdefault(mount_point, []).append(fields[separator + 1])
    return {mount_point: ", ".join(sorted(kinds)) for mount_point, kinds in types.items()}


def _unescape_octal(field: str) -> str:
    """mountinfo writes a space, tab, newline and backslash in a path as \\040, \\011, \\012 and \\134."""
    for escaped, character in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(escaped, character)
    return field


def collect_mounts(root: Path) -> dict[str, str]:
    try:
        return parse_mountinfo((root / "proc/self/mountinfo").read_text(errors="replace"))
    except OSError:
        return {}


SYSCTLS = ("net.ipv4.ip_forward", "net.bridge.bridge-nf-call-iptables", "net.ipv4.conf.all.route_localnet")


def collect_sysctls(root: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for name in SYSCTLS:
        try:
            values[name] = (root / "proc/sys" / name.replace(".", "/")).read_text().strip()
        except OSError:
            continue  # br_netfilter not loaded: no bridge sysctls
    return values


def restore_sysctls(root: Path, before: Snapshot) -> list[str]:
    """Write back each recorded sysctl whose value changed, one line each. Lanes running at once share these
    (netavark and the real node's CNI bridge both turn on ip_forward), so no lane can put one back without
    breaking another's networking: only the end of `make test` can."""
    restored: list[str] = []
    now = collect_sysctls(root)
    for name, value in sorted(before.get("sysctls", {}).items()):
        if name in now and now[name] != value:
            (root / "proc/sys" / name.replace(".", "/")).write_text(value + "\n")
            restored.append(f"host state: {name} put back to {value} (the lanes left {now[name]})")
    return restored


SHARED_DIRECTORIES = (PurePosixPath("/run/containerd"),)
"""Fixed paths that tools in more than one lane make: every containerd shim puts its socket under
``/run/containerd/s``, whatever its containerd's settings, docker's (the containers tier) and the real nodes'
(the e2e tier) alike. A real node's stop removes it only if it was missing at the node's start, and docker's
shims may have made it in another lane by then; it is empty once every shim has exited."""


def remove_shared_directories(root: Path, before: Snapshot) -> list[str]:
    """Remove each shared directory the snapshot did not have and that holds no file now (only empty
    directories), one line each: like the sysctls, only the end of `make test` can. One still holding a file
    stays, for the comparison to list."""
    removed: list[str] = []
    for directory in SHARED_DIRECTORIES:
        path = _host_path(root, directory)
        if str(directory) in before.get("paths", {}) or not path.is_dir() or path.is_symlink():
            continue
        if any(files for _, _, files in os.walk(path)):
            continue
        shutil.rmtree(path)  # directories only, as just checked
        removed.append(f"host state: {directory} removed (the lanes' shims left it empty)")
    return removed


def take_snapshot(root: Path, home: PurePosixPath, own_pid: int, since: int | None = None) -> Snapshot:
    return {
        "paths": collect_paths(root, home),
        "processes": collect_processes(root, own_pid, since),
        "interfaces": collect_interfaces(root),
        "routes": collect_routes(root),
        "firewall": collect_firewall(),
        "netns": collect_netns(root),
        "mounts": collect_mounts(root),
        "sysctls": collect_sysctls(root),
    }


# ------------------------------------------------------------------------------------------------- compare


@dataclass(frozen=True)
class Finding:
    kind: str
    item: str
    before: str | None  # None: not there before
    after: str

    def line(self) -> str:
        if self.before is not None:
            text = f"{self.item}: {self.before} -> {self.after}"
        elif self.kind == "processes" and self.after not in ("", "1"):
            text = f"{self.item}  ({self.after} processes)"
        else:
            text = self.item
        # One line each: a newline in a command line, a name that is not UTF-8, written as Python escapes.
        text = "  " + "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)
        if len(text) <= MAX_COLUMNS:
            return text
        # Cut in the middle: a command's start names it, a path's end (.../merged, .../serviceaccount) too.
        kept_end = MAX_COLUMNS // 3
        return text[: MAX_COLUMNS - kept_end - 3] + "..." + text[-kept_end:]


def diff(before: Snapshot, after: Snapshot) -> list[Finding]:
    findings: list[Finding] = []
    for kind in KINDS:
        was = before.get(kind.name, {})
        for item, value in sorted(after.get(kind.name, {}).items()):
            if item not in was:
                findings.append(Finding(kind.name, item, None, value))
            elif kind.reports_changes and was[item] != value:
                findings.append(Finding(kind.name, item, was[item], value))
    return findings


def is_allowed(finding: Finding, allowed: Sequence[Allowed], packaged: frozenset[str]) -> bool:
    if finding.kind == "paths":
        path = PurePosixPath(finding.item)
        return finding.item in packaged or any(place.covers(path) for place in allowed)
    if finding.kind == "mounts":
        return finding.item in ALLOWED_MOUNTS
    return False


def report(findings: Sequence[Finding], checked: int, seconds: float) -> list[str]:
    if not findings:
        summary = f"{checked} things, {seconds:.1f} s"
        return [f"host state: nothing left outside the checkout and its caches ({summary})"]
    things = f"{len(findings)} thing{'s' if len(findings) != 1 else ''}"
    lines = [f"host state: {things} left outside the checkout and its caches ({seconds:.1f} s):"]
    for kind in KINDS:
        of_kind = [finding for finding in findings if finding.kind == kind.name]
        if of_kind:
            lines.append(f"{kind.name}:")
            lines.extend(finding.line() for finding in of_kind)
    lines.append("what may stay: allowed_places and ALLOWED_MOUNTS in tools/ci/host_state.py")
    return lines


# ----------------------------------------------------------------------------------------------------- CLI


def _read_snapshot(file: Path) -> tuple[Snapshot, int | None]:
    """The snapshot, and when it was taken (clock ticks after boot; None in one written without it)."""
    document = json.loads(file.read_text())
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"{file}: not a host_state.py snapshot of format {FORMAT}")
    kinds = document["kinds"]
    if not isinstance(kinds, dict):
        raise ValueError(f"{file}: no kinds")
    taken = document.get("taken")
    snapshot = {
        str(kind): {str(item): str(value) for item, value in items.items()} for kind, items in kinds.items()
    }
    return snapshot, taken if isinstance(taken, int) else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("action", choices=("snapshot", "restore-shared", "compare"))
    parser.add_argument("file", type=Path)
    parser.add_argument(
        "--checkout",
        type=Path,
        default=Path(__file__).resolve().parents[2],
        help="default: this file's checkout",
    )
    arguments = parser.parse_args(argv)
    root = Path("/")
    home = PurePosixPath(Path("~").expanduser())
    started = time.monotonic()
    if arguments.action == "snapshot":
        snapshot = take_snapshot(root, home, os.getpid())
        arguments.file.parent.mkdir(parents=True, exist_ok=True)
        document = {"format": FORMAT, "taken": boot_ticks(root), "kinds": snapshot}
        arguments.file.write_text(json.dumps(document, indent=1, sort_keys=True))
        return 0
    try:
        before, taken = _read_snapshot(arguments.file)
    except (OSError, ValueError, KeyError, AttributeError) as error:
        print(f"host state: cannot compare: {error}", file=sys.stderr)
        return 2
    if arguments.action == "restore-shared":
        print("\n".join([*restore_sysctls(root, before), *remove_shared_directories(root, before)]))
        return 0
    now = take_snapshot(root, home, os.getpid(), since=taken)
    user = pwd.getpwuid(os.getuid()).pw_name
    allowed = allowed_places(PurePosixPath(arguments.checkout.resolve()), home, user)
    packaged = package_files(root)
    findings = [finding for finding in diff(before, now) if not is_allowed(finding, allowed, packaged)]
    checked = sum(len(items) for items in now.values())
    print("\n".join(report(findings, checked, time.monotonic() - started)))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
