"""First sight, managedBy, invalid specs, replica creation and counting (§4.1, §4.2, §4.3, §4.7)."""

from __future__ import annotations

from datetime import timedelta

from kubetrain.api.common import ConditionStatus, ConditionType, JobCondition, JobStatus, RunPolicy
from kubetrain.engine.types import (
    CreateReplica,
    CreateService,
    DeleteReplica,
    DeleteService,
    EmitEvent,
    Observation,
    Phase,
)

from .fakes import NOW, everything_running, observe, replica, toy_job
from .support import LOCAL, actions_of, decide, event_reasons, only_state_actions, settled


def test_created_condition_on_first_sight_with_upstream_message() -> None:
    decision = decide(toy_job(name="mnist"))
    created = decision.status.condition(ConditionType.CREATED)
    assert created is not None
    assert created.status == ConditionStatus.TRUE
    assert created.reason == "ToyJobCreated"
    assert created.message == "ToyJob mnist is created."


def test_created_records_no_event_as_the_training_operator_records_none() -> None:
    assert "ToyJobCreated" not in event_reasons(decide(toy_job(name="mnist")))


def test_created_is_not_added_twice() -> None:
    job = settled(toy_job(), Observation(services=frozenset()))
    decision = decide(job, Observation(services=frozenset()), NOW + timedelta(seconds=1))
    assert [c.type for c in decision.status.conditions].count(ConditionType.CREATED) == 1
    assert "ToyJobCreated" not in event_reasons(decision)


def test_managed_by_another_controller_changes_nothing() -> None:
    job = toy_job(run_policy=RunPolicy(managed_by="kueue.x-k8s.io/multikueue"))
    decision = decide(job)
    assert decision.actions == ()
    assert decision.status == job.status
    assert decision.requeue_after is None


def test_managed_by_the_framework_itself_is_reconciled() -> None:
    job = toy_job(run_policy=RunPolicy(managed_by="kubeflow.org/training-operator"))
    assert actions_of(decide(job), CreateReplica)


def test_invalid_spec_fails_the_job_with_reason_invalid_spec_naming_the_field() -> None:
    decision = decide(toy_job(workers=-1))
    failed = decision.status.condition(ConditionType.FAILED)
    assert failed is not None
    assert failed.status == ConditionStatus.TRUE
    assert failed.reason == "InvalidSpec"
    assert failed.message is not None
    assert "spec.toyReplicaSpecs.Worker.replicas" in failed.message


def test_invalid_spec_creates_no_replicas_and_sets_completion_time() -> None:
    decision = decide(toy_job(workers=-1))
    assert not actions_of(decision, CreateReplica)
    assert not actions_of(decision, CreateService)
    assert decision.status.completion_time == NOW


def test_the_decision_carries_the_admitted_job_the_substrate_plans_from() -> None:
    job = toy_job(masters=1, workers=2)
    decision = decide(job)
    assert decision.admitted is not None
    assert decision.admitted.run_policy.clean_pod_policy is not None  # defaulted
    assert job.run_policy.clean_pod_policy is None


def test_an_invalid_or_foreign_job_carries_no_admitted_job() -> None:
    assert decide(toy_job(workers=-1)).admitted is None
    foreign = toy_job(run_policy=RunPolicy(managed_by="kueue.x-k8s.io/multikueue"))
    assert decide(foreign).admitted is None


def test_every_missing_replica_and_service_is_created_in_replica_type_order() -> None:
    decision = decide(toy_job(masters=1, workers=2))
    assert actions_of(decision, CreateReplica) == [
        CreateReplica("Master", 0),
        CreateReplica("Worker", 0),
        CreateReplica("Worker", 1),
    ]
    assert actions_of(decision, CreateService) == [
        CreateService("Master", 0),
        CreateService("Worker", 0),
        CreateService("Worker", 1),
    ]


def test_no_services_are_created_when_the_substrate_has_none() -> None:
    decision = decide(toy_job(), Observation(services=None), traits=LOCAL)
    assert actions_of(decision, CreateReplica)
    assert not actions_of(decision, CreateService)


def test_a_missing_service_is_recreated_for_a_running_replica() -> None:
    job = toy_job(masters=1, workers=None)
    decision = decide(job, observe(replica("Master", 0), services=frozenset()))
    assert actions_of(decision, CreateService) == [CreateService("Master", 0)]
    assert not actions_of(decision, CreateReplica)


def test_an_existing_replica_is_not_created_again() -> None:
    job = toy_job()
    assert not actions_of(decide(job, everything_running(job)), CreateReplica)


def test_a_terminating_replica_is_not_replaced_until_it_is_gone() -> None:
    job = toy_job(masters=1, workers=None)
    terminating = replica("Master", 0, Phase.FAILED, terminating=True)
    decision = decide(job, observe(terminating, services=frozenset({("Master", 0)})))
    assert not actions_of(decision, CreateReplica)
    assert not actions_of(decision, DeleteReplica)


def test_scale_down_deletes_replicas_and_services_with_index_at_or_above_replicas() -> None:
    job = toy_job(masters=1, workers=1)
    observation = observe(
        replica("Master", 0),
        replica("Worker", 0),
        replica("Worker", 1),
        replica("Worker", 2),
        services=frozenset({("Master", 0), ("Worker", 0), ("Worker", 1), ("Worker", 2)}),
    )
    decision = decide(job, observation)
    assert actions_of(decision, DeleteReplica) == [
        DeleteReplica("Worker", 1, "scale-down"),
        DeleteReplica("Worker", 2, "scale-down"),
    ]
    assert actions_of(decision, DeleteService) == [DeleteService("Worker", 1), DeleteService("Worker", 2)]


def test_a_child_labelled_with_a_negative_index_is_deleted_as_one_the_job_does_not_want() -> None:
    job = toy_job(masters=1, workers=1)
    observation = observe(
        replica("Master", 0),
        replica("Worker", 0),
        replica("Worker", -1),
        services=frozenset({("Master", 0), ("Worker", 0), ("Worker", -1)}),
    )
    decision = decide(job, observation)
    assert actions_of(decision, DeleteReplica) == [DeleteReplica("Worker", -1, "scale-down")]
    assert actions_of(decision, DeleteService) == [DeleteService("Worker", -1)]


def test_scaled_down_replicas_are_not_counted() -> None:
    job = toy_job(masters=1, workers=1)
    decision = decide(job, observe(replica("Master", 0), replica("Worker", 0), replica("Worker", 1)))
    assert decision.status.replica_statuses["Worker"].active == 1


def test_replicas_of_a_type_no_longer_in_the_spec_are_deleted() -> None:
    job = toy_job(masters=None, workers=1)
    decision = decide(job, observe(replica("Worker", 0), replica("Master", 0)))
    assert DeleteReplica("Master", 0, "scale-down") in actions_of(decision, DeleteReplica)


def test_running_replicas_count_as_active() -> None:
    job = toy_job(masters=1, workers=2)
    decision = decide(job, everything_running(job))
    assert decision.status.replica_statuses["Worker"].active == 2
    assert decision.status.replica_statuses["Master"].active == 1


def test_running_but_terminating_replicas_count_as_failed() -> None:
    job = toy_job(masters=1, workers=1)
    decision = decide(job, observe(replica("Master", 0), replica("Worker", 0, terminating=True)))
    worker = decision.status.replica_statuses["Worker"]
    assert (worker.active, worker.failed) == (0, 1)


def test_succeeded_and_failed_replicas_are_counted_and_pending_ones_are_not() -> None:
    job = toy_job(masters=1, workers=3, policy=None)
    observation = observe(
        replica("Master", 0),
        replica("Worker", 0, Phase.SUCCEEDED, exit_code=0),
        replica("Worker", 1, Phase.PENDING),
        replica("Worker", 2, Phase.FAILED, exit_code=1),
    )
    worker = decide(job, observation).status.replica_statuses["Worker"]
    assert (worker.active, worker.succeeded, worker.failed) == (0, 1, 1)


def test_replica_status_selector_is_filled_for_frameworks_with_a_scale_subresource() -> None:
    decision = decide(toy_job(name="mnist"))
    assert decision.status.replica_statuses["Worker"].selector == (
        "training.kubeflow.org/job-name=mnist,"
        "training.kubeflow.org/operator-name=toyjob-controller,"
        "training.kubeflow.org/replica-type=worker"
    )


def test_start_time_is_set_on_the_first_status_computation() -> None:
    assert decide(toy_job()).status.start_time == NOW


def test_start_time_is_kept_afterwards() -> None:
    job = settled(toy_job(), Observation(services=frozenset()))
    later = decide(job, everything_running(job), NOW + timedelta(minutes=5))
    assert later.status.start_time == NOW


def test_framework_status_rules_set_running_without_an_event_as_the_rule_records_none() -> None:
    job = toy_job()
    decision = decide(job, everything_running(job))
    assert decision.status.is_true(ConditionType.RUNNING)
    assert "ToyJobRunning" not in event_reasons(decision)


def test_an_unchanged_condition_emits_no_event() -> None:
    job = toy_job()
    job = settled(job, everything_running(job))
    decision = decide(job, everything_running(job), NOW + timedelta(seconds=10))
    assert not actions_of(decision, EmitEvent)
    assert decision.status == job.status


def test_success_sets_completion_time() -> None:
    job = toy_job(masters=1, workers=1)
    done = observe(replica("Master", 0, Phase.SUCCEEDED, exit_code=0), replica("Worker", 0))
    decision = decide(job, done)
    assert decision.status.is_true(ConditionType.SUCCEEDED)
    assert decision.status.completion_time == NOW


def test_a_job_finishing_now_creates_nothing_more() -> None:
    job = toy_job(masters=1, workers=2)
    done = observe(replica("Master", 0, Phase.SUCCEEDED, exit_code=0), services=frozenset({("Master", 0)}))
    decision = decide(job, done)
    assert decision.status.is_true(ConditionType.SUCCEEDED)
    assert not actions_of(decision, CreateReplica)
    assert not actions_of(decision, CreateService)


def test_a_running_job_without_limits_asks_for_no_requeue() -> None:
    job = toy_job()
    decision = decide(job, everything_running(job))
    assert decision.requeue_after is None
    assert only_state_actions(decision) == []


def test_created_is_only_added_on_first_sight_so_it_never_becomes_the_latest_state() -> None:
    status = JobStatus(
        conditions=[JobCondition(type=ConditionType.SUCCEEDED, status=ConditionStatus.TRUE, reason="Done")],
        completion_time=NOW,
    )
    decision = decide(toy_job(status=status), observe())
    assert [c.type for c in decision.status.conditions] == [ConditionType.SUCCEEDED]


def test_scale_down_deletes_a_left_over_service_without_its_replica() -> None:
    job = toy_job(masters=1, workers=1)
    services = frozenset({("Master", 0), ("Worker", 0), ("Worker", 3)})
    decision = decide(job, observe(replica("Master", 0), replica("Worker", 0), services=services))
    assert actions_of(decision, DeleteService) == [DeleteService("Worker", 3)]


def test_services_of_a_replica_type_no_longer_in_the_spec_are_deleted() -> None:
    job = toy_job(masters=None, workers=1)
    services = frozenset({("Master", 0), ("Worker", 0)})
    decision = decide(job, observe(replica("Worker", 0), services=services))
    assert actions_of(decision, DeleteService) == [DeleteService("Master", 0)]
