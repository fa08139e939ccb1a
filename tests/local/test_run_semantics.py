"""Restart and failure semantics of ``kubetrain run``: the engine decides, real processes obey."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import psutil
import pytest

from local.local_run import KUBETRAIN, REPO, SCRIPTS, kubetrain_run, python_job, write_manifest
from waiting import PATIENCE, eventually

pytestmark = pytest.mark.local

EXIT_WITH = str(SCRIPTS / "exit_with.py")
SLEEP = str(SCRIPTS / "sleep_forever.py")


def test_a_replica_exiting_1_under_never_fails_the_job_and_stops_the_others(
    tmp_path: Path, state_dir: Path
) -> None:
    job = python_job("never-fails", {"Master": (1, [SLEEP]), "Worker": (1, [EXIT_WITH, "1"])})
    run = kubetrain_run(write_manifest(tmp_path, job), state_dir)
    assert run.returncode == 1, run.stderr
    assert run.condition("Failed") is not None
    assert run.replica("worker-0")["exit_codes"] == [1]
    master = run.replica("master-0")
    assert master["pid"] is None
    assert master["exit_codes"] == [143], "the sleeping master is stopped with SIGTERM"


def test_exit_137_under_exit_code_restarts_the_replica(tmp_path: Path, state_dir: Path) -> None:
    marker = tmp_path / "attempted"
    job = python_job(
        "exitcode-retries", {"Master": (1, [EXIT_WITH, "137", str(marker)])}, restart_policy="ExitCode"
    )
    run = kubetrain_run(write_manifest(tmp_path, job), state_dir)
    assert run.returncode == 0, run.stderr
    assert run.replica("master-0")["exit_codes"] == [137, 0]
    assert run.replica("master-0")["restarts"] == 1
    assert run.lines_of("master-0") == ["exiting 137", "second attempt: exiting 0"]


def test_exit_1_under_exit_code_fails_without_restart(tmp_path: Path, state_dir: Path) -> None:
    job = python_job("exitcode-permanent", {"Master": (1, [EXIT_WITH, "1"])}, restart_policy="ExitCode")
    run = kubetrain_run(write_manifest(tmp_path, job), state_dir)
    assert run.returncode == 1
    assert run.replica("master-0")["exit_codes"] == [1]


def test_on_failure_restarts_in_place_and_counts_the_restart(tmp_path: Path, state_dir: Path) -> None:
    marker = tmp_path / "attempted"
    job = python_job("onfailure", {"Master": (1, [EXIT_WITH, "3", str(marker)])}, restart_policy="OnFailure")
    run = kubetrain_run(write_manifest(tmp_path, job), state_dir)
    assert run.returncode == 0, run.stderr
    assert run.replica("master-0")["restarts"] == 1
    assert run.replica("master-0")["exit_codes"] == [3, 0]


def test_restart_scope_job_stops_every_replica_and_starts_them_again_together(
    tmp_path: Path, state_dir: Path
) -> None:
    marker = tmp_path / "attempted"
    # The master's first run lasts until the job restart stops it, however late a loaded machine starts the
    # worker that fails; its second run succeeds at once.
    master = (
        "import pathlib, sys, time\nran = pathlib.Path(sys.argv[1])\n"
        "if ran.exists(): sys.exit(0)\nran.touch()\ntime.sleep(3600)"
    )
    job = python_job(
        "whole-job",
        {
            "Master": (1, ["-c", master, str(tmp_path / "master-ran")]),
            "Worker": (1, [EXIT_WITH, "3", str(marker)]),
        },
        restart_policy="OnFailure",
        run_policy={"backoffLimit": 2},
    )
    job["metadata"]["annotations"] = {"kubetrain.dev/restart-scope": "Job"}
    run = kubetrain_run(write_manifest(tmp_path, job), state_dir)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    assert run.replica("master-0")["exit_codes"] == [143, 0], (
        "the master was stopped with its peer, then ran again"
    )
    warnings = [e["message"] for e in run.status_record["events"] if e["reason"] == "PyTorchJobRestarting"]
    assert len(warnings) == 1
    assert (
        "because Worker replica 0 (pod whole-job-worker-0) container pytorch exited with code 3"
        in warnings[0]
    )
    restarts = sum(s.get("restarts", 0) for s in run.job_status["replicaStatuses"].values())
    assert restarts == 1, "one job restart, counted once"


def test_backoff_limit_2_stops_the_job_after_2_restarts(tmp_path: Path, state_dir: Path) -> None:
    job = python_job(
        "backoff",
        {"Master": (1, [EXIT_WITH, "1"])},
        restart_policy="OnFailure",
        run_policy={"backoffLimit": 2},
    )
    run = kubetrain_run(write_manifest(tmp_path, job), state_dir)
    assert run.returncode == 1
    failed = run.condition("Failed")
    assert failed is not None
    assert failed["message"] == "Job backoff has failed because it has reached the specified backoff limit"
    assert run.replica("master-0")["restarts"] == 2


def test_active_deadline_seconds_fails_a_sleeping_job_at_its_deadline(
    tmp_path: Path, state_dir: Path
) -> None:
    job = python_job("deadline", {"Master": (1, [SLEEP])}, run_policy={"activeDeadlineSeconds": 3})
    run = kubetrain_run(write_manifest(tmp_path, job), state_dir)
    assert run.returncode == 1
    failed = run.condition("Failed")
    assert failed is not None
    assert failed["message"] == "Job deadline has failed because it was active longer than specified deadline"
    # The job's own clock, not the test's (a loaded machine stretches the run around it): not before the
    # deadline. How soon after it the runner noticed is a speed, and the load's. Both are whole seconds,
    # rounded down.
    active = _rfc3339(failed["lastTransitionTime"]) - _rfc3339(run.job_status["startTime"])
    assert active.total_seconds() >= 3, active


def _rfc3339(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _wait_for(predicate: Callable[[], bool], what: str) -> None:
    eventually(predicate, what)


def _start_sleepers(tmp_path: Path, state_dir: Path, name: str) -> tuple[subprocess.Popen[str], list[int]]:
    """A running job of three sleeping replicas, the master with a child in its group and a grandchild
    that left it (setsid); the runner and the five pids."""
    job = python_job(name, {"Master": (1, [SLEEP, "--spawn"]), "Worker": (2, [SLEEP])})
    manifest = write_manifest(tmp_path, job)
    runner = subprocess.Popen(
        [KUBETRAIN, "run", str(manifest), "--state-dir", str(state_dir), "--grace-period", "5"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    log = state_dir / name / "logs" / "master-0.log"
    status_file = state_dir / name / "status.json"

    def replica_pids() -> list[int]:
        try:
            status = json.loads(status_file.read_text())
        except FileNotFoundError:
            return []  # not written yet: on a loaded machine the master may log before the runner does
        return [r["pid"] for r in status["replicas"] if r["pid"]]

    _wait_for(
        lambda: log.exists() and "spawned" in log.read_text() and len(replica_pids()) == 3,
        "the replicas and their children spawned",
    )
    spawned = [int(p) for p in re.findall(r"spawned (\d+) (\d+)", log.read_text())[0]]
    pids = replica_pids() + spawned
    assert len(pids) == 5
    assert all(psutil.pid_exists(pid) for pid in pids)
    return runner, pids


def _alive(pids: list[int]) -> list[int]:
    return [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]


def test_ctrl_c_stops_every_replica_and_leaves_no_process_behind(tmp_path: Path, state_dir: Path) -> None:
    runner, pids = _start_sleepers(tmp_path, state_dir, "interrupted")

    runner.send_signal(signal.SIGINT)
    _, stderr = runner.communicate(timeout=PATIENCE)

    assert runner.returncode == 130, stderr
    assert _alive(pids) == []
    record = json.loads((state_dir / "interrupted" / "status.json").read_text())
    assert record["interrupted"] is True
    assert all(r["pid"] is None for r in record["replicas"])


def test_a_sigkilled_runner_leaves_no_process_once_its_reaper_runs(tmp_path: Path, state_dir: Path) -> None:
    runner, pids = _start_sleepers(tmp_path, state_dir, "runner-killed")

    runner.send_signal(signal.SIGKILL)
    runner.communicate(timeout=PATIENCE)

    _wait_for(lambda: _alive(pids) == [], "every replica gone")
    status_file = state_dir / "runner-killed" / "status.json"
    _wait_for(lambda: "LocalRunnerGone" in status_file.read_text(), "LocalRunnerGone in the record")
    assert json.loads(status_file.read_text())["grace_period"] == 5, "the reaper gave them --grace-period"
    described = subprocess.run(
        [KUBETRAIN, "describe", "pytorchjob", "runner-killed", "--local", "--state-dir", str(state_dir)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "Running" not in described.partition("Pods:")[2].partition("Conditions:")[0]
    gone = rf"the local runner \(pid {runner.pid}\) died before the job finished; stopped \d+ of its"
    assert re.search(gone, described), described


def test_replica_logs_are_whole_prefixed_lines(tmp_path: Path, state_dir: Path) -> None:
    chatter = str(SCRIPTS / "chatter.py")
    # Worker-only: the job succeeds when every worker has, so no replica is stopped early.
    job = python_job("chatter", {"Worker": (3, [chatter])})
    run = kubetrain_run(write_manifest(tmp_path, job), state_dir)
    assert run.returncode == 0, run.stderr
    pattern = re.compile(r"^worker-[012] \| line=(\d+) x{200} end=\1$")
    body = [line for line in run.stdout.splitlines() if "last line" not in line]
    assert len(body) == 900
    assert all(pattern.match(line) for line in body)
    for replica in ("worker-0", "worker-1", "worker-2"):
        assert run.lines_of(replica)[-1] == "last line without newline"
        file_lines = (state_dir / "chatter" / "logs" / f"{replica}.log").read_text().splitlines()
        assert file_lines == run.lines_of(replica)


def test_get_and_logs_read_the_state_directory(tmp_path: Path, state_dir: Path) -> None:
    marker = tmp_path / "attempted"
    job = python_job("readable", {"Master": (1, [EXIT_WITH, "3", str(marker)])}, restart_policy="OnFailure")
    assert kubetrain_run(write_manifest(tmp_path, job), state_dir).returncode == 0

    def cli(*args: str) -> str:
        return subprocess.run(
            [KUBETRAIN, *args, "--local", "--state-dir", str(state_dir)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    listing = cli("get")
    assert re.search(r"readable\s+PyTorchJob\s+Succeeded\s+.*0/1\s+1\b", listing), listing
    wire = json.loads(cli("get", "pytorchjob", "readable", "-o", "json"))
    assert wire["status"]["conditions"][-1]["type"] == "Succeeded"
    assert cli("logs", "readable", "--replica", "master-0").splitlines() == [
        "exiting 3",
        "second attempt: exiting 0",
    ]
    assert cli("logs", "readable", "-f").splitlines() == [
        "master-0 | exiting 3",
        "master-0 | second attempt: exiting 0",
    ]


def test_logs_follow_streams_a_running_job_until_it_ends(tmp_path: Path, state_dir: Path) -> None:
    job = python_job(
        "followed",
        {
            "Master": (
                1,
                ["-c", "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(1)"],
            )
        },
    )
    runner = subprocess.Popen(
        [KUBETRAIN, "run", str(write_manifest(tmp_path, job)), "--state-dir", str(state_dir)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _wait_for(lambda: (state_dir / "followed" / "status.json").exists(), "the run's record")
    follower = subprocess.run(
        [KUBETRAIN, "logs", "followed", "--local", "-f", "-r", "master-0", "--state-dir", str(state_dir)],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=True,
    )
    assert runner.wait(timeout=PATIENCE) == 0
    assert follower.stdout.splitlines() == ["0", "1", "2"]


def test_an_invalid_manifest_exits_2_naming_the_field(tmp_path: Path, state_dir: Path) -> None:
    job = python_job("invalid", {"Master": (1, [EXIT_WITH, "0"])})
    job["spec"]["pytorchReplicaSpecs"]["Master"]["restartPolicy"] = "Sometimes"
    run = kubetrain_run(write_manifest(tmp_path, job), state_dir)
    assert run.returncode == 2
    assert "spec.pytorchReplicaSpecs.Master.restartPolicy" in run.stderr


def test_a_job_asking_for_more_gpus_than_exist_fails_before_starting(tmp_path: Path, state_dir: Path) -> None:
    job = python_job("greedy", {"Master": (1, [EXIT_WITH, "0"])})
    container = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"nvidia.com/gpu": 64}}
    run = kubetrain_run(write_manifest(tmp_path, job), state_dir)
    assert run.returncode == 1
    assert "asks for 64 GPU(s)" in run.stderr
    assert "containers[0].resources.limits" in run.stderr


def test_sigterm_stops_every_replica_and_exits_143(tmp_path: Path, state_dir: Path) -> None:
    job = python_job("terminated", {"Worker": (2, [SLEEP])})
    runner = subprocess.Popen(
        [KUBETRAIN, "run", str(write_manifest(tmp_path, job)), "--state-dir", str(state_dir)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    status_path = state_dir / "terminated" / "status.json"
    _wait_for(
        lambda: (
            status_path.exists()
            and sum(1 for r in json.loads(status_path.read_text())["replicas"] if r["pid"]) == 2
        ),
        "both workers started",
    )
    pids = [r["pid"] for r in json.loads(status_path.read_text())["replicas"]]

    runner.send_signal(signal.SIGTERM)

    assert runner.wait(timeout=PATIENCE) == 143
    assert [pid for pid in pids if psutil.pid_exists(pid)] == []


def test_a_command_that_cannot_be_executed_fails_its_replica_with_127(
    tmp_path: Path, state_dir: Path
) -> None:
    job = python_job("not-found", {"Master": (1, [EXIT_WITH, "0"])})
    job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"] = [
        "no-such-program-anywhere"
    ]
    run = kubetrain_run(write_manifest(tmp_path, job), state_dir)
    assert run.returncode == 1
    assert run.replica("master-0")["exit_codes"] == [127]
    (message,) = run.lines_of("master-0")
    assert message.startswith("kubetrain: cannot start 'no-such-program-anywhere'")
