"""MPIJob → TrainJob on the mpi policy: the Worker as the node job, the Launcher as the trainer job."""

from __future__ import annotations

from typing import Any

import pytest
from migrating import env_of, jobset, migrate_manifest, notes, planned_container, replicated, trainer

from builders import container, manifest
from kubetrain.api.jobs import V2BETA1
from kubetrain.frameworks.migration import Migration, NotMigratableError

LAUNCHER = {"command": ["mpirun", "python", "allreduce.py"]}


def mpijob(
    workers: int = 2, *, spec: dict[str, Any] | None = None, api_version: str = V2BETA1, **worker: Any
) -> Migration:
    """An MPIJob ``pi`` of one launcher running mpirun and ``workers`` workers (``worker``: their container's
    fields), migrated."""
    written = manifest(
        "MPIJob", {"Launcher": 1, "Worker": workers}, name="pi", api_version=api_version, spec=spec or {}
    )
    specs = written["spec"]["mpiReplicaSpecs"]
    specs["Launcher"]["template"]["spec"]["containers"] = [container("launcher", "mpi:1", **LAUNCHER)]
    specs["Worker"]["template"]["spec"]["containers"] = [container("worker", "mpi:1", **worker)]
    return migrate_manifest(written)


def test_the_launcher_is_the_trainer_job_and_the_workers_the_nodes() -> None:
    planned = jobset(mpijob(3))
    assert [j["name"] for j in planned["spec"]["replicatedJobs"]] == ["node", "launcher"]
    assert replicated(planned, "node")["template"]["spec"]["parallelism"] == 3
    assert replicated(planned, "launcher")["template"]["spec"]["parallelism"] == 1


def test_the_job_succeeds_when_the_launcher_does() -> None:
    assert jobset(mpijob())["spec"]["successPolicy"] == {
        "operator": "All",
        "targetReplicatedJobs": ["launcher"],
    }


def test_the_launcher_program_is_the_trainjobs() -> None:
    migration = mpijob()
    assert trainer(migration) == {
        "image": "mpi:1",
        "command": ["mpirun", "python", "allreduce.py"],
        "numNodes": 2,
    }


def test_slots_per_worker_are_the_hostfiles_slots() -> None:
    migration = mpijob(2, spec={"slotsPerWorker": 4})
    assert env_of(planned_container(jobset(migration), "launcher"))["OMPI_MCA_orte_set_default_slots"] == "4"


def test_workers_without_a_command_run_sshd_as_mpi_operator_made_them() -> None:
    assert planned_container(jobset(mpijob()), "node")["command"] == ["/usr/sbin/sshd", "-De"]


def test_a_workers_own_command_is_kept() -> None:
    node = planned_container(jobset(mpijob(command=["/start-sshd.sh"])), "node")
    assert node["command"] == ["/start-sshd.sh"]


def test_the_hostfiles_new_names_are_noted() -> None:
    assert "pi-node-0-<i>.pi (they were pi-worker-<i>)" in notes(mpijob())["spec.mpiReplicaSpecs"]


def test_mpi_operators_role_env_carries_over() -> None:
    planned = jobset(mpijob())
    assert env_of(planned_container(planned, "node"))["K_MPI_JOB_ROLE"] == "worker"
    assert env_of(planned_container(planned, "launcher"))["K_MPI_JOB_ROLE"] == "launcher"


def test_waiting_for_workers_ready_makes_the_launcher_depend_on_the_nodes() -> None:
    planned = jobset(mpijob(spec={"launcherCreationPolicy": "WaitForWorkersReady"}))
    assert replicated(planned, "launcher")["dependsOn"] == [{"name": "node", "status": "Ready"}]


def test_running_the_launcher_as_a_worker_makes_it_a_node_too() -> None:
    migration = mpijob(2, spec={"runLauncherAsWorker": True})
    assert trainer(migration)["numNodes"] == 3
    assert migration.runtime is not None and migration.runtime.spec.ml_policy is not None
    assert (
        migration.runtime.spec.ml_policy.mpi is not None
        and migration.runtime.spec.ml_policy.mpi.run_launcher_as_node
    )
    assert replicated(jobset(migration), "node")["template"]["spec"]["parallelism"] == 2


def test_the_launchers_backoff_limit_is_the_run_policys_as_mpi_operators_launcher_job() -> None:
    planned = jobset(mpijob(spec={"runPolicy": {"backoffLimit": 2}}))
    assert replicated(planned, "launcher")["template"]["spec"]["backoffLimit"] == 2
    assert replicated(planned, "node")["template"]["spec"]["backoffLimit"] == 0


def test_intel_mpi_is_refused_as_trainer_writes_for_openmpi_only() -> None:
    with pytest.raises(NotMigratableError) as refused:
        mpijob(spec={"mpiImplementation": "Intel"})
    assert [r.path for r in refused.value.reasons] == ["spec.mpiImplementation"]


def test_a_launcher_without_workers_is_refused() -> None:
    with pytest.raises(NotMigratableError) as refused:
        mpijob(0)
    assert [r.path for r in refused.value.reasons] == ["spec.mpiReplicaSpecs.Worker.replicas"]


def test_a_v1_mpijob_reaches_its_workers_over_ssh_now_and_says_so() -> None:
    migration = mpijob(api_version="kubeflow.org/v1")
    assert "kubectl exec" in notes(migration)["apiVersion"]
    assert "sshd -De" in notes(migration)["spec.mpiReplicaSpecs.Worker.template.spec.containers[0].command"]
    assert jobset(migration)["spec"]["successPolicy"]["targetReplicatedJobs"] == ["launcher"]
