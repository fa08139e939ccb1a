"""Disruptions: a replica ended through no fault of its own is replaced, counted apart and bounded
(engine.disruptions)."""

from __future__ import annotations

from kubetrain.api.common import ConditionType, JobStatus, ReplicaStatus, RestartPolicy, RunPolicy
from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.disruptions import DISRUPTED_REASON
from kubetrain.engine.fault_policy import DISRUPTION_LIMIT_ANNOTATION, MIN_DISRUPTION_LIMIT
from kubetrain.engine.types import (
    CreateReplica,
    DeleteReplica,
    Disruption,
    EmitEvent,
    Observation,
    ObservedReplica,
    Phase,
)

from .fakes import observe, replica, toy_job
from .support import actions_of, decide

EVICTED = Disruption("EvictionByEvictionAPI", "Eviction API: evicting")
PREEMPTED = Disruption("PreemptionByScheduler", "Preempted in order to admit critical pod")


def job(
    policy: RestartPolicy = RestartPolicy.ON_FAILURE,
    backoff_limit: int | None = 0,
    limit: str | None = None,
    status: JobStatus | None = None,
) -> TrainingJob:
    made = toy_job(masters=1, workers=2, policy=policy, run_policy=RunPolicy(backoff_limit=backoff_limit))
    if status is not None:
        made = made.with_status(status)
    if limit is None:
        return made
    metadata = made.metadata.model_copy(update={"annotations": {DISRUPTION_LIMIT_ANNOTATION: limit}})
    return made.model_copy(update={"metadata": metadata})


def evicted_by_kubelet(index: int = 1) -> ObservedReplica:
    return replica(
        "Worker",
        index,
        Phase.FAILED,
        exit_code=137,
        reason="Evicted",
        disruption=Disruption("TerminationByKubelet", "The node was low on resource: memory."),
    )


def test_a_replica_failed_by_a_disruption_is_deleted_to_be_replaced() -> None:
    decision = decide(job(), observe(replica("Master", 0), replica("Worker", 0), evicted_by_kubelet()))
    assert actions_of(decision, DeleteReplica) == [DeleteReplica("Worker", 1, "disruption")]


def test_a_disruption_does_not_count_against_backoff_limit() -> None:
    decision = decide(
        job(backoff_limit=0), observe(replica("Master", 0), replica("Worker", 0), evicted_by_kubelet())
    )
    assert not decision.status.is_true(ConditionType.FAILED)
    assert decision.status.replica_statuses["Worker"].restarts == 0


def test_a_disruption_is_replaced_under_restart_policy_never() -> None:
    decision = decide(
        job(RestartPolicy.NEVER), observe(replica("Master", 0), replica("Worker", 0), evicted_by_kubelet())
    )
    assert not decision.status.is_true(ConditionType.FAILED)
    assert actions_of(decision, DeleteReplica) == [DeleteReplica("Worker", 1, "disruption")]


def test_a_disrupted_replica_is_not_counted_as_failed() -> None:
    decision = decide(job(), observe(replica("Master", 0), replica("Worker", 0), evicted_by_kubelet()))
    assert decision.status.replica_statuses["Worker"].failed == 0


def test_a_pod_being_evicted_is_not_deleted_again_and_not_replaced_until_gone() -> None:
    evicting = replica("Worker", 1, terminating=True, disruption=EVICTED)
    decision = decide(job(), observe(replica("Master", 0), replica("Worker", 0), evicting))
    assert not actions_of(decision, DeleteReplica)
    assert not actions_of(decision, CreateReplica)


def test_a_disruption_is_counted_once_its_pod_is_gone() -> None:
    gone = replica("Worker", 1, terminating=True, disruption=EVICTED)
    decision = decide(
        job(), Observation(replicas=(replica("Master", 0), replica("Worker", 0)), departed=(gone,))
    )
    assert decision.status.replica_statuses["Worker"].disruptions == 1
    assert actions_of(decision, CreateReplica) == [CreateReplica("Worker", 1)]


def test_a_disruption_still_under_way_is_not_counted_yet() -> None:
    evicting = replica("Worker", 1, terminating=True, disruption=EVICTED)
    decision = decide(job(), observe(replica("Master", 0), replica("Worker", 0), evicting))
    assert decision.status.replica_statuses["Worker"].disruptions == 0


def test_the_job_is_restarting_with_a_condition_naming_the_disruption() -> None:
    evicting = replica("Worker", 1, terminating=True, disruption=EVICTED)
    decision = decide(job(), observe(replica("Master", 0), replica("Worker", 0), evicting))
    restarting = decision.status.condition(ConditionType.RESTARTING)
    assert restarting is not None and restarting.status == "True"
    assert "disruption, not a failure: pod toy-worker-1 (EvictionByEvictionAPI: Eviction API: evicting)" in (
        restarting.message or ""
    )
    assert decision.status.conditions[-1].type == ConditionType.RESTARTING


def test_a_warning_event_names_the_pod_and_the_disruption() -> None:
    decision = decide(job(), observe(replica("Master", 0), replica("Worker", 0), evicted_by_kubelet()))
    events = [e for e in actions_of(decision, EmitEvent) if e.reason == DISRUPTED_REASON]
    assert len(events) == 1
    assert events[0].message.startswith(
        "pod toy-worker-1 was disrupted (TerminationByKubelet: The node was low on resource: memory.)"
    )


def test_a_pod_evicted_and_gone_between_two_reconciles_is_still_announced() -> None:
    gone = replica("Worker", 1, terminating=True, disruption=EVICTED)
    decision = decide(
        job(), Observation(replicas=(replica("Master", 0), replica("Worker", 0)), departed=(gone,))
    )
    events = [e for e in actions_of(decision, EmitEvent) if e.reason == DISRUPTED_REASON]
    assert [e.message.split(":")[0] for e in events] == [
        "pod toy-worker-1 was disrupted (EvictionByEvictionAPI"
    ]
    restarting = decision.status.condition(ConditionType.RESTARTING)
    assert restarting is not None and "pod toy-worker-1 (EvictionByEvictionAPI" in (restarting.message or "")


def test_a_running_pod_marked_for_a_disruption_that_has_not_happened_is_left_alone() -> None:
    marked = replica("Worker", 1, disruption=PREEMPTED)
    decision = decide(job(), observe(replica("Master", 0), replica("Worker", 0), marked))
    assert not actions_of(decision, DeleteReplica)
    assert decision.status.replica_statuses["Worker"].active == 2


def test_the_default_limit_is_one_per_replica_and_at_least_ten() -> None:
    status = JobStatus(replica_statuses={"Worker": ReplicaStatus(disruptions=MIN_DISRUPTION_LIMIT - 1)})
    decision = decide(
        job(status=status, backoff_limit=None),
        observe(replica("Master", 0), evicted_by_kubelet(0), evicted_by_kubelet(1)),
    )
    assert actions_of(decision, DeleteReplica) == [
        DeleteReplica("Worker", 0, "disruption"),
        DeleteReplica("Worker", 1, "restart"),  # the eleventh: past the limit, a failure
    ]


def test_past_the_limit_a_disruption_is_a_failure_its_policy_decides() -> None:
    decision = decide(
        job(RestartPolicy.ON_FAILURE, backoff_limit=None, limit="0"),
        observe(replica("Master", 0), replica("Worker", 0), evicted_by_kubelet()),
    )
    assert actions_of(decision, DeleteReplica) == [DeleteReplica("Worker", 1, "restart")]
    assert decision.status.replica_statuses["Worker"].restarts == 1


def test_past_the_limit_a_disruption_under_never_fails_the_job() -> None:
    decision = decide(
        job(RestartPolicy.NEVER, limit="0"),
        observe(replica("Master", 0), replica("Worker", 0), evicted_by_kubelet()),
    )
    assert decision.status.is_true(ConditionType.FAILED)


def test_past_the_limit_an_event_says_the_disruption_counts_as_a_failure() -> None:
    decision = decide(
        job(backoff_limit=None, limit="0"),
        observe(replica("Master", 0), replica("Worker", 0), evicted_by_kubelet()),
    )
    messages = [e.message for e in actions_of(decision, EmitEvent) if e.reason == DISRUPTED_REASON]
    assert len(messages) == 1 and "it counts as a failure" in messages[0]


def test_a_departure_past_the_limit_is_not_counted_as_a_disruption() -> None:
    gone = replica("Worker", 1, terminating=True, disruption=EVICTED)
    decision = decide(
        job(limit="0"), Observation(replicas=(replica("Master", 0), replica("Worker", 0)), departed=(gone,))
    )
    assert decision.status.replica_statuses["Worker"].disruptions == 0


def test_a_negative_or_non_numeric_limit_is_refused_naming_the_annotation() -> None:
    failed = decide(job(limit="-1")).status.condition(ConditionType.FAILED)
    assert failed is not None and failed.reason == "InvalidSpec"
    assert DISRUPTION_LIMIT_ANNOTATION in (failed.message or "")
