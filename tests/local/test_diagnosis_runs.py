"""``kubetrain run`` diagnoses what can go wrong on one machine: a replica in a crash loop (its exit code and
last lines) and a job silent past its progress deadline. Each finding is a Warning once, kept in the run's
status.json, and shown first by ``kubetrain describe --local``."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from builders import cli_runner
from kubetrain.cli.main import app
from local.local_run import (
    KUBETRAIN,
    REPO,
    SCRIPTS,
    kubetrain_run,
    python_job,
    wait_for_findings,
    write_manifest,
)
from waiting import PATIENCE

pytestmark = pytest.mark.local

CRASH = "print('loading data', flush=True); raise SystemExit('bad batch size: 0')"


def describe(state_dir: Path, name: str) -> list[str]:
    result = cli_runner().invoke(
        app, ["describe", "pytorchjob", name, "--local", "--state-dir", str(state_dir)]
    )
    assert result.exit_code == 0, result.output
    return str(result.stdout).splitlines()


def test_a_crash_looping_replica_is_one_warning_with_its_exit_code_and_last_lines(
    tmp_path: Path, state_dir: Path
) -> None:
    job = python_job(
        "crash-loop",
        {"Master": (1, ["-c", CRASH])},
        restart_policy="OnFailure",
        run_policy={"backoffLimit": 4},
    )

    run = kubetrain_run(write_manifest(tmp_path, job), state_dir)

    expected = (
        "pod crash-loop-master-0 is in a crash loop: container pytorch exited with code 1 (Error) and is "
        'restarted again and again; its last lines: "loading data | bad batch size: 0". Fix: correct what '
        "its output shows (its log holds the whole run); runPolicy.backoffLimit bounds the restarts"
    )
    assert run.returncode == 1, run.stderr
    assert run.stderr.count("Warning CrashLoop: ") == 1, run.stderr
    assert f"Warning CrashLoop: {expected}" in run.stderr
    assert [
        (e["type"], e["reason"], e["message"], e["count"])
        for e in run.status_record["events"]
        if e["reason"] == "CrashLoop"
    ] == [("Warning", "CrashLoop", expected, 1)]
    # The run failed on its backoffLimit; what it showed as it ended stays its diagnosis.
    assert describe(state_dir, "crash-loop")[:2] == ["Diagnosis:", f"  CrashLoop: {expected}"]


def test_a_job_silent_past_its_progress_deadline_is_diagnosed_as_stalled_and_said_once(
    tmp_path: Path, state_dir: Path
) -> None:
    # One real report through the run's status endpoint, then the replica hangs.
    argv = [str(SCRIPTS / "report_stdlib.py"), "--reports", "40:100:0.5", "--hang"]
    job = python_job("quiet", {"Master": (1, argv)})
    job["metadata"]["annotations"] = {"kubetrain.dev/progress-deadline-seconds": "3"}
    runner = subprocess.Popen(
        [
            KUBETRAIN,
            "run",
            str(write_manifest(tmp_path, job)),
            "--state-dir",
            str(state_dir),
            "--grace-period",
            "5",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        findings = wait_for_findings(state_dir / "quiet" / "status.json")
        text = describe(state_dir, "quiet")
    finally:
        runner.send_signal(signal.SIGTERM)
        _, stderr = runner.communicate(timeout=PATIENCE)

    [finding] = findings
    assert finding["reason"] == "ProgressDeadlineExceeded"
    assert finding["replicas"] == ["quiet-master-0"]
    assert finding["message"].startswith("PyTorchJob quiet has had no progress report since ")
    assert "(40%, loss=0.5" in finding["message"]
    assert text[:2] == ["Diagnosis:", f"  ProgressDeadlineExceeded: {finding['message']}"]
    assert stderr.count("Warning ProgressDeadlineExceeded: ") == 1, stderr
