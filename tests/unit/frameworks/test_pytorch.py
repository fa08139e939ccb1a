"""PyTorchJob: defaulting (§1.3), env (§2.1), init container, validation (§5.1), status (§4.4)."""

from __future__ import annotations

from typing import Any

from builders import container, counted, defaulted, job, status_context
from kubetrain.api.common import CleanPodPolicy, ConditionType, RestartPolicy
from kubetrain.api.jobs import PyTorchJob
from kubetrain.frameworks.addressing import ClusterAddressing, LocalAddressing
from kubetrain.frameworks.base import EnvVar, InitSettings
from kubetrain.frameworks.pytorch import PyTorchFramework

PYTORCH = PyTorchFramework()
CLUSTER = ClusterAddressing()


def pytorchjob(replicas: dict[str, int | None], **options: Any) -> PyTorchJob:
    built = defaulted("PyTorchJob", replicas, name="mnist", **options)
    assert isinstance(built, PyTorchJob)
    return built


def env_of(job_: PyTorchJob, replica_type: str, index: int, addressing: Any = CLUSTER) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in PYTORCH.replica_env(job_, replica_type, index, addressing)}


def names(found: list[EnvVar]) -> list[str]:
    return [e["name"] for e in found]


def errors_of(job_: PyTorchJob) -> list[str]:
    return [str(e) for e in PYTORCH.validate(job_)]


# --- defaulting ---------------------------------------------------------------------------------


def test_replica_keys_are_recased_to_master_and_worker() -> None:
    built = pytorchjob({"master": 1, "WORKER": 2})
    assert list(built.replica_specs) == ["Master", "Worker"]


def test_unset_replicas_default_to_one() -> None:
    assert pytorchjob({"Master": None}).replica_specs["Master"].replicas == 1


def test_unset_restart_policy_defaults_to_on_failure() -> None:
    assert pytorchjob({"Master": 1}).replica_specs["Master"].restart_policy == RestartPolicy.ON_FAILURE


def test_a_given_restart_policy_is_kept() -> None:
    built = pytorchjob({"Master": 1}, restart_policy="ExitCode")
    assert built.replica_specs["Master"].restart_policy == RestartPolicy.EXIT_CODE


def test_the_pytorchjob_port_is_declared_on_the_pytorch_container() -> None:
    built = pytorchjob({"Master": 1}, containers=[container("sidecar"), container("pytorch")])
    containers = built.replica_specs["Master"].template["spec"]["containers"]
    assert "ports" not in containers[0]
    assert containers[1]["ports"] == [{"name": "pytorchjob-port", "containerPort": 23456}]


def test_the_port_goes_to_the_first_container_when_none_is_named_pytorch() -> None:
    built = pytorchjob({"Master": 1}, containers=[container("trainer")])
    assert (
        built.replica_specs["Master"].template["spec"]["containers"][0]["ports"][0]["containerPort"] == 23456
    )


def test_a_declared_pytorchjob_port_keeps_its_number() -> None:
    declared = container("pytorch", ports=[{"name": "pytorchjob-port", "containerPort": 30000}])
    built = pytorchjob({"Master": 1}, containers=[declared])
    assert built.replica_specs["Master"].template["spec"]["containers"][0]["ports"] == [
        {"name": "pytorchjob-port", "containerPort": 30000}
    ]


def test_defaulting_leaves_the_input_job_untouched() -> None:
    original = job("PyTorchJob", {"master": None})
    PYTORCH.set_defaults(original)  # type: ignore[arg-type]
    assert list(original.replica_specs) == ["master"]
    assert original.replica_specs["master"].replicas is None
    assert "ports" not in original.replica_specs["master"].template["spec"]["containers"][0]


def test_clean_pod_policy_defaults_to_none() -> None:
    assert pytorchjob({"Master": 1}).run_policy.clean_pod_policy == CleanPodPolicy.NONE


def test_nproc_per_node_defaults_to_auto() -> None:
    assert pytorchjob({"Master": 1}).spec.nproc_per_node == "auto"


def test_nproc_per_node_stays_unset_when_the_deprecated_elastic_nproc_per_node_is_given() -> None:
    built = pytorchjob({"Worker": 2}, spec={"elasticPolicy": {"nProcPerNode": 4}})
    assert built.spec.nproc_per_node is None


def test_elastic_min_and_max_default_to_the_worker_replicas() -> None:
    policy = pytorchjob({"Worker": 3}, spec={"elasticPolicy": {}}).spec.elastic_policy
    assert policy is not None
    assert (policy.min_replicas, policy.max_replicas) == (3, 3)


def test_elastic_min_defaults_to_a_given_max() -> None:
    policy = pytorchjob({"Worker": 2}, spec={"elasticPolicy": {"maxReplicas": 5}}).spec.elastic_policy
    assert policy is not None
    assert (policy.min_replicas, policy.max_replicas) == (5, 5)


def test_elastic_max_defaults_to_a_given_min() -> None:
    policy = pytorchjob({"Worker": 2}, spec={"elasticPolicy": {"minReplicas": 1}}).spec.elastic_policy
    assert policy is not None
    assert (policy.min_replicas, policy.max_replicas) == (1, 1)


# --- master role --------------------------------------------------------------------------------


def test_the_master_pod_has_the_master_role_when_a_master_exists() -> None:
    built = pytorchjob({"Master": 1, "Worker": 2})
    assert PYTORCH.is_master_role(built, "Master", 0)
    assert not PYTORCH.is_master_role(built, "Worker", 0)


def test_worker_zero_has_the_master_role_in_a_worker_only_job() -> None:
    built = pytorchjob({"Worker": 2})
    assert PYTORCH.is_master_role(built, "Worker", 0)
    assert not PYTORCH.is_master_role(built, "Worker", 1)


# --- env ----------------------------------------------------------------------------------------


def test_env_is_emitted_in_upstream_order_for_a_job_with_a_master() -> None:
    found = PYTORCH.replica_env(pytorchjob({"Master": 1, "Worker": 2}), "Worker", 0, CLUSTER)
    assert names(found) == [
        "PYTHONUNBUFFERED",
        "MASTER_PORT",
        "PET_MASTER_PORT",
        "MASTER_ADDR",
        "PET_MASTER_ADDR",
        "WORLD_SIZE",
        "RANK",
        "PET_NODE_RANK",
        "PET_NPROC_PER_NODE",
        "PET_NNODES",
    ]


def test_python_output_is_unbuffered() -> None:
    assert env_of(pytorchjob({"Worker": 1}), "Worker", 0)["PYTHONUNBUFFERED"] == "1"


def test_master_address_is_the_master_zero_service_and_port_the_master_pytorchjob_port() -> None:
    declared = container("pytorch", ports=[{"name": "pytorchjob-port", "containerPort": 29500}])
    found = env_of(pytorchjob({"Master": 1, "Worker": 1}, containers=[declared]), "Worker", 0)
    assert (found["MASTER_ADDR"], found["MASTER_PORT"]) == ("mnist-master-0", "29500")
    assert (found["PET_MASTER_ADDR"], found["PET_MASTER_PORT"]) == ("mnist-master-0", "29500")


def test_master_address_is_loopback_and_the_masters_allocated_port_locally() -> None:
    local = LocalAddressing(ports={("Master", 0): 41000, ("Worker", 0): 41001})
    found = env_of(pytorchjob({"Master": 1, "Worker": 1}), "Worker", 0, local)
    assert (found["MASTER_ADDR"], found["MASTER_PORT"]) == ("127.0.0.1", "41000")


def test_world_size_is_the_total_replicas_when_nproc_per_node_is_auto() -> None:
    assert env_of(pytorchjob({"Master": 1, "Worker": 3}), "Master", 0)["WORLD_SIZE"] == "4"


def test_world_size_multiplies_total_replicas_by_integer_nproc_per_node() -> None:
    built = pytorchjob({"Master": 1, "Worker": 3}, spec={"nprocPerNode": "2"})
    assert env_of(built, "Master", 0)["WORLD_SIZE"] == "8"


def test_world_size_counts_one_process_per_node_for_gpu_and_cpu() -> None:
    for keyword in ("gpu", "cpu"):
        built = pytorchjob({"Master": 1, "Worker": 1}, spec={"nprocPerNode": keyword})
        assert env_of(built, "Master", 0)["WORLD_SIZE"] == "2"


def test_master_rank_is_its_index() -> None:
    found = env_of(pytorchjob({"Master": 1, "Worker": 2}), "Master", 0)
    assert (found["RANK"], found["PET_NODE_RANK"]) == ("0", "0")


def test_worker_rank_is_index_plus_one_when_a_master_exists() -> None:
    found = env_of(pytorchjob({"Master": 1, "Worker": 2}), "Worker", 1)
    assert (found["RANK"], found["PET_NODE_RANK"]) == ("2", "2")


def test_a_worker_only_job_gets_no_master_address_world_size_or_rank() -> None:
    found = env_of(pytorchjob({"Worker": 2}), "Worker", 1)
    assert not {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "PET_NODE_RANK"} & found.keys()


def test_nproc_per_node_is_passed_to_torchrun_as_written() -> None:
    assert (
        env_of(pytorchjob({"Worker": 1}, spec={"nprocPerNode": "gpu"}), "Worker", 0)["PET_NPROC_PER_NODE"]
        == "gpu"
    )


def test_nnodes_is_the_total_replicas_without_an_elastic_policy() -> None:
    assert env_of(pytorchjob({"Master": 1, "Worker": 2}), "Worker", 0)["PET_NNODES"] == "3"


def test_elastic_env_follows_the_common_env_in_upstream_order() -> None:
    built = pytorchjob(
        {"Worker": 2},
        spec={
            "elasticPolicy": {
                "minReplicas": 1,
                "maxReplicas": 4,
                "maxRestarts": 3,
                "rdzvId": "run-1",
                "rdzvConf": [{"key": "timeout", "value": "60"}, {"key": "read_timeout", "value": "10"}],
                "standalone": True,
            }
        },
    )
    found = PYTORCH.replica_env(built, "Worker", 0, CLUSTER)
    assert names(found) == [
        "PYTHONUNBUFFERED",
        "PET_NPROC_PER_NODE",
        "PET_RDZV_ENDPOINT",
        "PET_RDZV_BACKEND",
        "PET_NNODES",
        "PET_MAX_RESTARTS",
        "PET_RDZV_ID",
        "PET_RDZV_CONF",
        "PET_STANDALONE",
    ]
    values = {e["name"]: e["value"] for e in found}
    assert values["PET_NNODES"] == "1:4"
    assert values["PET_MAX_RESTARTS"] == "3"
    assert values["PET_RDZV_ID"] == "run-1"
    assert values["PET_RDZV_CONF"] == "timeout=60,read_timeout=10"
    assert values["PET_STANDALONE"] == ""


def test_rendezvous_endpoint_defaults_to_worker_zero_and_its_pytorchjob_port() -> None:
    found = env_of(pytorchjob({"Worker": 2}, spec={"elasticPolicy": {}}), "Worker", 1)
    assert found["PET_RDZV_ENDPOINT"] == "mnist-worker-0:23456"


def test_rendezvous_endpoint_uses_the_given_host_and_port() -> None:
    built = pytorchjob({"Worker": 2}, spec={"elasticPolicy": {"rdzvHost": "etcd", "rdzvPort": 2379}})
    assert env_of(built, "Worker", 0)["PET_RDZV_ENDPOINT"] == "etcd:2379"


def test_rendezvous_endpoint_is_worker_zeros_loopback_port_locally() -> None:
    local = LocalAddressing(ports={("Worker", 0): 42000, ("Worker", 1): 42001})
    found = env_of(pytorchjob({"Worker": 2}, spec={"elasticPolicy": {}}), "Worker", 1, local)
    assert found["PET_RDZV_ENDPOINT"] == "127.0.0.1:42000"


def test_rendezvous_backend_defaults_to_c10d() -> None:
    assert (
        env_of(pytorchjob({"Worker": 1}, spec={"elasticPolicy": {}}), "Worker", 0)["PET_RDZV_BACKEND"]
        == "c10d"
    )


def test_rendezvous_backend_is_the_given_one() -> None:
    built = pytorchjob({"Worker": 1}, spec={"elasticPolicy": {"rdzvBackend": "etcd-v2"}})
    assert env_of(built, "Worker", 0)["PET_RDZV_BACKEND"] == "etcd-v2"


def test_deprecated_elastic_nproc_per_node_is_emitted_in_the_elastic_block() -> None:
    built = pytorchjob({"Worker": 1}, spec={"elasticPolicy": {"nProcPerNode": 4}})
    found = PYTORCH.replica_env(built, "Worker", 0, CLUSTER)
    assert [(e["name"], e["value"]) for e in found if e["name"] == "PET_NPROC_PER_NODE"] == [
        ("PET_NPROC_PER_NODE", "4")
    ]


def test_standalone_is_not_emitted_unless_true() -> None:
    built = pytorchjob({"Worker": 1}, spec={"elasticPolicy": {"standalone": False}})
    assert "PET_STANDALONE" not in env_of(built, "Worker", 0)


# --- init container -----------------------------------------------------------------------------


def test_workers_wait_for_the_master_service_in_an_init_container() -> None:
    built = pytorchjob({"Master": 1, "Worker": 1})
    [init] = PYTORCH.init_containers(built, "Worker", 0, CLUSTER, InitSettings())
    assert init == {
        "name": "init-pytorch",
        "image": "alpine:3.10",
        "imagePullPolicy": "IfNotPresent",
        "resources": {
            "limits": {"cpu": "100m", "memory": "20Mi"},
            "requests": {"cpu": "50m", "memory": "10Mi"},
        },
        "command": [
            "sh",
            "-c",
            "err=1;for i in $(seq 100); do if nslookup mnist-master-0; then err=0 && break; fi;"
            "echo waiting for master; sleep 2; done; exit $err",
        ],
    }


def test_the_init_container_image_and_tries_come_from_the_settings() -> None:
    built = pytorchjob({"Master": 1, "Worker": 1})
    [init] = PYTORCH.init_containers(built, "Worker", 0, CLUSTER, InitSettings("busybox:1", 5))
    assert init["image"] == "busybox:1"
    assert "$(seq 5)" in init["command"][2]


def test_the_master_and_worker_only_jobs_get_no_init_container() -> None:
    assert (
        PYTORCH.init_containers(pytorchjob({"Master": 1, "Worker": 1}), "Master", 0, CLUSTER, InitSettings())
        == []
    )
    assert PYTORCH.init_containers(pytorchjob({"Worker": 2}), "Worker", 1, CLUSTER, InitSettings()) == []


def test_local_replicas_get_no_init_container() -> None:
    local = LocalAddressing(ports={})
    assert (
        PYTORCH.init_containers(pytorchjob({"Master": 1, "Worker": 1}), "Worker", 0, local, InitSettings())
        == []
    )


# --- validation ---------------------------------------------------------------------------------


def test_a_valid_job_has_no_errors() -> None:
    assert errors_of(pytorchjob({"Master": 1, "Worker": 2})) == []


def test_master_replicas_must_be_one() -> None:
    assert errors_of(pytorchjob({"Master": 2})) == [
        "spec.pytorchReplicaSpecs.Master.replicas: Forbidden: must be 1"
    ]


def test_an_unset_master_replicas_is_accepted_because_it_defaults_to_one() -> None:
    assert errors_of(pytorchjob({"Master": None})) == []


def test_worker_replicas_must_be_at_least_one() -> None:
    assert errors_of(pytorchjob({"Master": 1, "Worker": 0})) == [
        "spec.pytorchReplicaSpecs.Worker.replicas: Forbidden: must be at least 1"
    ]


def test_replica_types_other_than_master_and_worker_are_not_supported() -> None:
    assert errors_of(pytorchjob({"Master": 1, "Chief": 1})) == [
        'spec.pytorchReplicaSpecs.Chief: Unsupported value: "Chief": supported values: "Master", "Worker"'
    ]


def test_a_replica_needs_a_container_named_pytorch() -> None:
    assert errors_of(pytorchjob({"Master": 1}, containers=[container("trainer")])) == [
        "spec.pytorchReplicaSpecs.Master.template.spec.containers: "
        "Required value: must have at least one container with name pytorch"
    ]


def test_every_container_needs_an_image() -> None:
    assert errors_of(pytorchjob({"Master": 1}, containers=[container("pytorch", image="")])) == [
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].image: Required value: must be specified"
    ]


def test_a_replica_needs_containers() -> None:
    assert errors_of(pytorchjob({"Master": 1}, containers=[])) == [
        "spec.pytorchReplicaSpecs.Master.template.spec.containers: Required value: must be specified"
    ]


def test_an_elastic_policy_needs_workers() -> None:
    assert errors_of(pytorchjob({"Master": 1}, spec={"elasticPolicy": {}})) == [
        "spec.pytorchReplicaSpecs.Worker: Required value: must be configured if elastic policy is used"
    ]


def test_deprecated_elastic_nproc_per_node_and_nproc_per_node_are_mutually_exclusive() -> None:
    built = pytorchjob({"Worker": 1}, spec={"nprocPerNode": "2", "elasticPolicy": {"nProcPerNode": 2}})
    assert errors_of(built) == [
        "spec.elasticPolicy.nProcPerNode: Forbidden: must not be used with spec.nprocPerNode"
    ]


def test_nproc_per_node_must_be_a_keyword_or_a_whole_number() -> None:
    assert errors_of(pytorchjob({"Worker": 1}, spec={"nprocPerNode": "many"})) == [
        'spec.nprocPerNode: Invalid value: "many": must be auto, cpu, gpu or a whole number'
    ]


def test_the_job_name_must_be_a_dns_1035_label() -> None:
    built = defaulted("PyTorchJob", {"Master": 1}, name="1mnist")
    [error] = PYTORCH.validate(built)  # type: ignore[arg-type]
    assert error.path == "metadata.name"
    assert error.message.startswith('Invalid value: "1mnist": should match: a DNS-1035 label must consist of')


def test_a_job_name_too_long_for_its_replica_names_says_how_long_it_may_be() -> None:
    name = "a" * 56
    built = defaulted("PyTorchJob", {"Master": 1, "Worker": 100}, name=name)
    [error] = PYTORCH.validate(built)  # type: ignore[arg-type]
    assert error.path == "metadata.name"
    assert f'"{name}-worker-99"' in error.message
    assert error.message.endswith("shorten metadata.name to at most 53 characters")


def test_managed_by_must_be_the_training_operator_or_multikueue() -> None:
    built = pytorchjob({"Master": 1}, spec={"runPolicy": {"managedBy": "someone-else"}})
    assert errors_of(built) == [
        'spec.runPolicy.managedBy: Unsupported value: "someone-else": supported values: '
        '"kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue"'
    ]


# --- status -------------------------------------------------------------------------------------


def rules(job_: PyTorchJob, **statuses: Any) -> list[tuple[ConditionType, str, str]]:
    found = PYTORCH.status_rules(status_context(job_, statuses))
    return [(p.type, p.reason, p.message) for p in found]


def test_running_when_the_master_runs() -> None:
    built = pytorchjob({"Master": 1, "Worker": 1})
    assert rules(built, Master=counted(active=1), Worker=counted(active=1)) == [
        (ConditionType.RUNNING, "PyTorchJobRunning", "PyTorchJob mnist is running.")
    ]


def test_succeeded_when_the_master_succeeded_and_workers_are_not_looked_at() -> None:
    built = pytorchjob({"Master": 1, "Worker": 1}, restart_policy="Never")
    assert rules(built, Master=counted(succeeded=1), Worker=counted(failed=1)) == [
        (ConditionType.SUCCEEDED, "PyTorchJobSucceeded", "PyTorchJob mnist is successfully completed.")
    ]


def test_worker_only_job_runs_while_a_worker_runs() -> None:
    assert rules(pytorchjob({"Worker": 2}), Worker=counted(active=1)) == [
        (ConditionType.RUNNING, "PyTorchJobRunning", "PyTorchJob default/mnist is running.")
    ]


def test_worker_only_job_succeeds_when_every_worker_succeeded() -> None:
    assert rules(pytorchjob({"Worker": 2}), Worker=counted(succeeded=2)) == [
        (ConditionType.SUCCEEDED, "PyTorchJobSucceeded", "PyTorchJob default/mnist successfully completed.")
    ]


def test_worker_only_job_does_not_succeed_while_a_worker_is_unfinished() -> None:
    assert rules(pytorchjob({"Worker": 2}), Worker=counted(active=1, succeeded=1)) == [
        (ConditionType.RUNNING, "PyTorchJobRunning", "PyTorchJob default/mnist is running.")
    ]


def test_elastic_job_succeeds_when_any_worker_succeeded() -> None:
    built = pytorchjob({"Worker": 3}, spec={"elasticPolicy": {}})
    assert rules(built, Worker=counted(active=2, succeeded=1))[0][0] == ConditionType.SUCCEEDED


def test_a_failed_replica_restarts_the_job_unless_its_policy_is_never() -> None:
    built = pytorchjob({"Master": 1, "Worker": 2})
    assert rules(built, Master=counted(active=1), Worker=counted(active=1, failed=1))[-1] == (
        ConditionType.RESTARTING,
        "PyTorchJobRestarting",
        "PyTorchJob mnist is restarting because 1 Worker replica(s) failed.",
    )


def test_a_failed_replica_with_restart_policy_never_fails_the_job() -> None:
    built = pytorchjob({"Master": 1, "Worker": 2}, restart_policy="Never")
    assert rules(built, Master=counted(active=1), Worker=counted(active=1, failed=1))[-1] == (
        ConditionType.FAILED,
        "PyTorchJobFailed",
        "PyTorchJob mnist is failed because 1 Worker replica(s) failed.",
    )


def test_a_failure_already_made_up_by_running_replicas_changes_nothing() -> None:
    built = pytorchjob({"Master": 1, "Worker": 2}, restart_policy="Never")
    assert rules(built, Master=counted(active=1), Worker=counted(active=2, failed=1)) == [
        (ConditionType.RUNNING, "PyTorchJobRunning", "PyTorchJob mnist is running.")
    ]
