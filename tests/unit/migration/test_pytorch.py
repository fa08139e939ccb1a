"""PyTorchJob → TrainJob on the torch policy: one node job of Master + Workers, the program under torchrun."""

from __future__ import annotations

import pytest
from migrating import (
    env_of,
    jobset,
    migrate_manifest,
    migrated,
    migrated_pod,
    notes,
    planned_container,
    program,
    replicated,
    trainer,
)

from builders import manifest
from kubetrain.frameworks.migration.pytorch import under_torchrun

DDP = [program("pytorch", ["python", "train.py"], ["--steps", "60"])]
PATH = "spec.pytorchReplicaSpecs.Master.template.spec.containers[0]"


def test_master_and_workers_become_one_node_job_whose_node_0_is_the_rendezvous() -> None:
    migration = migrated("PyTorchJob", {"Master": 1, "Worker": 2}, name="ddp", containers=DDP)
    planned = jobset(migration)
    assert trainer(migration)["numNodes"] == 3
    assert replicated(planned, "node")["template"]["spec"]["parallelism"] == 3
    env = env_of(planned_container(planned))
    assert env["PET_NNODES"] == "3" and env["PET_MASTER_ADDR"] == "ddp-node-0-0.ddp"


def test_a_python_program_runs_under_torchrun_one_process_per_node() -> None:
    migration = migrated("PyTorchJob", {"Master": 1, "Worker": 1}, containers=DDP)
    assert trainer(migration)["command"] == ["torchrun", "train.py"]
    assert trainer(migration)["args"] == ["--steps", "60"]
    assert trainer(migration)["numProcPerNode"] == 1
    assert (
        "torchrun sets MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE" in notes(migration)[f"{PATH}.command"]
    )


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["python3", "-m", "pkg.train", "--lr", "1"], ["torchrun", "-m", "pkg.train", "--lr", "1"]),
        (["/usr/bin/python3.12", "train.py"], ["torchrun", "train.py"]),
        (["python", "-u", "train.py"], ["torchrun", "--no-python", "python", "-u", "train.py"]),
        (["bash", "-c", "python train.py"], ["torchrun", "--no-python", "bash", "-c", "python train.py"]),
    ],
)
def test_torchrun_starts_a_module_as_a_module_and_anything_else_without_python(
    command: list[str], expected: list[str]
) -> None:
    assert under_torchrun(command) == expected


def test_a_job_that_runs_torchrun_keeps_its_command_and_nproc_per_node() -> None:
    containers = [program("pytorch", ["torchrun", "train.py"])]
    migration = migrated("PyTorchJob", {"Worker": 2}, spec={"nprocPerNode": "4"}, containers=containers)
    assert trainer(migration)["command"] == ["torchrun", "train.py"]
    assert trainer(migration)["numProcPerNode"] == 4


def test_nproc_per_node_cpu_is_dropped_with_a_note() -> None:
    containers = [program("pytorch", ["torchrun", "train.py"])]
    migration = migrated("PyTorchJob", {"Worker": 2}, spec={"nprocPerNode": "cpu"}, containers=containers)
    assert "numProcPerNode" not in trainer(migration)
    assert "cpu is dropped" in notes(migration)["spec.nprocPerNode"]


def test_a_worker_only_job_keeps_its_command_as_v1_gave_it_no_master_addr() -> None:
    migration = migrated("PyTorchJob", {"Worker": 2}, containers=DDP)
    assert trainer(migration)["command"] == ["python", "train.py"]


def test_a_container_without_command_cannot_run_under_torchrun_and_says_so() -> None:
    migration = migrated("PyTorchJob", {"Master": 1}, containers=[program("pytorch", args=["--steps", "1"])])
    assert "command" not in trainer(migration)
    assert "cannot start it under torchrun" in notes(migration)[f"{PATH}.command"]


def test_the_elastic_policy_is_dropped_and_the_worker_count_kept() -> None:
    containers = [program("pytorch", ["torchrun", "train.py"])]
    spec = {"elasticPolicy": {"minReplicas": 2, "maxReplicas": 4, "maxRestarts": 3}}
    migration = migrated("PyTorchJob", {"Worker": 3}, spec=spec, containers=containers)
    assert trainer(migration)["numNodes"] == 3
    assert "Trainer v2.3 has no elastic training" in notes(migration)["spec.elasticPolicy"]


def test_pet_env_the_user_set_is_dropped_as_trainer_sets_and_refuses_it() -> None:
    env = [{"name": "PET_NNODES", "value": "2:3"}, {"name": "LR", "value": "0.1"}]
    migration = migrated(
        "PyTorchJob", {"Master": 1}, containers=[program("pytorch", ["python", "t.py"], env=env)]
    )
    assert [e["name"] for e in trainer(migration)["env"]] == ["LR", "PYTHONUNBUFFERED"]
    assert "PET_NNODES dropped" in notes(migration)[f"{PATH}.env"]


def test_python_unbuffered_is_set_as_v1_set_it_unless_the_user_did() -> None:
    env = [{"name": "PYTHONUNBUFFERED", "value": "0"}]
    migration = migrated(
        "PyTorchJob", {"Master": 1}, containers=[program("pytorch", ["python", "t.py"], env=env)]
    )
    assert trainer(migration)["env"] == env


def test_a_pod_the_trainjob_can_describe_whole_runs_on_the_builtin_torch_runtime() -> None:
    resources = {"limits": {"nvidia.com/gpu": 1}}
    containers = [program("pytorch", ["python", "t.py"], resources=resources)]
    migration = migrated("PyTorchJob", {"Master": 1, "Worker": 1}, containers=containers)
    assert migration.runtime is None
    assert migration.trainjob.spec.runtime_ref.name == "torch-distributed"
    assert trainer(migration)["resourcesPerNode"] == resources
    assert "retries them 6 times" in notes(migration)["spec.runPolicy.backoffLimit"]


def test_the_v1_rendezvous_port_is_left_to_trainer_and_does_not_need_a_runtime() -> None:
    ports = [{"name": "pytorchjob-port", "containerPort": 23456}]
    migration = migrated(
        "PyTorchJob", {"Master": 1}, containers=[program("pytorch", ["python", "t.py"], ports=ports)]
    )
    assert migration.runtime is None
    assert planned_container(jobset(migration))["ports"] == [{"containerPort": 29500}]


def test_a_pod_with_a_volume_gets_a_runtime_of_its_own_named_after_the_job() -> None:
    containers = [
        program("pytorch", ["python", "t.py"], volumeMounts=[{"name": "data", "mountPath": "/data"}])
    ]
    pod = {"volumes": [{"name": "data", "emptyDir": {}}]}
    migration = migrated_pod(
        "PyTorchJob", {"Master": 1, "Worker": 1}, pod, name="ddp", namespace="team", containers=containers
    )
    assert migration.runtime is not None
    assert (migration.runtime.name, migration.runtime.metadata.namespace) == ("ddp", "team")
    assert migration.trainjob.spec.runtime_ref.kind == "TrainingRuntime"
    assert migration.trainjob.spec.runtime_ref.name == "ddp"
    planned = jobset(migration)
    node = planned_container(planned)
    assert node["volumeMounts"] == [{"name": "data", "mountPath": "/data"}]
    assert node["command"] == ["torchrun", "t.py"], "the TrainJob's program, in the runtime's container"
    assert replicated(planned, "node")["template"]["spec"]["template"]["spec"]["volumes"] == pod["volumes"]


def test_the_runtime_carries_the_ml_policy_and_the_framework_label_the_sdk_lists() -> None:
    containers = [program("pytorch", ["python", "t.py"], workingDir="/app")]
    migration = migrated("PyTorchJob", {"Master": 1, "Worker": 3}, containers=containers)
    assert migration.runtime is not None
    wire = migration.runtime.to_wire()
    assert wire["metadata"]["labels"] == {"trainer.kubeflow.org/framework": "torch"}
    assert wire["spec"]["mlPolicy"] == {"numNodes": 4, "torch": {}}


def test_a_worker_template_that_differs_from_the_masters_is_named_in_a_note() -> None:
    written = manifest("PyTorchJob", {"Master": 1, "Worker": 2}, containers=DDP)
    written["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"] = "other:2"
    migration = migrate_manifest(written)
    note = notes(migration)["spec.pytorchReplicaSpecs.Worker.template"]
    assert "spec.containers[0].image" in note and "the Master's" in note
    assert trainer(migration)["image"] == "trainer:1"
