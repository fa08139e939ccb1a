"""Scheduling timeout: a pod still unscheduled (or without its image) N seconds after its creation fails the
job (engine.scheduling_timeout)."""

from __future__ import annotations

from datetime import timedelta

from kubetrain.api.common import ConditionType
from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.fault_policy import SCHEDULING_TIMEOUT_ANNOTATION
from kubetrain.engine.scheduling_timeout import SCHEDULING_TIMEOUT_REASON
from kubetrain.engine.types import (
    DeleteReplica,
    EmitEvent,
    EventType,
    ObservedContainer,
    ObservedReplica,
    Phase,
)

from .fakes import NOW, observe, replica, toy_job
from .support import LOCAL, actions_of, decide

SCHEDULER_SAYS = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available"


def job(timeout: str | None = "300") -> TrainingJob:
    made = toy_job(masters=1, workers=1)
    metadata = made.metadata.model_copy(
        update={"annotations": {SCHEDULING_TIMEOUT_ANNOTATION: timeout} if timeout is not None else None}
    )
    return made.model_copy(update={"metadata": metadata})


def unschedulable(age: float) -> ObservedReplica:
    return replica(
        "Worker", 0, Phase.PENDING, unschedulable=SCHEDULER_SAYS, created_at=NOW - timedelta(seconds=age)
    )


def running_master() -> ObservedReplica:
    return replica("Master", 0, placed=True, created_at=NOW - timedelta(seconds=900))


def test_a_pod_unscheduled_past_the_timeout_fails_the_job() -> None:
    decision = decide(job(), observe(running_master(), unschedulable(300)))
    failed = decision.status.condition(ConditionType.FAILED)
    assert failed is not None and failed.reason == SCHEDULING_TIMEOUT_REASON


def test_the_condition_names_the_pod_and_quotes_the_scheduler() -> None:
    decision = decide(job(), observe(running_master(), unschedulable(301)))
    failed = decision.status.condition(ConditionType.FAILED)
    assert failed is not None
    assert failed.message == (
        "ToyJob toy has failed because pod toy-worker-0 is still not scheduled 300s after it was created "
        f"({SCHEDULING_TIMEOUT_ANNOTATION}: 300): {SCHEDULER_SAYS}"
    )


def test_a_warning_event_carries_the_same_words() -> None:
    decision = decide(job(), observe(running_master(), unschedulable(301)))
    failed = decision.status.condition(ConditionType.FAILED)
    assert failed is not None
    assert EmitEvent(EventType.WARNING, SCHEDULING_TIMEOUT_REASON, failed.message or "") in decision.actions


def test_failing_for_it_stops_every_replica() -> None:
    decision = decide(job(), observe(running_master(), unschedulable(301)))
    assert {(d.replica_type, d.reason) for d in actions_of(decision, DeleteReplica)} == {
        ("Master", "failed"),
        ("Worker", "failed"),
    }


def test_before_the_timeout_the_engine_wakes_when_it_runs_out() -> None:
    decision = decide(job(), observe(running_master(), unschedulable(200)))
    assert not decision.status.is_true(ConditionType.FAILED)
    assert decision.requeue_after == 100


def test_a_pod_no_scheduler_placed_counts_as_unscheduled() -> None:
    waiting = replica("Worker", 0, Phase.PENDING, created_at=NOW - timedelta(seconds=400))
    failed = decide(job(), observe(running_master(), waiting)).status.condition(ConditionType.FAILED)
    assert failed is not None and "no scheduler has placed it" in (failed.message or "")


def test_a_pod_whose_image_cannot_be_pulled_fails_the_job_quoting_the_kubelet() -> None:
    container = ObservedContainer(
        "toy",
        image="toy:nope",
        waiting_reason="ImagePullBackOff",
        waiting_message='Back-off pulling "toy:nope"',
    )
    pulling = replica(
        "Worker",
        0,
        Phase.PENDING,
        placed=True,
        containers=(container,),
        created_at=NOW - timedelta(seconds=400),
    )
    failed = decide(job(), observe(running_master(), pulling)).status.condition(ConditionType.FAILED)
    assert failed is not None
    assert "still waiting for its image" in (failed.message or "")
    assert 'image toy:nope ImagePullBackOff: Back-off pulling "toy:nope"' in (failed.message or "")


def test_a_placed_pod_that_is_starting_is_not_waiting_for_scheduling() -> None:
    starting = replica("Worker", 0, Phase.PENDING, placed=True, created_at=NOW - timedelta(seconds=900))
    assert not decide(job(), observe(running_master(), starting)).status.is_true(ConditionType.FAILED)


def test_without_the_annotation_a_pod_may_wait_for_ever() -> None:
    decision = decide(job(None), observe(running_master(), unschedulable(100_000)))
    assert not decision.status.is_true(ConditionType.FAILED)


def test_locally_a_process_not_placed_is_not_waiting_for_a_scheduler() -> None:
    waiting = replica("Worker", 0, Phase.PENDING, created_at=NOW - timedelta(seconds=400))
    decision = decide(job(), observe(running_master(), waiting), traits=LOCAL)
    assert not decision.status.is_true(ConditionType.FAILED)


def test_a_timeout_that_is_not_a_whole_number_is_refused() -> None:
    failed = decide(job("5m")).status.condition(ConditionType.FAILED)
    assert failed is not None and failed.reason == "InvalidSpec"
    assert SCHEDULING_TIMEOUT_ANNOTATION in (failed.message or "")
