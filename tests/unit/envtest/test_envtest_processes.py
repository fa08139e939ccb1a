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


def test_a_relative_envtest_directory_is_made_absolute_for_the_controllers_started_in_their_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(controlplane.RUN_DIR_ENV, ".state/envtest-peers")
    assert controlplane.default_run_dir() == tmp_path / ".state" / "envtest-peers"


def test_an_exited_components_log_tail_starts_with_the_panic_that_a_long_stack_trace_pushed_out(
    tmp_path: Path,
) -> None:
    log = tmp_path / "etcd.log"
    trace = [f"\tgo.etcd.io/etcd/server/v3/frame{index}.go:{index}" for index in range(60)]
    panic = '{"level":"panic","msg":"failed to create WAL","error":"no space left on device"}'
    log.write_text("\n".join(["starting", panic, "panic: failed to create WAL", *trace]) + "\n")

    tail = controlplane._log_tail(log).splitlines()

    assert tail[:3] == [panic, "panic: failed to create WAL", "..."]
    assert tail[3:] == trace[-controlplane.LOG_TAIL_LINES :]


def test_a_short_log_is_shown_whole_without_repeating_its_fatal_line(tmp_path: Path) -> None:
    log = tmp_path / "kube-apiserver.log"
    lines = ["I1128 12:00:00.000001 starting", "F1128 12:00:01.000002 unable to load server certificate"]
    log.write_text("\n".join(lines) + "\n")

    assert controlplane._log_tail(log) == "\n".join(lines)
