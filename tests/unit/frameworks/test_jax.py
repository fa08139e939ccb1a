"""JAXJob: defaulting (§1.3), env (§2.5), validation (§5.1), status (§4.4)."""

from __future__ import annotations

from typing import Any

from builders import counted, defaulted, status_context
from kubetrain.api.common import RestartPolicy
from kubetrain.api.jobs import JAXJob
from kubetrain.frameworks.addressing import ClusterAddressing, LocalAddressing
from kubetrain.frameworks.jax import JAXFramework

JAX = JAXFramework()
CLUSTER = ClusterAddressing()


def jaxjob(replicas: dict[str, int | None], **options: Any) -> JAXJob:
    built = defaulted("JAXJob", replicas, name="jx", namespace="ml", **options)
    assert isinstance(built, JAXJob)
    return built


def test_restart_policy_defaults_to_never() -> None:
    assert jaxjob({"worker": 2}).replica_specs["Worker"].restart_policy == RestartPolicy.NEVER


def test_the_jaxjob_port_is_declared_on_the_jax_container() -> None:
    ports = jaxjob({"Worker": 1}).replica_specs["Worker"].template["spec"]["containers"][0]["ports"]
    assert ports == [{"name": "jaxjob-port", "containerPort": 6666}]


def test_index_zero_has_the_master_role() -> None:
    built = jaxjob({"Worker": 2})
    assert JAX.is_master_role(built, "Worker", 0)
    assert not JAX.is_master_role(built, "Worker", 1)


def test_env_names_the_coordinator_at_worker_zero_in_upstream_order() -> None:
    found = [(e["name"], e["value"]) for e in JAX.replica_env(jaxjob({"Worker": 3}), "Worker", 2, CLUSTER)]
    assert found == [
        ("PYTHONUNBUFFERED", "1"),
        ("COORDINATOR_PORT", "6666"),
        ("COORDINATOR_ADDRESS", "jx-worker-0"),
        ("NUM_PROCESSES", "3"),
        ("PROCESS_ID", "2"),
    ]


def test_the_coordinator_is_worker_zeros_loopback_port_locally() -> None:
    local = LocalAddressing(ports={("Worker", 0): 43000, ("Worker", 1): 43001})
    found = {e["name"]: e["value"] for e in JAX.replica_env(jaxjob({"Worker": 2}), "Worker", 1, local)}
    assert (found["COORDINATOR_ADDRESS"], found["COORDINATOR_PORT"]) == ("127.0.0.1", "43000")


def test_only_workers_are_supported() -> None:
    assert [str(e) for e in JAX.validate(jaxjob({"Worker": 1, "Master": 1}))] == [
        'spec.jaxReplicaSpecs.Master: Unsupported value: "Master": supported values: "Worker"'
    ]


def rules(job_: JAXJob, **statuses: Any) -> list[tuple[str, str, str]]:
    return [(p.type.value, p.reason, p.message) for p in JAX.status_rules(status_context(job_, statuses))]


def test_running_while_a_worker_runs() -> None:
    assert rules(jaxjob({"Worker": 2}), Worker=counted(active=1)) == [
        ("Running", "JAXJobRunning", "JAXJob ml/jx is running.")
    ]


def test_succeeded_when_every_worker_succeeded() -> None:
    assert rules(jaxjob({"Worker": 2}), Worker=counted(succeeded=2)) == [
        ("Succeeded", "JAXJobSucceeded", "JAXJob ml/jx successfully completed.")
    ]


def test_a_failed_worker_fails_the_job_under_restart_policy_never() -> None:
    assert rules(jaxjob({"Worker": 2}), Worker=counted(active=1, failed=1))[-1] == (
        "Failed",
        "JAXJobFailed",
        "JAXJob jx is failed because 1 Worker replica(s) failed.",
    )


def test_a_failed_worker_restarts_the_job_under_on_failure() -> None:
    built = jaxjob({"Worker": 2}, restart_policy="OnFailure")
    assert rules(built, Worker=counted(active=1, failed=1))[-1][:2] == ("Restarting", "JAXJobRestarting")
