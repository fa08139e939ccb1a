#!/usr/bin/env python3
"""What the containers tier leaves on the host, undone after it whether it passed or failed.

`leftovers.py record STATE_DIR`, before the tier: the firewall chains, bridges, aardvark-dns processes and
docker run directories there are now. `leftovers.py clean STATE_DIR`, after it: stops the dockerd the tier
started (`docker-setup.sh STATE_DIR/dockerd.pid` writes its pid only when it starts one; a daemon that was
already running is left alone), then removes what the engines made since the record and left behind, and
only that: podman's netavark chains (NETAVARK_*, in the filter and nat tables) and docker's (DOCKER*, where
its daemon.json lets it have any), their jumps from the built-in chains, job-network bridges (podman<N>,
docker's br-<id> and docker0), aardvark-dns (podman's DNS server for job networks), docker's run
directories under /run, and the files the engines write at fixed paths (`ENGINE_FILES`): dockerd's identity
and its containerd's /opt/containerd once no dockerd runs, netavark's run state and podman's /run/netns once
no podman container runs (no conmon, no aardvark-dns), directories only when empty. Chains, bridges,
processes or files that were there before the record are kept: another podman network could be using them.

Standard library only: it runs with the system's python3, as tools/images/build.py does.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

IPTABLES = ("iptables", "ip6tables")
TABLES = ("filter", "nat", "mangle", "raw")
ENGINE_CHAIN = re.compile(r"^(NETAVARK|DOCKER)")
ENGINE_BRIDGE = re.compile(r"^(podman\d+|docker0|br-[0-9a-f]{12})$")
DOCKER_RUN_PATHS = (Path("/run/docker"), Path("/run/docker.sock"), Path("/run/docker.pid"))
DOCKER_FILES = (Path("/etc/docker/key.json"), Path("/opt/containerd"))
"""What dockerd writes at fixed paths: its identity (key.json, at its first start) and its own containerd's
"opt" plugin directory (empty bin/ and lib/; docker gives that containerd no path for it)."""
PODMAN_FILES = (
    Path("/run/containers/networks/aardvark-dns"),
    Path("/run/containers/networks/aardvark.lock"),
    Path("/run/containers/networks/ipam.db"),
    Path("/run/netns"),
)
"""netavark's run state (aardvark-dns's per-network configs and lock, the IP allocations of its networks) and
the directory podman makes its containers' network namespaces in (a mount point of its own)."""
ENGINE_FILES = (*DOCKER_FILES, *PODMAN_FILES)
DOCKERD_PID_FILE = "dockerd.pid"
RECORD_FILE = "before.json"
STOP_TIMEOUT = 60.0


@dataclass(frozen=True)
class Chain:
    command: str  # iptables or ip6tables
    table: str
    name: str

    def key(self) -> str:
        return f"{self.command} {self.table} {self.name}"


def run(command: Sequence[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return subprocess.CompletedProcess(command, 127, "", str(error))


def rules(command: str, table: str) -> str:
    """`iptables -t TABLE -S`: empty where the command, the table or root is missing."""
    listed = run([command, "-t", table, "-S"])
    return listed.stdout if listed.returncode == 0 else ""


def chains_in(listing: str) -> list[str]:
    """The user-defined chains an `iptables -S` listing declares (`-N NAME`)."""
    return [line.split()[1] for line in listing.splitlines() if line.startswith("-N ")]


def jumps_to(listing: str, targets: Iterable[str]) -> list[list[str]]:
    """The rules (as `-A CHAIN ...` arguments) outside `targets` that jump or go to one of them."""
    wanted = set(targets)
    found = []
    for line in listing.splitlines():
        words = shlex.split(line)  # a rule's comment is quoted when it has spaces
        if not words or words[0] != "-A" or words[1] in wanted:
            continue
        if any(words[i] in ("-j", "-g") and words[i + 1] in wanted for i in range(len(words) - 1)):
            found.append(words)
    return found


def removal_commands(command: str, table: str, listing: str, recorded: set[str]) -> list[list[str]]:
    """The commands that remove the engines' chains not in `recorded` from one table: the rules jumping
    to them from other chains first, then the chains' own rules (they may jump to each other), then the
    chains."""
    new = [
        name
        for name in chains_in(listing)
        if ENGINE_CHAIN.match(name) and Chain(command, table, name).key() not in recorded
    ]
    if not new:
        return []
    base = [command, "-t", table]
    removals = [[*base, "-D", *words[1:]] for words in jumps_to(listing, new)]
    removals += [[*base, "-F", name] for name in new]
    removals += [[*base, "-X", name] for name in new]
    return removals


def all_chains() -> list[str]:
    return [Chain(c, t, name).key() for c in IPTABLES for t in TABLES for name in chains_in(rules(c, t))]


def bridges() -> list[str]:
    listed = run(["ip", "-o", "link", "show", "type", "bridge"])
    return [line.split(":")[1].strip().split("@")[0] for line in listed.stdout.splitlines() if ":" in line]


def pids_named(name: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == name:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def record(state: Path) -> None:
    state.mkdir(parents=True, exist_ok=True)
    before = {
        "chains": all_chains(),
        "bridges": bridges(),
        "aardvark_dns": pids_named("aardvark-dns"),
        "docker_run_paths": [str(path) for path in DOCKER_RUN_PATHS if path.exists() or path.is_symlink()],
        "engine_files": [str(path) for path in ENGINE_FILES if path.exists() or path.is_symlink()],
    }
    (state / RECORD_FILE).write_text(json.dumps(before, indent=1) + "\n")


def children(pid: int) -> list[int]:
    try:
        listed = (Path("/proc") / str(pid) / "task" / str(pid) / "children").read_text()
    except OSError:
        return []
    return [int(child) for child in listed.split()]


def wait_gone(pids: Sequence[int], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while any(Path(f"/proc/{pid}").exists() for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def stop_dockerd(pid_file: Path) -> list[str]:
    """Stop the dockerd whose pid `docker-setup.sh` wrote (its containerd stops with it); a pid that is no
    longer a dockerd (it exited, and the number was reused) is left alone."""
    if not pid_file.exists():
        return []
    pid = int(pid_file.read_text().split()[0])
    said: list[str] = []
    if pid in pids_named("dockerd"):
        helpers = children(pid)  # its containerd, killed too should it outlive a dockerd killed below
        os.kill(pid, signal.SIGTERM)
        if not wait_gone([pid], STOP_TIMEOUT):
            said.append(f"dockerd {pid} ran on {STOP_TIMEOUT:.0f} s after SIGTERM: killed")
            for stubborn in (pid, *helpers):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(stubborn, signal.SIGKILL)
            wait_gone([pid, *helpers], 10)
        said.append(f"stopped dockerd {pid}, which the tier started")
    pid_file.unlink()
    return said


def mounts_under(path: Path) -> list[str]:
    prefix = f"{path}/"
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [point for point in points if point == str(path) or point.startswith(prefix)]


def remove_docker_run_paths(kept: Iterable[str]) -> list[str]:
    """docker's run directory and socket, when made since the record and its daemon is gone; never one with a
    mount still under it (removing that would reach into what is mounted)."""
    said: list[str] = []
    if pids_named("dockerd"):
        return said
    for path in DOCKER_RUN_PATHS:
        if str(path) in kept or not (path.exists() or path.is_symlink()):
            continue
        if mounts_under(path):
            said.append(f"kept {path}: mounts remain under it")
        elif path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
            said.append(f"removed {path}")
        else:
            path.unlink()
            said.append(f"removed {path}")
    return said


def remove_empty_tree(directory: Path) -> bool:
    """Remove `directory` and its subdirectories, deepest first, each only when empty (unmounted first when
    it is a mount point of its own: /run/netns); whether it went."""
    for root, subdirectories, _ in os.walk(directory, topdown=False):
        for name in subdirectories:
            with contextlib.suppress(OSError):
                (Path(root) / name).rmdir()
    with contextlib.suppress(OSError):
        if next(directory.iterdir(), None) is None:
            for _ in range(8):  # podman may have mounted it more than once, one over the other
                if (
                    str(directory) not in mounts_under(directory)
                    or run(["umount", str(directory)]).returncode
                ):
                    break
    try:
        directory.rmdir()
    except OSError:
        return False
    return True


def remove_new_files(paths: Iterable[Path], kept: Iterable[str]) -> list[str]:
    """Each of `paths` made since the record (not in `kept`): a file removed, a directory only when its tree
    holds no file (one that does is still in use)."""
    said: list[str] = []
    recorded = set(kept)
    for path in paths:
        if str(path) in recorded or not (path.exists() or path.is_symlink()):
            continue
        if path.is_dir() and not path.is_symlink():
            said.append(f"removed {path}" if remove_empty_tree(path) else f"kept {path}: not empty")
        else:
            path.unlink()
            said.append(f"removed {path}")
    return said


def remove_engine_files(kept: Iterable[str]) -> list[str]:
    """`ENGINE_FILES` made since the record, each engine's once nothing of it runs: a file of a running
    engine is its state."""
    kept = list(kept)
    said: list[str] = []
    if not pids_named("dockerd"):
        said += remove_new_files(DOCKER_FILES, kept)
    if not pids_named("conmon") and not pids_named("aardvark-dns"):
        said += remove_new_files(PODMAN_FILES, kept)
    return said


def clean(state: Path) -> list[str]:
    said = stop_dockerd(state / DOCKERD_PID_FILE)
    recorded_file = state / RECORD_FILE
    if not recorded_file.exists():
        return [*said, f"no {recorded_file}: nothing else is known to be the tier's"]
    before = json.loads(recorded_file.read_text())
    stopped = sorted(set(pids_named("aardvark-dns")) - set(before["aardvark_dns"]))
    for pid in stopped:
        os.kill(pid, signal.SIGTERM)
        said.append(f"stopped aardvark-dns {pid}")
    wait_gone(stopped, 10)  # netavark's run state is removed below only once no aardvark-dns runs
    recorded = set(before["chains"])
    for command in IPTABLES:
        for table in TABLES:
            for removal in removal_commands(command, table, rules(command, table), recorded):
                done = run(removal)
                if done.returncode != 0:
                    said.append(f"{' '.join(removal)} failed: {done.stderr.strip()}")
                elif removal[3] == "-X":
                    said.append(f"removed chain {removal[4]} ({command}, {table})")
    for bridge in bridges():
        if ENGINE_BRIDGE.match(bridge) and bridge not in before["bridges"]:
            deleted = run(["ip", "link", "delete", bridge])
            said.append(f"removed bridge {bridge}" if deleted.returncode == 0 else deleted.stderr.strip())
    said += remove_docker_run_paths(before["docker_run_paths"])
    # A record from before ENGINE_FILES were known keeps them all: nothing says they are the tier's.
    said += remove_engine_files(before.get("engine_files", [str(path) for path in ENGINE_FILES]))
    recorded_file.unlink()
    return said


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("record", "clean"))
    parser.add_argument("state", type=Path, help="the tier's state directory")
    arguments = parser.parse_args(argv)
    if arguments.action == "record":
        record(arguments.state)
    else:
        for line in clean(arguments.state):
            print(f"containers tier clean-up: {line}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
