"""A local run serves the status endpoint: replicas report with the standard library and the three variables,
and the report shows in ``kubetrain get --local``, the SDK and the run's record; Kubeflow Trainer v2.3's own
status script, unchanged, sets a PyTorchJob's trainerStatus under ``kubetrain run`` and ``kubetrain submit
--local``; a job that goes quiet past its progress deadline is flagged, or restarted when it asks for that."""

from __future__ import annotations

import json
import re
import signal
import stat
import subprocess
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import pytest

from builders import cli_runner
from kubetrain.cli.main import app
from kubetrain.sdk import TrainingClient
from local.local_run import KUBETRAIN, REPO, SCRIPTS, kubetrain_run, python_job, write_manifest
from waiting import PATIENCE, eventually

pytestmark = pytest.mark.local

REPORT = str(SCRIPTS / "report_stdlib.py")
TRAINER_SCRIPT = str(REPO / "tests" / "upstream" / "trainer" / "status_update.py")
"""Kubeflow Trainer v2.3.0's test/e2e/testdata/status_update.py, byte for byte."""
TRAINER_REPORT = {
    "progressPercentage": 42,
    "estimatedRemainingSeconds": 120,
    "metrics": [{"name": "loss", "value": "0.123"}, {"name": "accuracy", "value": "0.95"}],
}
"""What the script reports (its lastUpdatedTime replaced by the time the endpoint received it)."""
DEADLINE = "kubetrain.dev/progress-deadline-seconds"
ACTION = "kubetrain.dev/progress-deadline-action"


def wait_for(predicate: Callable[[], bool], what: str) -> None:
    eventually(predicate, what)


def record(state_dir: Path, name: str) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((state_dir / name / "status.json").read_text())
    except FileNotFoundError:
        return {}
    return data


def trainer_status(state_dir: Path, name: str) -> dict[str, Any]:
    status: dict[str, Any] = record(state_dir, name).get("job", {}).get("status", {}).get("trainerStatus", {})
    return status


def condition(state_dir: Path, name: str, type_: str) -> dict[str, Any] | None:
    conditions = record(state_dir, name).get("job", {}).get("status", {}).get("conditions", [])
    found = [c for c in conditions if c["type"] == type_ and c["status"] == "True"]
    return found[-1] if found else None


def get_local(state_dir: Path) -> list[str]:
    listing = subprocess.run(
        [KUBETRAIN, "get", "--local", "--state-dir", str(state_dir)],
        capture_output=True,
        text=True,
        check=True,
    )
    return listing.stdout.splitlines()


@pytest.fixture
def start_run(state_dir: Path) -> Iterator[Callable[[Path], subprocess.Popen[str]]]:
    runners: list[subprocess.Popen[str]] = []

    def start(manifest: Path) -> subprocess.Popen[str]:
        runner = subprocess.Popen(
            [KUBETRAIN, "run", str(manifest), "--state-dir", str(state_dir), "--grace-period", "2"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        runners.append(runner)
        return runner

    yield start
    for runner in runners:
        if runner.poll() is None:
            runner.send_signal(signal.SIGINT)
            runner.communicate(timeout=PATIENCE)


def test_a_stdlib_report_shows_in_get_local_and_the_sdk_while_running_and_after(
    tmp_path: Path, state_dir: Path, start_run: Callable[[Path], subprocess.Popen[str]]
) -> None:
    go = tmp_path / "go"
    argv = [REPORT, "--reports", "10:300:0.9", "50:120:0.4", "100:0:0.05", "--wait-for", str(go)]
    runner = start_run(write_manifest(tmp_path, python_job("reported", {"Master": (1, argv)})))
    wait_for(lambda: trainer_status(state_dir, "reported").get("progressPercentage") == 50, what="50%")

    [header, row] = get_local(state_dir)
    listed = datetime.now(UTC)
    assert header.split() == ["NAME", "KIND", "STATE", "PROGRESS", "ETA", "REPLICAS", "RESTARTS", "AGE"]
    shown = re.match(r"reported\s+PyTorchJob\s+Running\s+50%\s+(\d+)s\s+Master 1/1\s+0\s+\d+s$", row)
    assert shown is not None, row
    # The ETA counts down from the report's 120 s by the time since the endpoint stamped it, however long
    # a loaded machine took to list it (the stamp is to the second, hence the 1 s).
    stamped = datetime.fromisoformat(trainer_status(state_dir, "reported")["lastUpdatedTime"])
    assert 120 - (listed - stamped).total_seconds() - 1 <= int(shown.group(1)) <= 120
    client = TrainingClient(backend="local", state_dir=state_dir)
    live = client.get_job("reported").status.trainer_status
    assert live is not None
    assert (live.progress_percentage, live.estimated_remaining_seconds) == (50, 120)
    assert [(m.name, m.value) for m in live.metrics or []] == [("loss", "0.4"), ("phase", "train")]

    go.touch()
    stdout, stderr = runner.communicate(timeout=PATIENCE)
    assert runner.returncode == 0, stderr
    assert [line.split(" | ")[1] for line in stdout.splitlines()] == [
        f"report {n}: HTTP 200" for n in (1, 2, 3)
    ]
    [_, row] = get_local(state_dir)
    assert re.match(r"reported\s+PyTorchJob\s+Succeeded\s+100%\s+-\s+Master 0/1\s+0\s+\d+s$", row), row
    history = client.get_job_progress_history("reported")
    assert [p.progress for p in history.points] == [10, 50, 100]
    assert [p.metrics for p in history.points] == [{"loss": 0.9}, {"loss": 0.4}, {"loss": 0.05}]
    assert "last progress report: 100%, 0s left, loss=0.05, phase=train" in stderr


def test_trainer_v2_3s_own_status_script_sets_a_pytorchjobs_trainer_status_under_kubetrain_run(
    tmp_path: Path, state_dir: Path
) -> None:
    job = python_job("trainer-script", {"Master": (1, [TRAINER_SCRIPT]), "Worker": (1, [TRAINER_SCRIPT])})
    run = kubetrain_run(write_manifest(tmp_path, job), state_dir)
    assert run.returncode == 0, run.stderr
    for replica in ("master-0", "worker-0"):
        [said] = run.lines_of(replica)
        assert said.startswith("Success updating trainer status: 200 "), said
    status = run.job_status["trainerStatus"]
    assert {key: status[key] for key in TRAINER_REPORT} == TRAINER_REPORT
    assert datetime.fromisoformat(status["lastUpdatedTime"]) <= datetime.now(UTC)
    assert run.condition("Succeeded") is not None


def test_trainer_v2_3s_own_status_script_sets_a_trainjobs_trainer_status_under_kubetrain_run(
    tmp_path: Path, state_dir: Path
) -> None:
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "trainer-script"},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": 2, "command": ["python", TRAINER_SCRIPT]},
        },
    }
    run = kubetrain_run(write_manifest(tmp_path, trainjob), state_dir)
    assert run.returncode == 0, run.stderr
    for node in ("node-0", "node-1"):
        [said] = run.lines_of(node)
        assert said.startswith("Success updating trainer status: 200 "), said
    status = run.job_status["trainerStatus"]
    assert {key: status[key] for key in TRAINER_REPORT} == TRAINER_REPORT
    assert run.condition("Succeeded") is not None


def test_trainer_v2_3s_own_status_script_sets_a_pytorchjobs_trainer_status_under_submit_local(
    tmp_path: Path, state_dir: Path
) -> None:
    cli = cli_runner()

    def local(*args: str) -> Any:
        return cli.invoke(app, [*args, "--local", "--state-dir", str(state_dir)])

    manifest = write_manifest(tmp_path, python_job("submitted", {"Master": (1, [TRAINER_SCRIPT])}))
    try:
        assert local("submit", str(manifest)).exit_code == 0
        waited = local("wait", "submitted", "--for=condition=Succeeded", f"--timeout={PATIENCE:g}s")
        assert waited.exit_code == 0, waited.output
        status = (
            TrainingClient(backend="local", state_dir=state_dir).get_job("submitted").status.trainer_status
        )
        assert status is not None
        assert (status.progress_percentage, status.estimated_remaining_seconds) == (42, 120)
        assert [(m.name, m.value) for m in status.metrics or []] == [("loss", "0.123"), ("accuracy", "0.95")]
        said = local("logs", "submitted").stdout
        assert said.startswith("master-0 | Success updating trainer status: 200 "), said
    finally:
        local("delete", "submitted")


def test_each_replica_gets_its_own_token_readable_by_it_alone(tmp_path: Path, state_dir: Path) -> None:
    show = "import os; print(os.environ['KUBEFLOW_TRAINER_SERVER_TOKEN'])"
    run = kubetrain_run(
        write_manifest(tmp_path, python_job("tokens", {"Worker": (2, ["-c", show])})), state_dir
    )
    assert run.returncode == 0, run.stderr
    paths = [Path(run.lines_of(f"worker-{i}")[0]) for i in (0, 1)]
    assert paths == [state_dir / "tokens" / "progress" / f"worker-{i}" / "token" for i in (0, 1)]
    assert paths[0].read_text() != paths[1].read_text()
    assert {stat.S_IMODE(p.stat().st_mode) for p in paths} == {0o600}
    assert {stat.S_IMODE(p.parent.stat().st_mode) for p in paths} == {0o700}


def test_a_token_is_refused_for_another_jobs_path_and_an_unknown_token_at_all(
    tmp_path: Path, state_dir: Path
) -> None:
    job = python_job(
        "refusing",
        {
            "Master": (1, [REPORT, "--reports", "40:60:0.5", "--job", "other-job"]),
            "Worker": (1, [REPORT, "--reports", "40:60:0.5", "--token", "guessed"]),
        },
    )
    run = kubetrain_run(write_manifest(tmp_path, job), state_dir)
    assert run.returncode == 0, run.stderr
    path = "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs"
    assert run.lines_of("master-0") == [
        f"report 1: HTTP 403 the token of master-0 may only report for {path}/refusing/status, "
        f"not for {path}/other-job/status"
    ]
    assert run.lines_of("worker-0") == [
        "report 1: HTTP 403 the token is not one this run of default/refusing issued: send the one in the "
        "file KUBEFLOW_TRAINER_SERVER_TOKEN names"
    ]
    assert "trainerStatus" not in run.job_status
    assert record(state_dir, "refusing")["progress_history"] == {"interval": 0.0, "points": []}


def test_a_job_quiet_past_its_deadline_is_flagged_stalled_while_its_replica_runs(
    tmp_path: Path, state_dir: Path, start_run: Callable[[Path], subprocess.Popen[str]]
) -> None:
    job = python_job("quiet", {"Master": (1, [REPORT, "--reports", "30:100:0.7", "--hang"])})
    job["metadata"]["annotations"] = {DEADLINE: "3"}
    start_run(write_manifest(tmp_path, job))
    wait_for(lambda: condition(state_dir, "quiet", "Stalled") is not None, what="Stalled")

    stalled = condition(state_dir, "quiet", "Stalled")
    assert stalled is not None
    reported = datetime.fromisoformat(trainer_status(state_dir, "quiet")["lastUpdatedTime"])
    flagged = datetime.fromisoformat(stalled["lastTransitionTime"])
    assert (flagged - reported).total_seconds() >= 3, "flagged only once its deadline had passed"
    assert stalled["reason"] == "ProgressDeadlineExceeded"
    assert stalled["message"].startswith(
        f"PyTorchJob quiet has had no progress report since {reported:%Y-%m-%dT%H:%M:%SZ} (30%, loss=0.7, "
        "phase=train), longer than its progress deadline of 3s (kubetrain.dev/progress-deadline-seconds); "
        "running without reporting: quiet-master-0"
    )
    master = next(r for r in record(state_dir, "quiet")["replicas"] if r["name"] == "master-0")
    assert psutil.pid_exists(master["pid"]), "Warn leaves the replica running"
    events = record(state_dir, "quiet")["events"]
    said = [(e["type"], e["reason"], e["message"]) for e in events]
    assert ("Warning", "ProgressDeadlineExceeded", stalled["message"]) in said
    [_, row] = get_local(state_dir)
    assert re.match(r"quiet\s+PyTorchJob\s+Stalled\s+30%\s+", row), row


def test_with_action_fail_a_silent_replica_is_restarted_and_the_restart_counted(
    tmp_path: Path, state_dir: Path
) -> None:
    once = tmp_path / "hung-once"
    argv = [REPORT, "--reports", "20:100:0.8", "--hang-once", str(once)]
    job = python_job("restarted", {"Master": (1, argv)}, restart_policy="OnFailure")
    job["metadata"]["annotations"] = {DEADLINE: "3", ACTION: "Fail"}
    # Its first run hangs for ever: only the deadline's restart lets the run end.
    run = kubetrain_run(write_manifest(tmp_path, job), state_dir)
    assert run.returncode == 0, run.stderr
    assert run.replica("master-0")["restarts"] == 1
    assert run.lines_of("master-0") == ["report 1: HTTP 200", "report 1: HTTP 200"]
    [restarting] = [e for e in run.status_record["events"] if e["reason"] == "ProgressDeadlineExceeded"]
    assert restarting["type"] == "Warning"
    assert restarting["message"].endswith("running without reporting: restarted-master-0; restarting them")
    assert run.condition("Succeeded") is not None
