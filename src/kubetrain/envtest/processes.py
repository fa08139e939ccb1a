"""Detached child processes recorded by pid file, so a later ``stop`` (another process) can find and end them.

A pid file holds the pid and the process start time: a pid the kernel has since given to an unrelated process
is recognised as stale and never signalled.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

# Popen objects of children started here; kept so they are not finalised (and warned about) while still
# running.
KILL_WAIT_SECONDS = 5.0
_CHILDREN: list[subprocess.Popen[bytes]] = []


@dataclass(frozen=True)
class ProcessRecord:
    name: str
    pid: int
    create_time: float
    log: Path

    def is_running(self) -> bool:
        try:
            process = psutil.Process(self.pid)
            # create_time is rounded differently by platforms; a second of slack still rules out pid reuse.
            return (
                abs(process.create_time() - self.create_time) < 1.0
                and process.status() != psutil.STATUS_ZOMBIE
            )
        except psutil.Error:
            return False

    def exists(self) -> bool:
        """Alive or a zombie not yet reaped."""
        try:
            return abs(psutil.Process(self.pid).create_time() - self.create_time) < 1.0
        except psutil.Error:
            return False

    def peak_rss_bytes(self) -> int | None:
        """VmHWM: the most resident memory this process has used."""
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None


def pid_file(run_dir: Path, name: str) -> Path:
    return run_dir / "pids" / f"{name}.pid"


def spawn(
    run_dir: Path, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None
) -> ProcessRecord:
    """Start ``argv`` in its own session (it outlives the caller and its terminal), logging to
    ``logs/<name>.log``."""
    log = run_dir / "logs" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as output:
        child = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=dict(env) if env is not None else None,
            cwd=run_dir,
        )
    _CHILDREN.append(child)
    # Kept apart from the pid file, which stop removes, so a stopped component can be started again.
    command = command_file(run_dir, name)
    command.parent.mkdir(parents=True, exist_ok=True)
    command.write_text(json.dumps(list(argv)) + "\n")
    record = ProcessRecord(name, child.pid, psutil.Process(child.pid).create_time(), log)
    path = pid_file(run_dir, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"pid": record.pid, "create_time": record.create_time, "log": str(log)}) + "\n"
    )
    return record


def recorded(run_dir: Path) -> list[str]:
    """The names of every process this run directory has a pid file for."""
    return sorted(path.stem for path in (run_dir / "pids").glob("*.pid"))


def command_file(run_dir: Path, name: str) -> Path:
    return run_dir / "commands" / f"{name}.json"


def remember_command(run_dir: Path, name: str) -> None:
    """Make sure ``respawn`` can start the component again: record the running process's command line if
    it was started by a kubetrain that did not record commands yet."""
    command = command_file(run_dir, name)
    record = read_record(run_dir, name)
    if command.exists() or record is None or not record.is_running():
        return
    argv = _command_line(record.pid)
    if argv:
        command.parent.mkdir(parents=True, exist_ok=True)
        command.write_text(json.dumps(argv) + "\n")


def _command_line(pid: int, timeout: float = 2.0) -> list[str]:
    """The process's command line; empty for a zombie. /proc shows none for a moment after a process is
    started (seen: 1 in 12 reads right after ``spawn``), so an empty one is read again until ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            argv = psutil.Process(pid).cmdline()
        except psutil.Error:
            return []
        if argv or time.monotonic() > deadline:
            return argv
        time.sleep(0.05)


def respawn(run_dir: Path, name: str) -> ProcessRecord:
    """Start a component again with the command line it was last started with (after ``terminate``)."""
    try:
        argv = json.loads(command_file(run_dir, name).read_text())
    except OSError as error:
        raise FileNotFoundError(f"{name} was never started in {run_dir}") from error
    if not argv:
        raise FileNotFoundError(f"{name}'s recorded command line in {run_dir} is empty")
    return spawn(run_dir, name, argv)


def read_record(run_dir: Path, name: str) -> ProcessRecord | None:
    path = pid_file(run_dir, name)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return ProcessRecord(name, int(data["pid"]), float(data["create_time"]), Path(data["log"]))


def terminate(run_dir: Path, name: str, grace_seconds: float = 10.0) -> bool:
    """SIGTERM the recorded process and SIGKILL it after the grace period (at once when that is 0); remove
    its pid file. True if it was alive."""
    record = read_record(run_dir, name)
    if record is None:
        return False
    was_running = record.is_running()
    if was_running:
        if grace_seconds > 0:
            _signal(record.pid, signal.SIGTERM)
        if not _wait_gone(record, grace_seconds):
            _signal(record.pid, signal.SIGKILL)
            _wait_gone(record, KILL_WAIT_SECONDS)
    _reap(record.pid)
    pid_file(run_dir, name).unlink(missing_ok=True)
    return was_running


def _wait_gone(record: ProcessRecord, timeout: float) -> bool:
    """Wait until the process is reaped, not merely a zombie: a multi-threaded process's leader turns zombie
    while its other threads may still hold its sockets open, and a restart on the same port would then
    fail with "address already in use". A zombie nobody reaps (its parent is alive but not ours) is
    accepted once the timeout has passed."""
    deadline = time.monotonic() + timeout
    while True:
        _reap(record.pid)
        if not record.exists():
            return True
        if time.monotonic() >= deadline:
            return not record.is_running()
        time.sleep(0.05)


def _signal(pid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def _reap(pid: int) -> None:
    """Collect the exit status when the process is our own child (started in this Python process)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
