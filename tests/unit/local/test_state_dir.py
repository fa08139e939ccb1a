"""The state directory: where runs are kept, and how a dead runner is told from a live one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psutil

from kubetrain.local.state import ReplicaRecord, RunDirectory, RunRecord, default_state_dir, list_runs


def record(
    pid: int,
    started_at: float,
    *,
    finished: bool = False,
    interrupted: bool = False,
    conditions: list[dict[str, str]] | None = None,
) -> RunRecord:
    replica = ReplicaRecord("worker-0", "Worker", 0, None, "Running", 2, None, [], "w.log")
    return RunRecord(
        job={"kind": "PyTorchJob", "metadata": {"name": "ddp"}, "status": {"conditions": conditions or []}},
        replicas=[replica],
        runner_pid=pid,
        runner_started_at=started_at,
        finished=finished,
        interrupted=interrupted,
    )


def live(**options: Any) -> RunRecord:
    return record(os.getpid(), psutil.Process().create_time(), **options)


def condition_types(job: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["type"], c.get("reason", "")) for c in job["status"]["conditions"]]


def test_the_default_state_dir_is_under_the_users_state_home() -> None:
    assert default_state_dir({}) == Path.home() / ".local/state/kubetrain/runs"


def test_kubetrain_state_dir_overrides_the_default() -> None:
    assert default_state_dir({"KUBETRAIN_STATE_DIR": "/tmp/runs"}) == Path("/tmp/runs")


def test_xdg_state_home_moves_the_default() -> None:
    assert default_state_dir({"XDG_STATE_HOME": "/xdg"}) == Path("/xdg/kubetrain/runs")


def test_a_written_record_reads_back_the_same(tmp_path: Path) -> None:
    directory = RunDirectory(tmp_path, "ddp")
    written = record(os.getpid(), psutil.Process().create_time())
    directory.write(written)
    assert directory.read() == written
    assert [r.name for r in list_runs(tmp_path)] == ["ddp"]


def test_an_unfinished_run_whose_runner_is_alive_is_not_stale() -> None:
    assert not record(os.getpid(), psutil.Process().create_time()).stale


def test_an_unfinished_run_whose_runner_pid_was_reused_is_stale() -> None:
    assert record(os.getpid(), psutil.Process().create_time() - 3600).stale


def test_a_finished_run_is_never_stale() -> None:
    assert not record(os.getpid(), 0.0, finished=True).stale


def test_resetting_a_run_directory_forgets_the_previous_logs(tmp_path: Path) -> None:
    directory = RunDirectory(tmp_path, "ddp")
    directory.reset()
    directory.log_path("worker-0").write_text("old run\n")
    directory.reset()
    assert not directory.log_path("worker-0").exists()
    assert directory.logs_dir.is_dir()


def test_a_run_is_created_when_its_runner_started() -> None:
    assert record(os.getpid(), 0.0, finished=True).job_wire()["metadata"]["creationTimestamp"] == (
        "1970-01-01T00:00:00Z"
    )


def test_a_running_run_shows_its_job_as_recorded() -> None:
    running = [{"type": "Running", "status": "True"}]
    assert condition_types(live(conditions=running).job_wire()) == [("Running", "")]


def test_a_run_whose_runner_is_gone_unfinished_shows_failed() -> None:
    gone = record(os.getpid(), psutil.Process().create_time() - 3600)
    assert condition_types(gone.job_wire())[-1] == ("Failed", "LocalRunnerGone")


def test_an_interrupted_run_shows_failed() -> None:
    interrupted = live(finished=True, interrupted=True)
    assert condition_types(interrupted.job_wire())[-1] == ("Failed", "LocalRunInterrupted")


def test_an_interrupted_run_that_had_finished_keeps_its_result() -> None:
    succeeded = [{"type": "Succeeded", "status": "True"}]
    done = live(finished=True, interrupted=True, conditions=succeeded)
    assert condition_types(done.job_wire()) == [("Succeeded", "")]


def test_a_runs_restarts_add_every_replicas() -> None:
    assert live().restarts == 2


def test_the_progress_history_is_kept_in_the_record_and_a_record_without_one_reads_as_empty(
    tmp_path: Path,
) -> None:
    directory = RunDirectory(tmp_path, "ddp")
    history = {"interval": 0.0, "points": [{"t": 1.5, "m": {"loss": 0.5}, "p": 10}]}
    written = record(os.getpid(), psutil.Process().create_time())
    written.progress_history = history
    directory.write(written)
    assert directory.read() == written
    data = written.to_json()
    del data["progress_history"]
    assert RunRecord.from_json(data).progress_history == {}
    data["progress_history"] = ["not", "a", "history"]
    assert RunRecord.from_json(data).progress_history == {}


def test_a_run_whose_runner_died_shows_no_replica_running_once_reaped_and_says_what_was_stopped() -> None:
    reaped = record(4242, 0.0).with_runner_gone("3 of its processes")
    assert [(r.phase, r.pid) for r in reaped.replicas] == [("Failed", None)]
    assert [(e["type"], e["reason"], e["message"]) for e in reaped.events] == [
        (
            "Warning",
            "LocalRunnerGone",
            "the local runner (pid 4242) died before the job finished; stopped 3 of its processes",
        )
    ]
    assert reaped.stale, "still the record of a run nobody finished"


def test_a_reaped_runs_stopped_replicas_count_as_failed_not_active() -> None:
    running = record(4242, 0.0)
    running.job["status"]["replicaStatuses"] = {"Worker": {"active": 2, "failed": 1}}
    reaped = running.with_runner_gone("2 of its processes")
    assert reaped.job["status"]["replicaStatuses"] == {"Worker": {"active": 0, "failed": 3}}
