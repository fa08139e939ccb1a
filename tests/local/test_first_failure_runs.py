"""``kubetrain run`` keeps which replica failed first, and how, in the run's record: ``describe --local``
shows it at the top and the SDK returns it, as on a cluster; the first failure is one Warning event."""

from __future__ import annotations

from pathlib import Path

import pytest

from builders import cli_runner
from kubetrain.cli.main import app
from kubetrain.sdk import TrainingClient
from local.local_run import kubetrain_run, python_job, write_manifest

pytestmark = pytest.mark.local

MASTER = (
    "import os, pathlib, sys\n"
    "pathlib.Path(sys.argv[1]).write_text(str(os.getpid()))\n"
    "print('epoch 3', flush=True); print('loss is nan', flush=True); raise SystemExit(1)"
)
WORKER = """
import os, pathlib, sys, time


def master_gone():
    try:
        pid = int(pathlib.Path(sys.argv[1]).read_text())
    except (FileNotFoundError, ValueError):
        return False  # not started yet, or its pid half written
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


while not master_gone():
    time.sleep(0.05)
raise SystemExit(3)
"""
"""Fails only once the master's failed process is gone (the runner has reaped it, so it has seen it fail):
the order holds however slowly a loaded machine starts either."""


def test_the_replica_that_failed_first_is_kept_with_its_exit_code_and_last_lines(
    tmp_path: Path, state_dir: Path
) -> None:
    master_pid = str(tmp_path / "master.pid")
    job = python_job(
        "first-fails",
        {"Master": (1, ["-c", MASTER, master_pid]), "Worker": (1, ["-c", WORKER, master_pid])},
        restart_policy="OnFailure",
        run_policy={"backoffLimit": 1, "cleanPodPolicy": "All"},
    )

    run = kubetrain_run(write_manifest(tmp_path, job), state_dir)
    failures = TrainingClient(backend="local", state_dir=state_dir).get_job_failures("first-fails")
    described = cli_runner().invoke(
        app, ["describe", "pytorchjob", "first-fails", "--local", "--state-dir", str(state_dir)]
    )

    assert run.returncode == 1, run.stderr
    assert failures is not None
    first = failures.first
    assert (first.replica, first.pod, first.container, first.exit_code, first.reason) == (
        "master-0",
        "first-fails-master-0",
        "pytorch",
        1,
        "Error",
    )
    assert first.lines == "epoch 3\nloss is nan"
    assert [e["reason"] for e in run.status_record["events"]].count("FirstFailure") == 1
    assert described.exit_code == 0, described.output
    text = str(described.stdout).splitlines()
    assert text[:3] == [
        "First Failure:",
        "  Replica:    Master 0 (pod first-fails-master-0)",
        "  How:        container pytorch exited with code 1 (Error)",
    ]
    assert text[4:7] == ["  Last Lines:", "    epoch 3", "    loss is nan"]


def test_a_run_where_nothing_failed_keeps_no_failure(tmp_path: Path, state_dir: Path) -> None:
    job = python_job("all-good", {"Master": (1, ["-c", "print('done')"])})

    run = kubetrain_run(write_manifest(tmp_path, job), state_dir)

    assert run.returncode == 0, run.stderr
    assert TrainingClient(backend="local", state_dir=state_dir).get_job_failures("all-good") is None
