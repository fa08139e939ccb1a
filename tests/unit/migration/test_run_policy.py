"""What every kind shares: the run policy, restart policies and metadata, as TrainJob and runtime fields."""

from __future__ import annotations

import pytest
from migrating import jobset, migrate_manifest, migrated, notes, program, replicated

from builders import manifest
from kubetrain.frameworks.migration import NotMigratableError

PYTHON = [program("pytorch", ["python", "t.py"])]


def node_job(restart_policy: str, **run_policy: object) -> dict:  # type: ignore[type-arg]
    migration = migrated(
        "PyTorchJob",
        {"Master": 1, "Worker": 1},
        restart_policy=restart_policy,
        spec={"runPolicy": run_policy},
        containers=PYTHON,
    )
    job: dict = replicated(jobset(migration), "node")["template"]["spec"]  # type: ignore[type-arg]
    return job


def test_never_is_never_restarted_nor_recreated() -> None:
    job = node_job("Never", backoffLimit=3)
    assert job["template"]["spec"]["restartPolicy"] == "Never"
    assert job["backoffLimit"] == 0


def test_on_failure_restarts_up_to_the_run_policys_backoff_limit() -> None:
    job = node_job("OnFailure", backoffLimit=3)
    assert job["template"]["spec"]["restartPolicy"] == "OnFailure"
    assert job["backoffLimit"] == 3


def test_on_failure_without_backoff_limit_keeps_v1s_no_limit_on_a_runtime_of_its_own() -> None:
    migration = migrated(
        "PyTorchJob",
        {"Master": 1},
        restart_policy="OnFailure",
        containers=[program("pytorch", ["python", "t.py"], workingDir="/w")],
    )
    assert replicated(jobset(migration), "node")["template"]["spec"]["backoffLimit"] == 2**31 - 1


def test_exit_code_fails_the_job_on_exit_codes_below_128_and_retries_the_rest() -> None:
    job = node_job("ExitCode", backoffLimit=4)
    assert job["template"]["spec"]["restartPolicy"] == "Never"
    assert job["backoffLimit"] == 4
    (rule,) = job["podFailurePolicy"]["rules"]
    assert rule["action"] == "FailJob"
    assert rule["onExitCodes"] == {"containerName": "node", "operator": "In", "values": list(range(1, 128))}


def test_always_becomes_on_failure_with_a_note() -> None:
    migration = migrated("PyTorchJob", {"Master": 1}, restart_policy="Always", containers=PYTHON)
    assert "Always becomes OnFailure" in notes(migration)["spec.pytorchReplicaSpecs.Master.restartPolicy"]


def test_suspend_and_the_active_deadline_are_the_trainjobs_own() -> None:
    spec = {"runPolicy": {"suspend": True, "activeDeadlineSeconds": 600}}
    migration = migrated("PyTorchJob", {"Master": 1}, spec=spec, containers=PYTHON)
    assert migration.trainjob.spec.suspend is True
    assert migration.trainjob.spec.active_deadline_seconds == 600


def test_multikueue_keeps_managing_the_job() -> None:
    spec = {"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}}
    migration = migrated("PyTorchJob", {"Master": 1}, spec=spec, containers=PYTHON)
    assert migration.trainjob.spec.managed_by == "kueue.x-k8s.io/multikueue"


def test_the_v1_operator_as_manager_gives_way_to_trainers_default_silently() -> None:
    spec = {"runPolicy": {"managedBy": "kubeflow.org/training-operator"}}
    migration = migrated("PyTorchJob", {"Master": 1}, spec=spec, containers=PYTHON)
    assert migration.trainjob.spec.managed_by is None
    assert "spec.runPolicy.managedBy" not in notes(migration)


def test_the_ttl_becomes_the_jobsets_on_a_runtime_of_its_own() -> None:
    spec = {"runPolicy": {"ttlSecondsAfterFinished": 60}}
    migration = migrated("PyTorchJob", {"Master": 1}, spec=spec, containers=PYTHON)
    assert migration.runtime is not None
    assert jobset(migration)["spec"]["ttlSecondsAfterFinished"] == 60
    assert "the TrainJob stays" in notes(migration)["spec.runPolicy.ttlSecondsAfterFinished"]


def test_clean_pod_policy_running_is_what_a_jobset_does_and_needs_no_note() -> None:
    spec = {"runPolicy": {"cleanPodPolicy": "Running"}}
    assert "spec.runPolicy.cleanPodPolicy" not in notes(
        migrated("PyTorchJob", {"Master": 1}, spec=spec, containers=PYTHON)
    )


@pytest.mark.parametrize("policy", ["None", "All"])
def test_clean_pod_policy_none_or_all_has_no_counterpart_and_says_so(policy: str) -> None:
    spec = {"runPolicy": {"cleanPodPolicy": policy}}
    note = notes(migrated("PyTorchJob", {"Master": 1}, spec=spec, containers=PYTHON))[
        "spec.runPolicy.cleanPodPolicy"
    ]
    assert note.startswith(f"{policy} has no TrainJob field")


def test_a_scheduling_policy_becomes_coscheduling_with_its_timeout() -> None:
    spec = {"runPolicy": {"schedulingPolicy": {"scheduleTimeoutSeconds": 120, "minAvailable": 2}}}
    migration = migrated("PyTorchJob", {"Master": 1, "Worker": 1}, spec=spec, containers=PYTHON)
    assert migration.runtime is not None
    assert migration.runtime.to_wire()["spec"]["podGroupPolicy"] == {
        "coscheduling": {"scheduleTimeoutSeconds": 120}
    }
    assert "every pod" in notes(migration)["spec.runPolicy.schedulingPolicy.minAvailable"]


def test_a_scheduling_policy_with_a_queue_becomes_volcano_with_the_queue_annotation() -> None:
    spec = {"runPolicy": {"schedulingPolicy": {"queue": "research"}}}
    migration = migrated("PyTorchJob", {"Master": 1}, spec=spec, containers=PYTHON)
    assert migration.runtime is not None
    wire = migration.runtime.to_wire()["spec"]
    assert wire["podGroupPolicy"] == {"volcano": {}}
    assert wire["template"]["metadata"]["annotations"] == {"scheduling.volcano.sh/queue-name": "research"}


def test_labels_and_annotations_carry_over_but_kubectls_last_applied_copy() -> None:
    written = manifest("PyTorchJob", {"Master": 1}, containers=PYTHON)
    written["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team"}
    written["metadata"]["annotations"] = {
        "owner": "ml",
        "kubectl.kubernetes.io/last-applied-configuration": "{}",
    }
    metadata = migrate_manifest(written).trainjob.metadata
    assert metadata.labels == {"kueue.x-k8s.io/queue-name": "team"}
    assert metadata.annotations == {"owner": "ml"}


def test_a_name_no_trainjob_may_have_is_refused_naming_the_field() -> None:
    with pytest.raises(NotMigratableError) as refused:
        migrated("PyTorchJob", {"Master": 1}, name="a" * 64, containers=PYTHON)
    assert [r.path for r in refused.value.reasons] == ["metadata.name"]


def test_a_v1_job_its_own_operator_would_refuse_is_refused_with_its_errors() -> None:
    with pytest.raises(NotMigratableError) as refused:
        migrated("PyTorchJob", {"Master": 2}, containers=PYTHON)
    assert refused.value.reasons[0].path.startswith("spec.pytorchReplicaSpecs.Master")
