"""What describe, logs and the Jobs view show of a job's kept failures (``engine.failures``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from builders import job
from kubetrain.dashboard import views
from kubetrain.engine.failures import FailureRecord, ReplicaFailure
from kubetrain.sdk import tables
from kubetrain.sdk.kept_logs import kept_log_lines

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
FAILED_AT = NOW - timedelta(minutes=3)


def master_failure(lines: str | None = "epoch 3\nloss is nan", **fields: object) -> ReplicaFailure:
    defaults: dict[str, object] = {
        "at": FAILED_AT,
        "container": "pytorch",
        "exit_code": 1,
        "reason": "Error",
        "node": "real-node-0",
        "lines": lines,
    }
    return ReplicaFailure("Master", 0, "mnist-master-0", **{**defaults, **fields})  # type: ignore[arg-type]


def worker_failure() -> ReplicaFailure:
    return ReplicaFailure(
        "Worker",
        1,
        "mnist-worker-1",
        FAILED_AT + timedelta(seconds=5),
        container="pytorch",
        exit_code=137,
        reason="OOMKilled",
        node="real-node-1",
        lines="allocating\n",
    )


def only_master() -> FailureRecord:
    return FailureRecord(master_failure(), (master_failure(),))


def test_describe_shows_the_first_failure_at_the_top_with_its_last_lines() -> None:
    text = tables.describe(
        job("PyTorchJob", {"Master": 1}, name="mnist"), [], [], NOW, [], None, only_master()
    )

    assert text.splitlines()[:8] == [
        "First Failure:",
        "  Replica:    Master 0 (pod mnist-master-0 on node real-node-0)",
        "  How:        container pytorch exited with code 1 (Error)",
        "  When:       2026-01-01T11:57:00Z (3m ago)",
        "  Last Lines:",
        "    epoch 3",
        "    loss is nan",
        "Name:          mnist",
    ]


def test_describe_shows_only_the_last_lines_of_a_long_tail_and_says_where_the_rest_is() -> None:
    lines = "\n".join(f"step {i}" for i in range(30))
    record = FailureRecord(master_failure(lines), (master_failure(lines),))

    text = tables.first_failure(record, "mnist", NOW)

    assert text[4] == (
        "  Last Lines: (the last 10 of 30 kept: kubetrain logs mnist --replica master-0 prints them all)"
    )
    assert text[5:] == [f"    step {i}" for i in range(20, 30)]


def test_describe_lists_the_latest_failure_of_each_other_failed_replica_and_those_not_kept() -> None:
    record = FailureRecord(master_failure(), (master_failure(), worker_failure()), others=2)

    text = tables.first_failure(record, "mnist", NOW)

    assert text[-4:] == [
        "Failed Replicas (each one's latest failure):",
        "  REPLICA    NODE          AGE   HOW",
        "  worker-1   real-node-1   2m    container pytorch exited with code 137 (OOMKilled)",
        "  and 2 more replica(s) failed, not kept",
    ]


def test_a_failure_without_lines_says_none_were_kept() -> None:
    record = FailureRecord(master_failure(None), (master_failure(None),))

    assert "  Last Lines: <none kept>" in tables.first_failure(record, "mnist", NOW)


def test_describe_of_a_job_none_of_whose_replicas_failed_has_no_failure_section() -> None:
    assert tables.describe(job("PyTorchJob", {"Master": 1}, name="mnist"), [], [], NOW).startswith("Name:")


def test_logs_of_a_gone_pod_show_a_note_then_its_kept_lines() -> None:
    lines = list(kept_log_lines(only_master(), live=set()))

    assert lines == [
        (
            "master-0",
            "[kubetrain: pod mnist-master-0 is gone; its last 2 line(s) as kept on the job at its first "
            "failure: container pytorch exited with code 1 (Error) at 2026-01-01T11:57:00Z]",
        ),
        ("master-0", "epoch 3"),
        ("master-0", "loss is nan"),
    ]


def test_logs_leave_kept_lines_out_for_a_replica_whose_pod_is_there() -> None:
    record = FailureRecord(master_failure(), (master_failure(), worker_failure()))

    shown = {replica for replica, _ in kept_log_lines(record, live={"master-0"})}

    assert shown == {"worker-1"}


def test_logs_show_a_replicas_first_failure_and_its_latest_when_it_failed_again() -> None:
    again = master_failure("second run", exit_code=2, restart_count=1, at=FAILED_AT + timedelta(minutes=1))
    record = FailureRecord(master_failure(), (again,))

    notes = [line for _, line in kept_log_lines(record, live=set()) if line.startswith("[kubetrain")]

    assert [note.split(":")[1].split(";")[1].strip() for note in notes] == [
        "its last 2 line(s) as kept on the job at its first failure",
        "its last 1 line(s) as kept on the job at its latest failure",
    ]


def test_logs_tail_applies_to_kept_lines() -> None:
    lines = [line for _, line in kept_log_lines(only_master(), live=set(), tail_lines=1)]

    assert lines[1:] == ["loss is nan"]


def test_the_jobs_view_gets_the_first_failure_in_describes_words_and_the_others_apart() -> None:
    record = FailureRecord(master_failure(), (master_failure(), worker_failure()))

    shown = views.failures(record)

    assert shown is not None
    assert shown["first"]["how"] == "container pytorch exited with code 1 (Error)"
    assert shown["first"]["lines"] == "epoch 3\nloss is nan"
    assert [f["replica"] for f in shown["latest"]] == ["worker-1"]
    assert views.failures(None) is None
