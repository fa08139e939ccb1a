"""The TrainJob's reconcile, rule by rule, as Trainer v2.3.0's controller decides it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import yaml
from trainjobs import builtin, trainjob

from kubetrain.api.trainer import TrainJob
from kubetrain.engine.trainjob import TrainJobObservation, reconcile_trainjob
from kubetrain.engine.trainjob_plan import snapshot_configmap
from kubetrain.engine.types import EventType
from kubetrain.frameworks.trainer.builtin import builtin_runtime_documents

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
RUNTIME = builtin("torch-distributed").to_wire()


def _seen(job: TrainJob, **observed: Any) -> TrainJobObservation:
    return TrainJobObservation(runtime=RUNTIME, **observed)


def _conditions(decision: Any) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in decision.status.conditions or []}


def _jobset(
    suspend: bool = False, conditions: list[dict[str, Any]] | None = None, **status: Any
) -> dict[str, Any]:
    return {"spec": {"suspend": suspend}, "status": {"conditions": conditions or [], **status}}


def test_first_reconcile_snapshots_the_runtime_then_applies_the_jobset() -> None:
    job = trainjob()
    decision = reconcile_trainjob(job, _seen(job), NOW)
    assert [(o["kind"], o["metadata"]["name"]) for o in decision.apply] == [
        ("ConfigMap", "demo-runtime-snapshot"),
        ("JobSet", "demo"),
    ]
    assert decision.status.conditions is None


def test_later_reconciles_plan_from_the_snapshot_not_the_live_runtime() -> None:
    job = trainjob()
    snapshot = snapshot_configmap(job, RUNTIME)
    edited = {**RUNTIME, "spec": {**RUNTIME["spec"], "mlPolicy": {"numNodes": 7, "torch": {}}}}
    decision = reconcile_trainjob(job, TrainJobObservation(runtime=edited, snapshot=snapshot), NOW)
    (jobset,) = decision.apply
    assert jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 1


def test_a_missing_runtime_is_a_warning_event_and_a_retry() -> None:
    job = trainjob("nope")
    decision = reconcile_trainjob(job, TrainJobObservation(), NOW)
    (event,) = decision.events
    assert (event.type, event.reason) == (EventType.WARNING, "TrainJobResourcesCreationFailed")
    assert event.message.startswith(
        "TrainJob resources reconciliation failed: ClusterTrainingRuntime specified"
    )
    assert decision.retry is not None and decision.apply == ()


def test_a_snapshot_holds_the_runtime_as_pure_python_pyyaml_writes_it_and_reads_back_the_same() -> None:
    """libyaml writes it (speed), with not one character changed from what a snapshot always held."""
    job = trainjob()
    for document in builtin_runtime_documents():
        text = snapshot_configmap(job, document)["data"]["runtime"]
        assert text == yaml.dump(dict(document), Dumper=yaml.SafeDumper, sort_keys=True)
        assert yaml.load(text, Loader=yaml.SafeLoader) == document


def test_a_snapshot_owned_by_another_object_is_refused() -> None:
    job = trainjob()
    snapshot = snapshot_configmap(trainjob(name="other"), RUNTIME)
    snapshot["metadata"]["name"] = "demo-runtime-snapshot"
    decision = reconcile_trainjob(job, TrainJobObservation(runtime=RUNTIME, snapshot=snapshot), NOW)
    assert "owned by another object" in decision.events[0].message


def test_an_unsupported_runtime_kind_fails_the_trainjob() -> None:
    job = trainjob(runtimeRef={"name": "x", "kind": "MyRuntime"})
    assert _conditions(reconcile_trainjob(job, TrainJobObservation(), NOW)) == {
        "Failed": ("True", "TrainingRuntimeNotSupported")
    }


def test_an_invalid_spec_fails_the_trainjob_naming_the_field() -> None:
    job = trainjob(trainer={"env": [{"name": "PET_MASTER_ADDR", "value": "x"}]})
    decision = reconcile_trainjob(job, _seen(job), NOW)
    assert _conditions(decision) == {"Failed": ("True", "InvalidSpec")}
    assert "spec.trainer.env" in decision.status.conditions[0].message  # type: ignore[index]
    assert decision.apply == ()


def test_suspend_sets_suspended_and_resume_says_resumed() -> None:
    suspended = reconcile_trainjob(trainjob(suspend=True), _seen(trainjob()), NOW)
    assert _conditions(suspended) == {"Suspended": ("True", "Suspended")}
    assert suspended.status.conditions[0].message == "TrainJob is suspended"  # type: ignore[index]
    job = trainjob(suspend=False)
    job.status = suspended.status
    resumed = reconcile_trainjob(job, _seen(job, jobset=_jobset(suspend=True)), NOW + timedelta(seconds=5))
    assert _conditions(resumed) == {"Suspended": ("False", "Resumed")}
    assert resumed.status.conditions[0].last_transition_time == NOW + timedelta(seconds=5)  # type: ignore[index]


def test_a_resumed_jobset_is_applied_with_its_volume_claim_policies_as_stored() -> None:
    # Immutable, and defaulted by JobSet's webhook: the runtime's own would be refused, the job never resumed.
    stored = [
        {
            "retentionPolicy": {"whenDeleted": "Delete"},
            "templates": [
                {
                    "metadata": {"name": "initializer"},
                    "spec": {"accessModes": ["ReadWriteOnce"]},
                    "status": {},
                }
            ],
        }
    ]
    runtime = builtin("torchtune-llama3.2-1b").to_wire()
    job = trainjob("torchtune-llama3.2-1b", suspend=False)
    jobset = {**_jobset(suspend=True), "spec": {"suspend": True, "volumeClaimPolicies": stored}}
    decision = reconcile_trainjob(job, TrainJobObservation(runtime=runtime, jobset=jobset), NOW)
    [applied] = [o for o in decision.apply if o["kind"] == "JobSet"]
    assert applied["spec"]["volumeClaimPolicies"] == stored
    assert applied["spec"]["suspend"] is False


def test_a_new_jobset_gets_the_runtimes_volume_claim_policies() -> None:
    runtime = builtin("torchtune-llama3.2-1b").to_wire()
    job = trainjob("torchtune-llama3.2-1b")
    decision = reconcile_trainjob(job, TrainJobObservation(runtime=runtime), NOW)
    [applied] = [o for o in decision.apply if o["kind"] == "JobSet"]
    assert (
        applied["spec"]["volumeClaimPolicies"] == runtime["spec"]["template"]["spec"]["volumeClaimPolicies"]
    )


def test_jobset_completed_becomes_complete_with_its_reason_and_message() -> None:
    condition = {
        "type": "Completed",
        "status": "True",
        "reason": "AllJobsCompleted",
        "message": "jobset completed successfully",
        "lastTransitionTime": "2026-11-27T11:59:00Z",
    }
    job = trainjob()
    jobset = _jobset(conditions=[condition], replicatedJobsStatus=[{"name": "node", "succeeded": 1}])
    decision = reconcile_trainjob(job, _seen(job, jobset=jobset), NOW)
    (complete,) = decision.status.conditions or []
    assert (complete.type, complete.reason, complete.message) == (
        "Complete",
        "AllJobsCompleted",
        "jobset completed successfully",
    )
    assert complete.last_transition_time == datetime(2026, 11, 27, 11, 59, tzinfo=UTC)
    assert [(s.name, s.succeeded, s.active) for s in decision.status.jobs_status or []] == [("node", 1, 0)]


def test_a_failed_jobset_fails_the_trainjob_and_its_jobset_is_not_applied_again() -> None:
    job = trainjob()
    failed = {"type": "Failed", "status": "True", "reason": "FailedJobs", "message": "m"}
    seen = _seen(job, jobset=_jobset(conditions=[failed]), snapshot=snapshot_configmap(job, RUNTIME))
    job.status = reconcile_trainjob(job, seen, NOW).status
    again = reconcile_trainjob(job, seen, NOW)
    assert again.apply == () and _conditions(again) == {"Failed": ("True", "FailedJobs")}


def test_the_active_deadline_fails_the_trainjob_and_deletes_its_jobset() -> None:
    job = trainjob(activeDeadlineSeconds=60)
    job.metadata.creation_timestamp = NOW - timedelta(seconds=61)
    decision = reconcile_trainjob(job, _seen(job, jobset=_jobset()), NOW)
    assert decision.delete_jobset
    assert _conditions(decision) == {"Failed": ("True", "DeadlineExceeded")}
    assert decision.status.conditions[0].message == "TrainJob exceeded its active deadline"  # type: ignore[index]


def test_before_the_deadline_the_trainjob_is_looked_at_again_when_it_falls() -> None:
    job = trainjob(activeDeadlineSeconds=60)
    job.metadata.creation_timestamp = NOW - timedelta(seconds=20)
    decision = reconcile_trainjob(job, _seen(job, jobset=_jobset()), NOW)
    assert decision.requeue_after == 40 and not decision.delete_jobset


def test_the_deadline_counts_from_the_last_resume() -> None:
    job = trainjob(activeDeadlineSeconds=60)
    job.metadata.creation_timestamp = NOW - timedelta(hours=1)
    resumed = {"type": "Suspended", "status": "False", "reason": "Resumed", "message": "TrainJob is resumed"}
    job.status = TrainJob.model_validate(
        {
            "spec": {"runtimeRef": {"name": "x"}},
            "status": {"conditions": [{**resumed, "lastTransitionTime": "2026-11-27T11:59:30Z"}]},
        }
    ).status
    decision = reconcile_trainjob(job, _seen(job, jobset=_jobset()), NOW)
    assert decision.requeue_after == 30


def test_a_deadline_failure_is_kept_though_the_jobset_says_nothing() -> None:
    job = trainjob(activeDeadlineSeconds=60)
    job.metadata.creation_timestamp = NOW - timedelta(seconds=61)
    job.status = reconcile_trainjob(job, _seen(job, jobset=_jobset()), NOW).status
    again = reconcile_trainjob(job, _seen(job), NOW + timedelta(seconds=1))
    assert _conditions(again) == {"Failed": ("True", "DeadlineExceeded")} and again.apply == ()


def test_a_trainjob_managed_by_multikueue_is_left_alone() -> None:
    job = trainjob(managedBy="kueue.x-k8s.io/multikueue", suspend=True)
    decision = reconcile_trainjob(job, _seen(job), NOW)
    assert decision.apply == () and decision.status.conditions is None


def test_a_trainjob_first_seen_past_its_deadline_gets_no_jobset() -> None:
    job = trainjob(activeDeadlineSeconds=1)
    job.metadata.creation_timestamp = NOW - timedelta(seconds=5)
    decision = reconcile_trainjob(job, _seen(job), NOW)
    assert decision.apply == () and decision.delete_jobset
