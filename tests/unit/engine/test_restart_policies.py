"""Restart semantics of a failed replica under each restart policy (§1.1, §4.3)."""

from __future__ import annotations

from kubetrain.api.common import ConditionType, RestartPolicy
from kubetrain.engine.types import CreateReplica, DeleteReplica, EmitEvent, Phase

from .fakes import NOW, observe, replica, toy_job
from .support import actions_of, decide, event_reasons


def test_failed_replica_under_on_failure_is_deleted_for_restart() -> None:
    decision = decide(
        toy_job(masters=1, workers=1, policy=RestartPolicy.ON_FAILURE),
        observe(replica("Master", 0), replica("Worker", 0, Phase.FAILED, exit_code=1)),
    )
    assert actions_of(decision, DeleteReplica) == [DeleteReplica("Worker", 0, "restart")]


def test_failed_replica_under_always_is_deleted_for_restart() -> None:
    decision = decide(
        toy_job(masters=1, workers=1, policy=RestartPolicy.ALWAYS),
        observe(replica("Master", 0), replica("Worker", 0, Phase.FAILED, exit_code=0)),
    )
    assert actions_of(decision, DeleteReplica) == [DeleteReplica("Worker", 0, "restart")]


def test_exit_code_137_under_exit_code_policy_deletes_the_replica_for_restart() -> None:
    decision = decide(
        toy_job(masters=1, workers=1, policy=RestartPolicy.EXIT_CODE),
        observe(replica("Master", 0), replica("Worker", 0, Phase.FAILED, exit_code=137)),
    )
    assert actions_of(decision, DeleteReplica) == [DeleteReplica("Worker", 0, "restart")]
    assert not decision.status.is_true(ConditionType.FAILED)


def test_unknown_exit_code_under_exit_code_policy_is_retryable() -> None:
    decision = decide(
        toy_job(masters=1, workers=1, policy=RestartPolicy.EXIT_CODE),
        observe(replica("Master", 0), replica("Worker", 0, Phase.FAILED, exit_code=None)),
    )
    assert actions_of(decision, DeleteReplica) == [DeleteReplica("Worker", 0, "restart")]


def test_exit_code_1_under_exit_code_policy_fails_the_job_with_upstream_message() -> None:
    decision = decide(
        toy_job(masters=1, workers=1, policy=RestartPolicy.EXIT_CODE, name="mnist"),
        observe(replica("Master", 0), replica("Worker", 0, Phase.FAILED, exit_code=1)),
    )
    failed = decision.status.condition(ConditionType.FAILED)
    assert failed is not None
    assert failed.reason == "ToyJobFailed"
    assert failed.message == 'job "mnist" is failing because "Worker" replica(s) failed.'
    assert decision.status.completion_time == NOW
    assert not actions_of(decision, DeleteReplica)


def test_exit_code_127_is_permanent() -> None:
    decision = decide(
        toy_job(masters=1, workers=1, policy=RestartPolicy.EXIT_CODE),
        observe(replica("Master", 0), replica("Worker", 0, Phase.FAILED, exit_code=127)),
    )
    assert decision.status.is_true(ConditionType.FAILED)


def test_exit_code_128_is_retryable() -> None:
    decision = decide(
        toy_job(masters=1, workers=1, policy=RestartPolicy.EXIT_CODE),
        observe(replica("Master", 0), replica("Worker", 0, Phase.FAILED, exit_code=128)),
    )
    assert actions_of(decision, DeleteReplica) == [DeleteReplica("Worker", 0, "restart")]


def test_failed_replica_under_never_is_left_for_the_framework_rules() -> None:
    decision = decide(
        toy_job(masters=1, workers=1, policy=RestartPolicy.NEVER, name="mnist"),
        observe(replica("Master", 0), replica("Worker", 0, Phase.FAILED, exit_code=1)),
    )
    assert not actions_of(decision, DeleteReplica)
    failed = decision.status.condition(ConditionType.FAILED)
    assert failed is not None
    assert failed.reason == "ToyJobFailed"


def test_deleting_for_restart_sets_restarting_with_the_replica_type_in_the_message() -> None:
    decision = decide(
        toy_job(masters=2, workers=None, policy=RestartPolicy.ON_FAILURE, name="mnist"),
        observe(replica("Master", 0, Phase.FAILED, exit_code=1), replica("Master", 1)),
    )
    restarting = decision.status.condition(ConditionType.RESTARTING)
    assert restarting is not None
    assert restarting.reason == "ToyJobRestarting"
    assert "ToyJobRestarting" in event_reasons(decision)


def test_restart_message_names_the_job_and_replica_type() -> None:
    decision = decide(
        toy_job(masters=None, workers=2, policy=RestartPolicy.ON_FAILURE, name="mnist"),
        observe(replica("Worker", 0, Phase.FAILED, exit_code=1), replica("Worker", 1, Phase.PENDING)),
    )
    messages = [e.message for e in actions_of(decision, EmitEvent)]
    assert "job mnist is restarting because Worker replica(s) failed." in messages


def test_exited_with_code_event_names_the_pod_and_code() -> None:
    decision = decide(
        toy_job(masters=1, workers=1, policy=RestartPolicy.ON_FAILURE, name="mnist"),
        observe(replica("Master", 0), replica("Worker", 0, Phase.FAILED, exit_code=3)),
    )
    exited = [e for e in actions_of(decision, EmitEvent) if e.reason == "ExitedWithCode"]
    assert [e.message for e in exited] == ["Pod: ns.mnist-worker-0 exited with code 3"]


def test_the_failed_replica_counts_as_failed_in_the_round_it_is_deleted() -> None:
    decision = decide(
        toy_job(masters=1, workers=1, policy=RestartPolicy.ON_FAILURE),
        observe(replica("Master", 0), replica("Worker", 0, Phase.FAILED, exit_code=1)),
    )
    assert decision.status.replica_statuses["Worker"].failed == 1


def test_a_replica_deleted_for_restart_is_not_recreated_in_the_same_decision() -> None:
    decision = decide(
        toy_job(masters=1, workers=1, policy=RestartPolicy.ON_FAILURE),
        observe(replica("Master", 0), replica("Worker", 0, Phase.FAILED, exit_code=1)),
    )
    assert not actions_of(decision, CreateReplica)


def test_a_replica_deleted_for_restart_keeps_its_restarts_in_the_replica_status() -> None:
    decision = decide(
        toy_job(masters=1, workers=1, policy=RestartPolicy.ON_FAILURE),
        observe(replica("Master", 0), replica("Worker", 0, Phase.FAILED, exit_code=1, restart_count=2)),
    )
    assert decision.status.replica_statuses["Worker"].restarts == 3


def test_a_failed_replica_already_terminating_is_not_deleted_again() -> None:
    decision = decide(
        toy_job(masters=1, workers=1, policy=RestartPolicy.ON_FAILURE),
        observe(replica("Master", 0), replica("Worker", 0, Phase.FAILED, exit_code=1, terminating=True)),
    )
    assert not actions_of(decision, DeleteReplica)
    assert decision.status.replica_statuses["Worker"].restarts == 0


def test_every_replica_deleted_for_restart_gets_its_own_restarting_event() -> None:
    decision = decide(
        toy_job(masters=None, workers=2, policy=RestartPolicy.ON_FAILURE),
        observe(
            replica("Worker", 0, Phase.FAILED, exit_code=1), replica("Worker", 1, Phase.FAILED, exit_code=1)
        ),
    )
    assert event_reasons(decision).count("ToyJobRestarting") == 2


def test_creating_from_a_template_with_its_own_restart_policy_warns_it_is_overwritten() -> None:
    template = {"spec": {"restartPolicy": "Always", "containers": [{"name": "toy"}]}}
    decision = decide(toy_job(masters=1, workers=None, template=template))
    assert "SetPodTemplateRestartPolicy" in event_reasons(decision)


def test_a_template_without_restart_policy_creates_without_warning() -> None:
    assert "SetPodTemplateRestartPolicy" not in event_reasons(decide(toy_job()))
