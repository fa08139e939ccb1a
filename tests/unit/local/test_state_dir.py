"""The state directory: where runs are kept, and how a dead runner is told from a live one."""

from __future__ import annotations

import os
from pathlib import Path

import psutil

from kubetrain.local.state import ReplicaRecord, RunDirectory, RunRecord, default_state_dir, list_runs


def record(pid: int, started_at: float, *, finished: bool = False) -> RunRecord:
    replica = ReplicaRecord("worker-0", "Worker", 0, None, "Running", 0, None, [], "w.log")
    return RunRecord(
        job={"kind": "PyTorchJob", "metadata": {"name": "ddp"}},
        replicas=[replica],
        runner_pid=pid,
        runner_started_at=started_at,
        finished=finished,
    )


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
