"""What a real node changes on the host beyond what it names itself, recorded before its start and put back
after its stop.

The node's own processes, bridges, rules, cgroups and directories are named in ``realnode`` and removed
there. Its components change a few more things as a side effect: the CNI bridge plugin (``isGateway``) turns
on ``net.ipv4.ip_forward``, the kubelet (``protectKernelDefaults: false``) sets its kernel tunables
(``vm.overcommit_memory``, ``kernel.panic`` ...), libcni caches results under ``/var/lib/cni``, the
containerd shims put their sockets under ``/run/containerd/s`` and the kubelet its device plugin socket under
``/var/lib/kubelet/device-plugins`` (whatever its ``--root-dir``), all fixed paths. ``record`` notes each
sysctl's value and which of those directories are missing; ``restore`` writes back each sysctl that differs
and removes the directories that were missing, only when empty (deepest first): a file left in one belongs to
something still running, which keeps it. The kubelet's own files there (``KUBELET_FILES``), which it leaves
when stopped, go first, once no kubelet runs on the machine. So do the iptables chains every kubelet makes
(``KUBELET_CHAINS``: its canary, the hint of which iptables it uses, the martian-packet firewall) that were
not there before, with the rules that jump to them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import stat
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

PROC_SYS = Path("/proc/sys")
SYSCTLS = (
    "net.ipv4.ip_forward",  # the CNI bridge plugin, for a gateway bridge
    "net.bridge.bridge-nf-call-iptables",
    "vm.overcommit_memory",  # the kubelet's kernel tunables, from here on
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
)
DIRECTORIES = (
    Path("/var/lib/cni"),
    Path("/run/containerd"),
    Path("/run/kubetrain"),
    Path("/var/lib/kubelet"),
)
"""libcni's cache, the shims' socket directory (``/run/containerd/s``), the parent of the nodes' socket
directories (``NodePaths.socket_dir``) and the kubelet's fixed directory (``device-plugins``)."""
KUBELET_FILES = (
    Path("/var/lib/kubelet/device-plugins/kubelet.sock"),
    Path("/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"),
)
"""The device manager's socket and checkpoint, at a constant path of the kubelet's: a stopped kubelet leaves
them, and every kubelet on the machine shares them."""
PROC = Path("/proc")
KUBELET_CHAINS = ("KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT", "KUBE-FIREWALL")
"""The chains a kubelet makes in the filter, nat and mangle tables of both families and leaves at its stop."""
IPTABLES = ("iptables", "ip6tables")


def _saved_rules(command: str) -> str:
    """``<command>-save``'s output; empty where the command is missing or fails."""
    if shutil.which(f"{command}-save") is None:
        return ""
    done = subprocess.run([f"{command}-save"], capture_output=True, text=True, check=False)
    return done.stdout if done.returncode == 0 else ""


def kubelet_chains(saved: str) -> set[str]:
    """The kubelet's chains in an iptables-save output, as ``<table> <chain>``."""
    chains = set()
    table = ""
    for line in saved.splitlines():
        if line.startswith("*"):
            table = line[1:].strip()
        elif line.startswith(":") and line[1:].split()[0] in KUBELET_CHAINS:
            chains.add(f"{table} {line[1:].split()[0]}")
    return chains


def chain_removals(saved: str, kept: set[str]) -> list[list[str]]:
    """The iptables arguments that remove the kubelet's chains in ``saved`` but not in ``kept``: first each
    rule jumping to one (``-D`` for its ``-A``), then each chain flushed and deleted."""
    gone = kubelet_chains(saved) - kept
    jumps: list[list[str]] = []
    table = ""
    for line in saved.splitlines():
        if line.startswith("*"):
            table = line[1:].strip()
        elif line.startswith("-A "):
            words = line.split()
            target = words[words.index("-j") + 1] if "-j" in words[:-1] else ""
            if f"{table} {target}" in gone and f"{table} {words[1]}" not in gone:
                jumps.append(["-t", table, "-D", *words[1:]])
    ends = [
        ["-t", chain.split()[0], flag, chain.split()[1]] for chain in sorted(gone) for flag in ("-F", "-X")
    ]
    return jumps + ends


def _sysctl_file(name: str, proc_sys: Path) -> Path:
    return proc_sys / name.replace(".", "/")


def record(
    path: Path,
    sysctls: Sequence[str] = SYSCTLS,
    directories: Sequence[Path] = DIRECTORIES,
    proc_sys: Path = PROC_SYS,
) -> None:
    """Write the sysctls' values (those this kernel has) and the missing directories to ``path``; an
    existing record is kept, as it holds the values from before the first start."""
    if path.exists():
        return
    values = {}
    for name in sysctls:
        with contextlib.suppress(OSError):
            values[name] = _sysctl_file(name, proc_sys).read_text().strip()
    missing = [str(directory) for directory in directories if not directory.exists()]
    chains = {command: sorted(kubelet_chains(_saved_rules(command))) for command in IPTABLES}
    path.write_text(json.dumps({"sysctls": values, "missing": missing, "chains": chains}, indent=1) + "\n")


def _remove_empty_tree(directory: Path) -> bool:
    """Remove ``directory`` and its subdirectories, deepest first, each only when empty; whether it went."""
    if directory.is_symlink() or not directory.is_dir():
        return False
    for root, subdirectories, _ in os.walk(directory, topdown=False):
        for name in subdirectories:
            with contextlib.suppress(OSError):
                (Path(root) / name).rmdir()
    try:
        directory.rmdir()
    except OSError:
        return False
    return True


SHIM_EXIT_SECONDS = 60.0
"""How long a directory held only by live sockets is waited for: a stopped node's containerd shims remove
theirs as they exit, moments after its containers are killed (a run's /run/containerd/s stayed, emptied only
after the check)."""


def _remove_when_only_sockets_held_it(directory: Path, done: list[str]) -> bool:
    """Remove ``directory`` as ``_remove_empty_tree`` does, first removing the sockets nothing serves; while
    only live sockets keep it, wait for their servers to exit, up to ``SHIM_EXIT_SECONDS``."""
    deadline = time.monotonic() + SHIM_EXIT_SECONDS
    while True:
        done += [f"removed {stale}" for stale in remove_stale_sockets(directory)]
        if _remove_empty_tree(directory):
            return True
        if not _held_only_by_sockets(directory) or time.monotonic() > deadline:
            return False
        time.sleep(0.5)


def _held_only_by_sockets(directory: Path) -> bool:
    try:
        return directory.is_dir() and all(
            stat.S_ISSOCK((Path(root) / name).lstat().st_mode)
            for root, _, files in os.walk(directory)
            for name in files
        )
    except FileNotFoundError:
        return True  # a socket went as it was read: look again


def kubelet_running(proc: Path = PROC) -> bool:
    """Whether any kubelet runs on the machine (another node's shares ``KUBELET_FILES``)."""
    for entry in proc.iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                # A zombie (exited, not yet reaped) holds nothing: only a live kubelet counts.
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if (entry / "comm").read_text().strip() == "kubelet" and state != "Z":
                    return True
    return False


def remove_stale_sockets(directory: Path) -> list[Path]:
    """The Unix sockets under ``directory`` that nothing listens on any more (a killed containerd shim's),
    removed; returns them. A socket something still serves is kept."""
    removed = []
    for root, _, files in os.walk(directory):
        for name in files:
            path = Path(root) / name
            with contextlib.suppress(OSError):
                if not stat.S_ISSOCK(path.lstat().st_mode):
                    continue
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                    try:
                        probe.connect(str(path))
                    except ConnectionRefusedError:
                        path.unlink()
                        removed.append(path)
    return removed


def restore(
    path: Path,
    proc_sys: Path = PROC_SYS,
    kubelet_files: Sequence[Path] = KUBELET_FILES,
    proc: Path = PROC,
) -> list[str]:
    """Put back what ``record`` noted and remove the record; returns what was done. Nothing recorded,
    nothing done. A made directory something still holds stays in the record, which the next ``record``
    keeps, so the next ``restore`` removes it."""
    try:
        recorded = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    done = []
    for name, value in recorded["sysctls"].items():
        file = _sysctl_file(name, proc_sys)
        try:
            if file.read_text().strip() != value:
                file.write_text(f"{value}\n")
                done.append(f"sysctl {name} back to {value}")
        except OSError as error:
            done.append(f"sysctl {name} not restored: {error}")
    created = [Path(missing) for missing in recorded["missing"]]
    stale = [file for file in kubelet_files if any(directory in file.parents for directory in created)]
    if not kubelet_running(proc):
        for file in stale:
            with contextlib.suppress(FileNotFoundError):
                file.unlink()
                done.append(f"removed {file}")
        for command, kept in recorded.get("chains", {}).items():
            for arguments in chain_removals(_saved_rules(command), set(kept)):
                subprocess.run([command, *arguments], capture_output=True, check=False)
                done.append(f"{command} {' '.join(arguments)}")
    left = []
    for missing in recorded["missing"]:
        if _remove_when_only_sockets_held_it(Path(missing), done):
            done.append(f"removed {missing}")
        elif Path(missing).exists():
            left.append(missing)
    if left:
        # Kept for the next node's stop, as its record keeps this one: a directory still held now (a shim
        # outliving its node's stop) is removed once empty, not counted as there before the next start.
        path.write_text(json.dumps({**recorded, "missing": left}, indent=1) + "\n")
        done.append(f"kept for the next stop: {', '.join(left)}")
    else:
        path.unlink()
    return done
