"""TFJob: defaulting (§1.3), TF_CONFIG (§2.2), validation (§5.1), status (§4.4)."""

from __future__ import annotations

import json
from typing import Any

from builders import ObservedPhase, container, counted, defaulted, status_context
from kubetrain.api.common import ConditionStatus, ConditionType, JobCondition, JobStatus, RestartPolicy
from kubetrain.api.jobs import SuccessPolicy, TFJob
from kubetrain.frameworks.addressing import Addressing, ClusterAddressing, LocalAddressing
from kubetrain.frameworks.base import EnvTarget
from kubetrain.frameworks.tensorflow import TensorFlowFramework

TF = TensorFlowFramework()
CLUSTER = ClusterAddressing()


def tfjob(replicas: dict[str, int | None], **options: Any) -> TFJob:
    built = defaulted("TFJob", replicas, name="dist", namespace="ns", **options)
    assert isinstance(built, TFJob)
    return built


def tf_config(job_: TFJob, replica_type: str, index: int, addressing: Addressing = CLUSTER) -> str:
    [found] = TF.replica_env(job_, replica_type, index, addressing)
    assert found["name"] == "TF_CONFIG"
    value: str = found["value"]
    return value


# --- defaulting ---------------------------------------------------------------------------------


def test_replica_keys_are_recased_including_ps_chief_and_evaluator() -> None:
    built = tfjob({"ps": 1, "chief": 1, "worker": 1, "evaluator": 1})
    assert sorted(built.replica_specs) == ["Chief", "Evaluator", "PS", "Worker"]


def test_restart_policy_defaults_to_never() -> None:
    assert tfjob({"Worker": 2}).replica_specs["Worker"].restart_policy == RestartPolicy.NEVER


def test_the_tfjob_port_is_declared_on_the_tensorflow_container() -> None:
    ports = tfjob({"Worker": 2}).replica_specs["Worker"].template["spec"]["containers"][0]["ports"]
    assert ports == [{"name": "tfjob-port", "containerPort": 2222}]


def test_success_policy_defaults_to_the_empty_policy() -> None:
    assert tfjob({"Worker": 2}).spec.success_policy == SuccessPolicy.DEFAULT


def test_env_goes_only_to_the_tensorflow_container() -> None:
    assert TF.env_target == EnvTarget.DEFAULT_CONTAINER


# --- master role --------------------------------------------------------------------------------


def test_chief_pods_have_the_master_role_when_a_chief_exists() -> None:
    built = tfjob({"Chief": 1, "Worker": 2})
    assert TF.is_master_role(built, "Chief", 0)
    assert not TF.is_master_role(built, "Worker", 0)


def test_master_pods_have_the_master_role_when_a_master_exists() -> None:
    assert TF.is_master_role(tfjob({"Master": 1, "Worker": 1}), "Master", 0)


def test_worker_zero_has_the_master_role_without_chief_or_master() -> None:
    built = tfjob({"PS": 1, "Worker": 2})
    assert TF.is_master_role(built, "Worker", 0)
    assert not TF.is_master_role(built, "Worker", 1)
    assert not TF.is_master_role(built, "PS", 0)


# --- TF_CONFIG ----------------------------------------------------------------------------------


def test_tf_config_is_not_injected_for_a_single_replica_job() -> None:
    assert TF.replica_env(tfjob({"Worker": 1}), "Worker", 0, CLUSTER) == []


def test_tf_config_is_injected_for_a_single_worker_with_a_ps() -> None:
    assert tf_config(tfjob({"PS": 1, "Worker": 1}), "Worker", 0)


def test_tf_config_is_compact_go_json_with_cluster_task_environment_in_that_order() -> None:
    built = tfjob({"Worker": 2, "PS": 1, "Evaluator": 1})
    assert tf_config(built, "Worker", 1) == (
        '{"cluster":{"evaluator":["dist-evaluator-0.ns.svc:2222"],"ps":["dist-ps-0.ns.svc:2222"],'
        '"worker":["dist-worker-0.ns.svc:2222","dist-worker-1.ns.svc:2222"]},'
        '"task":{"type":"worker","index":1},"environment":"cloud"}'
    )


def test_tf_config_cluster_addresses_use_the_declared_tfjob_port() -> None:
    declared = container("tensorflow", ports=[{"name": "tfjob-port", "containerPort": 3333}])
    built = tfjob({"Worker": 2}, containers=[declared])
    assert json.loads(tf_config(built, "Worker", 0))["cluster"]["worker"][0] == "dist-worker-0.ns.svc:3333"


def test_tf_config_addresses_carry_the_custom_cluster_domain() -> None:
    config = tf_config(tfjob({"Worker": 2}), "Worker", 0, ClusterAddressing(cluster_domain="cluster.local"))
    assert json.loads(config)["cluster"]["worker"][1] == "dist-worker-1.ns.svc.cluster.local:2222"


def test_tf_config_task_type_is_the_lowercase_replica_type() -> None:
    assert json.loads(tf_config(tfjob({"PS": 1, "Worker": 1}), "PS", 0))["task"] == {"type": "ps", "index": 0}


def test_tf_config_locally_lists_loopback_addresses_with_each_replicas_port() -> None:
    local = LocalAddressing(ports={("Worker", 0): 50000, ("Worker", 1): 50001})
    config = json.loads(tf_config(tfjob({"Worker": 2}), "Worker", 1, local))
    assert config["cluster"]["worker"] == ["127.0.0.1:50000", "127.0.0.1:50001"]


def test_tf_config_sparse_form_lists_only_the_workers_own_address() -> None:
    built = tfjob({"PS": 2, "Worker": 3}, spec={"enableDynamicWorker": True})
    assert tf_config(built, "Worker", 2) == (
        '{"cluster":{"worker":{"2":"dist-worker-2.ns.svc:2222"},'
        '"ps":["dist-ps-0.ns.svc:2222","dist-ps-1.ns.svc:2222"]},"task":{"type":"worker","index":2}}'
    )


def test_tf_config_sparse_form_gives_a_ps_only_its_own_address() -> None:
    built = tfjob({"PS": 2, "Worker": 1}, spec={"enableDynamicWorker": True})
    assert tf_config(built, "PS", 1) == (
        '{"cluster":{"worker":{},"ps":["dist-ps-1.ns.svc:2222"]},"task":{"type":"ps","index":1}}'
    )


def test_tf_config_sparse_form_gives_other_types_an_empty_cluster() -> None:
    built = tfjob({"Chief": 1, "PS": 1, "Worker": 1}, spec={"enableDynamicWorker": True})
    assert json.loads(tf_config(built, "Chief", 0))["cluster"] == {"worker": {}, "ps": []}


def test_tf_config_sparse_form_of_a_worker_without_ps_has_null_ps_as_upstream() -> None:
    built = tfjob({"Worker": 2}, spec={"enableDynamicWorker": True})
    assert json.loads(tf_config(built, "Worker", 0))["cluster"]["ps"] is None


# --- validation ---------------------------------------------------------------------------------


def test_a_valid_job_has_no_errors() -> None:
    assert TF.validate(tfjob({"Chief": 1, "PS": 1, "Worker": 2})) == []


def test_chief_and_master_together_are_forbidden() -> None:
    assert [str(e) for e in TF.validate(tfjob({"Chief": 1, "Master": 1}))] == [
        "spec.tfReplicaSpecs: Forbidden: must not have more than 1 Chief or Master role"
    ]


def test_replica_types_are_not_whitelisted_as_upstream() -> None:
    assert TF.validate(tfjob({"Worker": 1, "Sidekick": 1})) == []


def test_a_replica_needs_a_container_named_tensorflow() -> None:
    assert [str(e) for e in TF.validate(tfjob({"Worker": 1}, containers=[container("tf")]))] == [
        "spec.tfReplicaSpecs.Worker.template.spec.containers: "
        "Required value: must have at least one container with name tensorflow"
    ]


# --- status -------------------------------------------------------------------------------------


def rules(
    job_: TFJob, replicas: tuple[ObservedPhase, ...] = (), **statuses: Any
) -> list[tuple[str, str, str]]:
    found = TF.status_rules(status_context(job_, statuses, replicas))
    return [(p.type.value, p.reason, p.message) for p in found]


RUNNING = ("Running", "TFJobRunning", "TFJob ns/dist is running.")
SUCCEEDED = ("Succeeded", "TFJobSucceeded", "TFJob ns/dist successfully completed.")


def test_running_when_the_chief_runs() -> None:
    assert rules(tfjob({"Chief": 1, "Worker": 2}), Chief=counted(active=1), Worker=counted(active=2)) == [
        RUNNING
    ]


def test_succeeded_when_the_chief_succeeded() -> None:
    built = tfjob({"Chief": 1, "Worker": 2})
    assert rules(built, Chief=counted(succeeded=1), Worker=counted(active=2)) == [SUCCEEDED]


def test_workers_do_not_decide_when_a_chief_exists() -> None:
    assert rules(tfjob({"Chief": 1, "Worker": 2}), Worker=counted(succeeded=2)) == []


def test_without_a_chief_the_job_runs_while_a_worker_runs() -> None:
    assert rules(tfjob({"PS": 1, "Worker": 2}), PS=counted(active=1), Worker=counted(active=1)) == [RUNNING]


def test_without_a_chief_the_job_succeeds_when_all_workers_succeeded() -> None:
    built = tfjob({"PS": 1, "Worker": 2}, spec={"successPolicy": "AllWorkers"})
    assert rules(built, PS=counted(active=1), Worker=counted(succeeded=2)) == [SUCCEEDED]


def test_without_a_chief_the_job_succeeds_when_worker_zero_exits_zero() -> None:
    worker0 = ObservedPhase("Worker", 0, "Succeeded", exit_code=0)
    assert rules(tfjob({"Worker": 3}), (worker0,), Worker=counted(active=2, succeeded=1)) == [SUCCEEDED]


def test_worker_zero_succeeding_is_not_enough_with_the_all_workers_policy() -> None:
    worker0 = ObservedPhase("Worker", 0, "Succeeded", exit_code=0)
    built = tfjob({"Worker": 3}, spec={"successPolicy": "AllWorkers"})
    assert rules(built, (worker0,), Worker=counted(active=2, succeeded=1)) == [RUNNING]


def test_worker_zero_without_a_known_exit_code_has_not_completed() -> None:
    worker0 = ObservedPhase("Worker", 0, "Succeeded", exit_code=None)
    assert rules(tfjob({"Worker": 3}), (worker0,), Worker=counted(active=2, succeeded=1)) == [RUNNING]


def test_a_failed_replica_fails_the_job() -> None:
    assert rules(tfjob({"Chief": 1, "PS": 1}), Chief=counted(active=1), PS=counted(failed=1)) == [
        RUNNING,
        ("Failed", "TFJobFailed", "TFJob ns/dist has failed because 1 PS replica(s) failed."),
    ]


def test_a_restart_under_way_keeps_the_job_restarting_instead_of_failing() -> None:
    restarting = JobCondition(
        type=ConditionType.RESTARTING,
        status=ConditionStatus.TRUE,
        reason="TFJobRestarting",
        message="job dist is restarting because Worker replica(s) failed.",
    )
    built = tfjob({"Chief": 1, "Worker": 2}).with_status(JobStatus(conditions=[restarting]))
    assert rules(built, Worker=counted(active=1, failed=1)) == [
        ("Restarting", "TFJobRestarting", "job dist is restarting because Worker replica(s) failed.")
    ]


def test_failed_workers_are_tolerated_with_dynamic_workers() -> None:
    built = tfjob({"Chief": 1, "Worker": 2}, spec={"enableDynamicWorker": True})
    assert rules(built, Chief=counted(active=1), Worker=counted(active=1, failed=1)) == [RUNNING]


def test_failed_ps_still_fails_the_job_with_dynamic_workers() -> None:
    built = tfjob({"Chief": 1, "PS": 1}, spec={"enableDynamicWorker": True})
    assert rules(built, PS=counted(failed=1))[-1][0] == "Failed"
