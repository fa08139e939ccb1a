"""Processes are recorded by pid and start time; stop ends exactly the recorded process."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kubetrain.envtest import controlplane, processes

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def test_a_spawned_process_is_recorded_and_terminated_by_its_pid_file(tmp_path: Path) -> None:
    record = processes.spawn(tmp_path, "sleeper", SLEEPER)
    assert processes.read_record(tmp_path, "sleeper") == record
    assert record.is_running()

    assert processes.terminate(tmp_path, "sleeper")

    assert not record.is_running()
    assert not processes.pid_file(tmp_path, "sleeper").exists()


def test_a_pid_reused_by_another_process_is_not_signalled(tmp_path: Path) -> None:
    record = processes.spawn(tmp_path, "sleeper", SLEEPER)
    try:
        # The same pid with another start time: the recorded process is gone, the pid belongs to someone else.
        stale = {"pid": record.pid, "create_time": record.create_time - 1000, "log": str(record.log)}
        processes.pid_file(tmp_path, "sleeper").write_text(json.dumps(stale))

        assert not processes.terminate(tmp_path, "sleeper")
        assert record.is_running()
    finally:
        processes.pid_file(tmp_path, "sleeper").write_text(
            json.dumps({"pid": record.pid, "create_time": record.create_time, "log": str(record.log)})
        )
        processes.terminate(tmp_path, "sleeper")


def test_terminating_a_name_that_was_never_started_reports_nothing_running(tmp_path: Path) -> None:
    assert not processes.terminate(tmp_path, "never-started")


def test_terminating_with_no_grace_kills_at_once_even_a_process_ignoring_sigterm(tmp_path: Path) -> None:
    stubborn = [
        sys.executable,
        "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)",
    ]
    record = processes.spawn(tmp_path, "stubborn", stubborn)

    assert processes.terminate(tmp_path, "stubborn", grace_seconds=0)

    assert not record.is_running()


def test_a_terminated_process_can_be_started_again_with_its_recorded_command(tmp_path: Path) -> None:
    first = processes.spawn(tmp_path, "sleeper", SLEEPER)
    processes.terminate(tmp_path, "sleeper")

    second = processes.respawn(tmp_path, "sleeper")
    try:
        assert second.is_running()
        assert second.pid != first.pid
    finally:
        processes.terminate(tmp_path, "sleeper")


def test_a_process_started_without_a_recorded_command_can_still_be_started_again(tmp_path: Path) -> None:
    first = processes.spawn(tmp_path, "sleeper", SLEEPER)
    processes.command_file(tmp_path, "sleeper").unlink()  # as an envtest started by an older kubetrain

    processes.remember_command(tmp_path, "sleeper")
    processes.terminate(tmp_path, "sleeper")
    second = processes.respawn(tmp_path, "sleeper")
    try:
        assert second.is_running()
        assert second.pid != first.pid
    finally:
        processes.terminate(tmp_path, "sleeper")


def test_a_relative_run_directory_from_the_environment_is_taken_from_where_the_tests_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The processes started there run with it as their directory, where a relative path means something else.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(controlplane.RUN_DIR_ENV, ".state/envtest-mine")
    assert controlplane.default_run_dir() == tmp_path / ".state" / "envtest-mine"
