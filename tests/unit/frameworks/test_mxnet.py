"""MXJob: defaulting (§1.3), MX_CONFIG and DMLC env (§2.6), validation (§5.1), status (§4.4)."""

from __future__ import annotations

import json
from typing import Any

from builders import counted, defaulted, manifest, status_context
from kubetrain.api.jobs import MXJob
from kubetrain.api.manifest import parse_job
from kubetrain.frameworks.addressing import ClusterAddressing, LocalAddressing
from kubetrain.frameworks.mxnet import MXNetFramework

MX = MXNetFramework()
CLUSTER = ClusterAddressing()


def mxjob(replicas: dict[str, int | None], **options: Any) -> MXJob:
    built = defaulted("MXJob", replicas, name="mx", **options)
    assert isinstance(built, MXJob)
    return built


def env_of(job_: MXJob, replica_type: str, index: int, addressing: Any = CLUSTER) -> dict[str, str]:
    return {e["name"]: e["value"] for e in MX.replica_env(job_, replica_type, index, addressing)}


def test_scheduler_server_and_worker_keys_are_recased_but_tuner_keys_are_not() -> None:
    assert sorted(mxjob({"scheduler": 1, "server": 1, "worker": 1, "tuner": 1}).replica_specs) == [
        "Scheduler",
        "Server",
        "Worker",
        "tuner",
    ]


def test_the_mxjob_port_is_declared_on_the_mxnet_container() -> None:
    ports = mxjob({"Worker": 1}).replica_specs["Worker"].template["spec"]["containers"][0]["ports"]
    assert ports == [{"name": "mxjob-port", "containerPort": 9091}]


def test_server_pods_have_the_master_role() -> None:
    built = mxjob({"Scheduler": 1, "Server": 1, "Worker": 1})
    assert MX.is_master_role(built, "Server", 0)
    assert not MX.is_master_role(built, "Scheduler", 0)


def test_mx_config_lists_every_replica_with_url_and_port_labels_and_task() -> None:
    built = mxjob({"Scheduler": 1, "Server": 1, "Worker": 2})
    assert env_of(built, "Worker", 1)["MX_CONFIG"] == (
        '{"cluster":{"scheduler":[{"url":"mx-scheduler-0","port":9091}],'
        '"server":[{"url":"mx-server-0","port":9091}],'
        '"worker":[{"url":"mx-worker-0","port":9091},{"url":"mx-worker-1","port":9091}]},'
        '"labels":{"scheduler":"","server":"","worker":""},"task":{"type":"worker","index":1}}'
    )


def test_mx_config_labels_carry_the_tuner_server_key_annotation() -> None:
    raw = manifest("MXJob", {"TunerServer": 1, "Tuner": 1}, name="mx")
    raw["spec"]["mxReplicaSpecs"]["TunerServer"]["template"]["metadata"] = {
        "annotations": {"tuner-server-key": "ts"}
    }
    built = MX.set_defaults(parse_job(raw))  # type: ignore[arg-type]
    config = json.loads(env_of(built, "Tuner", 0)["MX_CONFIG"])
    assert config["labels"] == {"tuner": "", "tunerserver": "ts"}


def test_dmlc_env_follows_mx_config_in_upstream_order() -> None:
    found = MX.replica_env(mxjob({"Scheduler": 1, "Server": 2, "Worker": 3}), "Worker", 2, CLUSTER)
    assert [(e["name"], e["value"]) for e in found][1:] == [
        ("DMLC_PS_ROOT_PORT", "9091"),
        ("DMLC_PS_ROOT_URI", "mx-scheduler-0"),
        ("DMLC_NUM_SERVER", "2"),
        ("DMLC_NUM_WORKER", "3"),
        ("DMLC_ROLE", "worker"),
        ("DMLC_USE_KUBERNETES", "1"),
        ("DMLC_WORKER_ID", "2"),
    ]


def test_without_a_scheduler_the_root_uri_is_empty_and_the_port_zero() -> None:
    found = env_of(mxjob({"Worker": 1}), "Worker", 0)
    assert (found["DMLC_PS_ROOT_URI"], found["DMLC_PS_ROOT_PORT"]) == ("", "0")


def test_only_workers_get_a_worker_id() -> None:
    assert "DMLC_WORKER_ID" not in env_of(mxjob({"Scheduler": 1, "Server": 1, "Worker": 1}), "Server", 0)


def test_locally_the_scheduler_is_reached_on_loopback_at_its_port() -> None:
    local = LocalAddressing(ports={("Scheduler", 0): 45000, ("Worker", 0): 45001})
    found = env_of(mxjob({"Scheduler": 1, "Worker": 1}), "Worker", 0, local)
    assert (found["DMLC_PS_ROOT_URI"], found["DMLC_PS_ROOT_PORT"]) == ("127.0.0.1", "45000")


def test_more_than_one_scheduler_is_forbidden() -> None:
    assert [str(e) for e in MX.validate(mxjob({"Scheduler": 2, "Worker": 1}))] == [
        "spec.mxReplicaSpecs.Scheduler.replicas: Forbidden: must not be more than 1"
    ]


def rules(job_: MXJob, **statuses: Any) -> list[tuple[str, str, str]]:
    return [(p.type.value, p.reason, p.message) for p in MX.status_rules(status_context(job_, statuses))]


def test_the_scheduler_decides_running_and_success() -> None:
    built = mxjob({"Scheduler": 1, "Server": 1, "Worker": 2})
    assert rules(built, Scheduler=counted(active=1)) == [("Running", "MXJobRunning", "MXJob mx is running.")]
    assert rules(built, Scheduler=counted(succeeded=1)) == [
        ("Succeeded", "MXJobSucceeded", "MXJob mx is successfully completed.")
    ]


def test_a_single_worker_job_is_decided_by_its_worker() -> None:
    assert rules(mxjob({"Worker": 1}), Worker=counted(succeeded=1))[-1][0] == "Succeeded"


def test_a_failed_replica_fails_the_job_unless_its_policy_is_exit_code() -> None:
    built = mxjob({"Scheduler": 1, "Worker": 2})
    assert rules(built, Scheduler=counted(active=1), Worker=counted(failed=1))[-1] == (
        "Failed",
        "MXJobFailed",
        "MXJob mx is failed because 1 Worker replica(s) failed.",
    )
    exit_code = mxjob({"Scheduler": 1, "Worker": 2}, restart_policy="ExitCode")
    assert rules(exit_code, Scheduler=counted(active=1), Worker=counted(failed=1))[-1][:2] == (
        "Restarting",
        "MXJobRestarting",
    )
