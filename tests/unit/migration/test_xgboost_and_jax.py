"""XGBoostJob and JAXJob → TrainJob: the program runs under sh, which exports v1's env from Trainer's."""

from __future__ import annotations

import os
import subprocess

from migrating import env_of, jobset, migrated, notes, planned_container, program

XGB_PATH = "spec.xgbReplicaSpecs.Master.template.spec.containers[0]"


def exported(command: list[str], env: dict[str, str]) -> dict[str, str]:
    """What the program sees: the shim run for real by sh, with ``env`` as Trainer's policy set it."""
    shown = [*command[:4], "env"]
    result = subprocess.run(
        shown, env={"PATH": os.environ["PATH"], **env}, capture_output=True, text=True, check=True
    )
    return dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)


def test_xgboost_master_and_workers_are_one_node_job_on_the_xgboost_policy() -> None:
    migration = migrated(
        "XGBoostJob",
        {"Master": 1, "Worker": 2},
        name="xgb",
        containers=[program("xgboost", ["python", "t.py"])],
    )
    env = env_of(planned_container(jobset(migration)))
    assert env["DMLC_NUM_WORKER"] == "3" and env["DMLC_TRACKER_URI"] == "xgb-node-0-0.xgb"


def test_xgboost_programs_see_v1s_master_addr_rank_and_world_size() -> None:
    migration = migrated(
        "XGBoostJob", {"Master": 1, "Worker": 2}, containers=[program("xgboost", ["python", "t.py"])]
    )
    command = migration.trainjob.spec.trainer.command  # type: ignore[union-attr]
    assert command is not None and command[-2:] == ["python", "t.py"]
    trainer_env = {
        "DMLC_TRACKER_URI": "j-node-0-0.j",
        "DMLC_TRACKER_PORT": "29500",
        "DMLC_TASK_ID": "2",
        "DMLC_NUM_WORKER": "3",
    }
    seen = exported(command, trainer_env)
    assert {k: seen[k] for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")} == {
        "MASTER_ADDR": "j-node-0-0.j",
        "MASTER_PORT": "29500",
        "RANK": "2",
        "WORLD_SIZE": "3",
    }


def test_xgboosts_lightgbm_worker_addresses_do_not_carry_over() -> None:
    migration = migrated(
        "XGBoostJob", {"Master": 1, "Worker": 1}, containers=[program("xgboost", ["python", "t.py"])]
    )
    assert "WORKER_ADDRS and WORKER_PORT are not set" in notes(migration)[XGB_PATH]


def test_xgboost_never_restarting_needs_a_runtime_of_its_own() -> None:
    migration = migrated("XGBoostJob", {"Master": 1}, containers=[program("xgboost", ["python", "t.py"])])
    assert migration.runtime is not None and migration.runtime.spec.ml_policy is not None
    assert migration.runtime.spec.ml_policy.xgboost is not None


def test_xgboost_env_trainer_reserves_is_dropped() -> None:
    env = [{"name": "DMLC_TASK_ID", "value": "0"}]
    migration = migrated(
        "XGBoostJob", {"Master": 1}, containers=[program("xgboost", ["python", "t.py"], env=env)]
    )
    assert "DMLC_TASK_ID dropped" in notes(migration)[f"{XGB_PATH}.env"]


def test_jax_workers_run_on_the_builtin_jax_runtime() -> None:
    migration = migrated(
        "JAXJob", {"Worker": 2}, restart_policy="OnFailure", containers=[program("jax", ["python", "t.py"])]
    )
    assert migration.runtime is None and migration.trainjob.spec.runtime_ref.name == "jax-distributed"
    assert env_of(planned_container(jobset(migration)))["JAX_NUM_PROCESSES"] == "2"


def test_jax_programs_see_v1s_coordinator_host_and_port_apart() -> None:
    migration = migrated("JAXJob", {"Worker": 2}, containers=[program("jax", ["python", "t.py"])])
    command = migration.trainjob.spec.trainer.command  # type: ignore[union-attr]
    assert command is not None
    trainer_env = {
        "JAX_COORDINATOR_ADDRESS": "j-node-0-0.j:29500",
        "JAX_NUM_PROCESSES": "2",
        "JAX_PROCESS_ID": "1",
    }
    seen = exported(command, trainer_env)
    assert {
        k: seen[k] for k in ("COORDINATOR_ADDRESS", "COORDINATOR_PORT", "NUM_PROCESSES", "PROCESS_ID")
    } == {
        "COORDINATOR_ADDRESS": "j-node-0-0.j",
        "COORDINATOR_PORT": "29500",
        "NUM_PROCESSES": "2",
        "PROCESS_ID": "1",
    }


def test_jax_without_a_command_must_read_trainers_names_and_is_told_so() -> None:
    migration = migrated("JAXJob", {"Worker": 2}, containers=[program("jax", args=["--x"])])
    assert (
        "must read Trainer's JAX_* env"
        in notes(migration)["spec.jaxReplicaSpecs.Worker.template.spec.containers[0].command"]
    )
