"""The first failure, kept: which replica failed first and how, from observed replicas, bounded per job."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from builders import defaulted
from kubetrain.api.common import ConditionStatus, ConditionType, JobCondition, JobStatus
from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.failures import (
    FIRST_FAILURE,
    MAX_LINE_BYTES,
    MAX_LINES,
    MAX_REPLICAS,
    FailureRecord,
    ReplicaFailure,
    first_failure_event,
    kept_lines,
    lines_wanted,
    observed_failures,
    record_failures,
    with_lines,
)
from kubetrain.engine.types import EventType, ObservedContainer, ObservedReplica, Phase
from kubetrain.frameworks.registry import framework_for

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def pytorch(workers: int = 2) -> TrainingJob:
    return defaulted("PyTorchJob", {"Master": 1, "Worker": workers}, name="try-this")


def finished(job: TrainingJob) -> TrainingJob:
    failed = JobCondition(type=ConditionType.FAILED, status=ConditionStatus.TRUE, reason="Failed")
    return job.with_status(JobStatus(conditions=[failed]))


def ended(
    exit_code: int = 1, *, seconds: int = 0, restarts: int = 0, again: bool = False, **fields: Any
) -> ObservedContainer:
    """The main container, its run ended ``seconds`` after ``NOW`` with ``exit_code``; ``again``: the kubelet
    restarted it and it waits in its back-off (its restart count is one more)."""
    return ObservedContainer(
        "pytorch",
        last_exit_code=exit_code,
        last_reason=fields.pop("reason", "Error" if exit_code else "Completed"),
        last_finished_at=NOW + timedelta(seconds=seconds),
        restart_count=restarts + 1 if again else restarts,
        waiting_reason="CrashLoopBackOff" if again else None,
        **fields,
    )


def replica(replica_type: str, index: int, *containers: ObservedContainer, **fields: Any) -> ObservedReplica:
    phase = fields.pop("phase", Phase.RUNNING)
    return ObservedReplica(replica_type, index, phase, containers=containers, **fields)


def record(
    job: TrainingJob, *replicas: ObservedReplica, recorded: FailureRecord | None = None
) -> FailureRecord:
    result = record_failures(job, framework_for(job), replicas, recorded, NOW + timedelta(minutes=5))
    assert result is not None
    return result


def test_nothing_is_recorded_while_no_replica_failed() -> None:
    job = pytorch()
    running = replica("Master", 0, ObservedContainer("pytorch", running_since=NOW))

    assert record_failures(job, framework_for(job), [running], None, NOW) is None


def test_the_replica_whose_container_ended_first_is_the_first_failure_whatever_the_order_seen() -> None:
    job = pytorch()
    worker = replica("Worker", 1, ended(137, seconds=1, reason="Error"), phase=Phase.FAILED, node="node-b")
    master = replica(
        "Master", 0, ended(1, seconds=0, last_lines="loss is nan\n"), phase=Phase.FAILED, node="node-a"
    )

    kept = record(job, worker, master)

    assert kept.first == ReplicaFailure(
        "Master",
        0,
        "try-this-master-0",
        NOW,
        container="pytorch",
        exit_code=1,
        reason="Error",
        node="node-a",
        lines="loss is nan",
    )
    assert [f.replica for f in kept.latest] == ["master-0", "worker-1"]


def test_replicas_that_ended_at_the_same_second_are_ordered_as_the_spec_lists_their_types() -> None:
    job = pytorch()
    worker = replica("Worker", 0, ended(1), phase=Phase.FAILED)
    master = replica("Master", 0, ended(1), phase=Phase.FAILED)

    assert record(job, worker, master).first.replica == "master-0"


def test_an_oom_killed_container_is_a_failure_with_its_reason() -> None:
    job = pytorch()
    oom = replica("Worker", 0, ended(137, reason="OOMKilled", again=True))

    first = record(job, oom).first

    assert (first.exit_code, first.reason) == (137, "OOMKilled")


def test_a_pod_that_failed_without_a_container_ending_is_a_failure_with_the_pods_reason() -> None:
    job = pytorch()
    evicted = replica(
        "Worker", 0, phase=Phase.FAILED, reason="Evicted", message="The node was low on memory."
    )

    first = record(job, evicted).first

    assert (first.container, first.reason, first.message) == (None, "Evicted", "The node was low on memory.")
    assert first.at == NOW + timedelta(minutes=5)  # when it was seen: the pod says no time


def test_a_succeeded_or_running_replica_is_no_failure() -> None:
    job = pytorch()
    done = replica("Master", 0, ended(0), phase=Phase.SUCCEEDED)
    healthy = replica("Worker", 0, ObservedContainer("pytorch", running_since=NOW))

    assert observed_failures(job, framework_for(job), [done, healthy], NOW) == []


def test_a_replica_being_deleted_is_no_failure() -> None:
    # Its container ends because the job (cleanPodPolicy) or the engine (a restart) stops it.
    job = pytorch()
    stopped = replica("Worker", 0, ended(143), phase=Phase.FAILED, terminating=True)

    assert observed_failures(job, framework_for(job), [stopped], NOW) == []


def test_the_same_failure_seen_again_leaves_the_record_as_it_is() -> None:
    job = pytorch()
    master = replica("Master", 0, ended(1, again=True))
    kept = record(job, master)

    assert record(job, master, recorded=kept) is kept


def test_the_first_failure_stays_when_its_replica_fails_again_and_its_latest_failure_is_kept_beside_it() -> (
    None
):
    job = pytorch()
    kept = record(job, replica("Master", 0, ended(1, last_lines="first run\n", again=True)))

    again = record(job, replica("Master", 0, ended(2, seconds=30, restarts=1, again=True)), recorded=kept)

    assert again.first == kept.first
    assert [(f.replica, f.exit_code, f.restart_count) for f in again.latest] == [("master-0", 2, 1)]


def test_a_later_failure_of_another_replica_is_added_and_the_first_is_unchanged() -> None:
    job = pytorch()
    kept = record(job, replica("Master", 0, ended(1, again=True)))

    later = record(job, replica("Worker", 1, ended(1, seconds=20, again=True)), recorded=kept)

    assert later.first == kept.first
    assert [f.replica for f in later.latest] == ["master-0", "worker-1"]


def test_at_most_max_replicas_are_kept_and_the_others_counted() -> None:
    job = pytorch(workers=MAX_REPLICAS + 3)
    workers = [replica("Worker", i, ended(1, seconds=i), phase=Phase.FAILED) for i in range(MAX_REPLICAS + 3)]

    kept = record(job, *workers)

    assert [f.index for f in kept.latest] == list(range(MAX_REPLICAS))
    assert kept.others == 3


def test_a_replica_failing_after_the_job_finished_is_not_added() -> None:
    job = pytorch()
    kept = record(job, replica("Master", 0, ended(1), phase=Phase.FAILED))

    after = record(
        finished(job),
        replica("Master", 0, ended(1), phase=Phase.FAILED),
        replica("Worker", 0, ended(1, seconds=9), phase=Phase.FAILED),
        recorded=kept,
    )

    assert after is kept


def test_lines_seen_later_for_a_kept_failure_fill_it_in_even_after_the_job_finished() -> None:
    job = pytorch()
    kept = record(job, replica("Master", 0, ended(1), phase=Phase.FAILED))

    filled = record(
        finished(job),
        replica("Master", 0, ended(1, last_lines="Traceback\n"), phase=Phase.FAILED),
        recorded=kept,
    )

    assert filled.first.lines == filled.latest[0].lines == "Traceback"


def test_the_termination_message_stands_for_the_last_lines_when_no_log_was_read() -> None:
    job = pytorch()
    master = replica("Master", 0, ended(1, last_message="CUDA error: out of memory\n"), phase=Phase.FAILED)

    assert record(job, master).first.lines == "CUDA error: out of memory"


def test_the_lines_wanted_are_those_of_kept_failures_still_observed_in_that_run() -> None:
    job = pytorch()
    master = replica("Master", 0, ended(1, again=True))
    worker = replica("Worker", 0, ended(1, seconds=3), phase=Phase.FAILED)
    kept = record(job, master, worker)

    wanted = lines_wanted(kept, [master, worker])

    assert [(w.failure.replica, w.previous) for w in wanted] == [("master-0", True), ("worker-0", False)]


def test_no_lines_are_wanted_of_a_pod_that_is_gone_or_failed_again_since() -> None:
    job = pytorch()
    kept = record(job, replica("Master", 0, ended(1, again=True)))
    failed_again = replica("Master", 0, ended(1, seconds=40, restarts=1, again=True))

    assert lines_wanted(kept, []) == []
    assert lines_wanted(kept, [failed_again]) == []


def test_lines_read_by_a_substrate_are_bounded_and_fill_the_first_and_its_latest_alike() -> None:
    job = pytorch()
    kept = record(job, replica("Master", 0, ended(1), phase=Phase.FAILED))
    log = "".join(f"step {i}\n" for i in range(MAX_LINES + 20))

    filled = with_lines(kept, {kept.first: log})

    assert filled.first.lines == filled.latest[0].lines
    assert filled.first.lines is not None
    assert filled.first.lines.splitlines() == [f"step {i}" for i in range(20, MAX_LINES + 20)]


def test_kept_lines_stay_within_the_byte_bound_from_the_end() -> None:
    text = "x" * 3000 + "\n" + "y" * 3000 + "\n"

    assert kept_lines(text) == "y" * 3000
    assert len((kept_lines("z" * 10_000) or "").encode()) < MAX_LINE_BYTES


def test_blank_output_keeps_no_lines() -> None:
    assert kept_lines("\n  \n") is None


def test_the_record_reads_back_from_its_json() -> None:
    job = pytorch()
    kept = record(
        job,
        replica("Master", 0, ended(1, last_lines="a\nb\n"), phase=Phase.FAILED, node="n"),
        replica("Worker", 0, phase=Phase.FAILED, reason="Evicted"),
    )

    assert FailureRecord.from_json(kept.to_json()) == kept


def test_a_record_that_cannot_be_read_is_none() -> None:
    assert FailureRecord.from_json({"first": {"pod": "x"}}) is None
    assert FailureRecord.from_json("not a record") is None


def test_the_event_names_the_replica_pod_node_exit_code_and_last_lines() -> None:
    job = pytorch()
    kept = record(
        job, replica("Master", 0, ended(1, last_lines="epoch 3\nloss is nan\n"), node="real-node-0")
    )

    event = first_failure_event(job, kept)

    assert (event.type, event.reason) == (EventType.WARNING, FIRST_FAILURE)
    assert event.message == (
        "PyTorchJob try-this: replica Master 0 failed first (pod try-this-master-0 on node real-node-0): "
        'container pytorch exited with code 1 (Error); its last lines: "epoch 3 | loss is nan". kubetrain '
        "describe shows it after the pods are gone"
    )
