"""``python -m kubetrain.local.reaper``: stop what a run left once its runner is gone.

Every ``kubetrain run`` starts this detached, in a session of its own, before the first replica. It
polls the runner's pid; when the runner has died without recording a finished run (SIGKILL, a crash,
the machine's OOM killer), it stops every process of the run (``orphans.RUN_ID_ENV``: SIGTERM, the
longest grace period of its replicas, SIGKILL), and for a container run removes every container
labelled with the run's id and the run's network; then it marks the run's record so that no replica
shows as running, and exits. A runner that ends by itself stops the reaper first.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from kubetrain.local import orphans
from kubetrain.local.container_run import RUN_ID_LABEL
from kubetrain.local.state import DEFAULT_GRACE_PERIOD, RunDirectory

POLL = 0.5
PROCESS_ENGINE = "process"
"""``--engine`` for a run of processes on this host: nothing but its processes to stop."""


def start_reaper(engine: str, run_id: str, status: Path, network: str = "") -> subprocess.Popen[bytes]:
    """Start the reaper of this process's run (``engine``: podman, docker or ``PROCESS_ENGINE``)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubetrain.local.reaper",
            "--engine",
            engine,
            "--run-id",
            run_id,
            "--network",
            network,
            "--pid",
            str(os.getpid()),
            "--status",
            str(status),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # Its own session: a Ctrl-C or a hang-up in the terminal reaches kubetrain, not the reaper.
        start_new_session=True,
    )


def stop_reaper(reaper: subprocess.Popen[bytes]) -> None:
    """The run ended by itself: its reaper has nothing to do."""
    reaper.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        reaper.wait(5)


def runner_alive(pid: int, started_at: float) -> bool:
    try:
        return abs(float(psutil.Process(pid).create_time()) - started_at) < 1.0
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def reap_containers(engine: str, run_id: str, network: str) -> int:
    """Remove the run's containers and network; how many containers there were."""
    listed = subprocess.run(
        [engine, "ps", "--all", "--quiet", "--filter", f"label={RUN_ID_LABEL}={run_id}"],
        capture_output=True,
        text=True,
        check=False,
    )
    containers = listed.stdout.split()
    if containers:
        subprocess.run([engine, "rm", "--force", *containers], capture_output=True, check=False)
    subprocess.run([engine, "network", "rm", network], capture_output=True, check=False)
    return len(containers)


def reap(engine: str, run_id: str, network: str, status: Path) -> None:
    directory = RunDirectory(status.parent.parent, status.parent.name)
    record = None
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        record = directory.read()
    if record is not None and record.finished:
        return
    processes = orphans.processes_of_run(run_id)
    orphans.stop_processes(processes, record.grace_period if record is not None else DEFAULT_GRACE_PERIOD)
    stopped = f"{len(processes)} of its processes"
    if engine != PROCESS_ENGINE:
        stopped += f" and removed {reap_containers(engine, run_id, network)} of its containers"
    if record is not None:
        with contextlib.suppress(OSError):
            directory.write(record.with_runner_gone(stopped))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kubetrain.local.reaper")
    parser.add_argument("--engine", required=True, help=f"podman, docker or {PROCESS_ENGINE}")
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--network", default="", help="the run's container network")
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--status", type=Path, required=True)
    options = parser.parse_args(argv)
    try:
        started_at = float(psutil.Process(options.pid).create_time())
    except psutil.NoSuchProcess:
        started_at = 0.0
    while runner_alive(options.pid, started_at):
        time.sleep(POLL)
    reap(options.engine, options.run_id, options.network, options.status)


if __name__ == "__main__":
    main()
