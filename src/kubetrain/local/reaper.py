"""``python -m kubetrain.local.reaper``: remove a container run's leftovers once its runner is gone.

``kubetrain run --runtime podman|docker`` starts this detached, in a session of its own, before the
first container. It polls the runner's pid; when the runner has died without recording a finished
run (SIGKILL, a crash, the machine's OOM killer), it removes every container labelled with the run's
id and the run's network, then exits. A runner that ends by itself stops the reaper first.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

import psutil

from kubetrain.local.container_run import RUN_ID_LABEL

POLL = 0.5


def runner_alive(pid: int, started_at: float) -> bool:
    try:
        return abs(float(psutil.Process(pid).create_time()) - started_at) < 1.0
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def finished(status: Path) -> bool:
    try:
        return bool(json.loads(status.read_text(encoding="utf-8")).get("finished"))
    except (OSError, ValueError):
        return False


def reap(engine: str, run_id: str, network: str) -> None:
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kubetrain.local.reaper")
    parser.add_argument("--engine", required=True)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--network", required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--status", type=Path, required=True)
    options = parser.parse_args(argv)
    try:
        started_at = float(psutil.Process(options.pid).create_time())
    except psutil.NoSuchProcess:
        started_at = 0.0
    while runner_alive(options.pid, started_at):
        time.sleep(POLL)
    if not finished(options.status):
        reap(options.engine, options.run_id, options.network)


if __name__ == "__main__":
    main()
