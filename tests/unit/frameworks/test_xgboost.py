"""XGBoostJob: defaulting (§1.3), env (§2.3), validation (§5.1), status (§4.4)."""

from __future__ import annotations

from typing import Any

from builders import counted, defaulted, status_context
from kubetrain.api.common import ConditionStatus, ConditionType, JobCondition, JobStatus, RestartPolicy
from kubetrain.api.jobs import XGBoostJob
from kubetrain.frameworks.addressing import ClusterAddressing, LocalAddressing
from kubetrain.frameworks.xgboost import XGBoostFramework

XGB = XGBoostFramework()
CLUSTER = ClusterAddressing()


def xgbjob(replicas: dict[str, int | None], **options: Any) -> XGBoostJob:
    built = defaulted("XGBoostJob", replicas, name="xgb", **options)
    assert isinstance(built, XGBoostJob)
    return built


def env_of(
    job_: XGBoostJob, replica_type: str, index: int, addressing: Any = CLUSTER
) -> list[tuple[str, str]]:
    return [(e["name"], e["value"]) for e in XGB.replica_env(job_, replica_type, index, addressing)]


def test_restart_policy_defaults_to_never() -> None:
    assert xgbjob({"Master": 1}).replica_specs["Master"].restart_policy == RestartPolicy.NEVER


def test_the_xgboostjob_port_is_declared_on_the_xgboost_container() -> None:
    ports = xgbjob({"Master": 1}).replica_specs["Master"].template["spec"]["containers"][0]["ports"]
    assert ports == [{"name": "xgboostjob-port", "containerPort": 9999}]


def test_only_master_pods_have_the_master_role() -> None:
    built = xgbjob({"Master": 1, "Worker": 2})
    assert XGB.is_master_role(built, "Master", 0)
    assert not XGB.is_master_role(built, "Worker", 0)


def test_worker_env_in_upstream_order_with_the_lightgbm_worker_list() -> None:
    assert env_of(xgbjob({"Master": 1, "Worker": 2}), "Worker", 1) == [
        ("MASTER_PORT", "9999"),
        ("MASTER_ADDR", "xgb-master-0"),
        ("WORLD_SIZE", "3"),
        ("RANK", "2"),
        ("PYTHONUNBUFFERED", "1"),
        ("WORKER_PORT", "9999"),
        ("WORKER_ADDRS", "xgb-worker-0,xgb-worker-1"),
    ]


def test_master_rank_is_its_index() -> None:
    assert ("RANK", "0") in env_of(xgbjob({"Master": 1, "Worker": 2}), "Master", 0)


def test_worker_rank_is_offset_by_the_master_replicas() -> None:
    assert ("RANK", "1") in env_of(xgbjob({"Master": 1, "Worker": 2}), "Worker", 0)


def test_a_master_only_job_gets_no_worker_port_or_addresses() -> None:
    assert [name for name, _ in env_of(xgbjob({"Master": 1}), "Master", 0)] == [
        "MASTER_PORT",
        "MASTER_ADDR",
        "WORLD_SIZE",
        "RANK",
        "PYTHONUNBUFFERED",
    ]


def test_addresses_are_loopback_with_allocated_ports_locally() -> None:
    local = LocalAddressing(ports={("Master", 0): 40000, ("Worker", 0): 40001, ("Worker", 1): 40002})
    found = dict(env_of(xgbjob({"Master": 1, "Worker": 2}), "Worker", 0, local))
    assert (found["MASTER_ADDR"], found["MASTER_PORT"]) == ("127.0.0.1", "40000")
    assert (found["WORKER_ADDRS"], found["WORKER_PORT"]) == ("127.0.0.1,127.0.0.1", "40001")


def test_a_master_is_required() -> None:
    assert [str(e) for e in XGB.validate(xgbjob({"Worker": 2}))] == [
        "spec.xgbReplicaSpecs.Master: Required value: must be present"
    ]


def test_master_replicas_must_be_one() -> None:
    assert [str(e) for e in XGB.validate(xgbjob({"Master": 2}))] == [
        "spec.xgbReplicaSpecs.Master.replicas: Forbidden: must be 1"
    ]


def test_replica_types_other_than_master_and_worker_are_not_supported() -> None:
    assert [str(e) for e in XGB.validate(xgbjob({"Master": 1, "PS": 1}))] == [
        'spec.xgbReplicaSpecs.PS: Unsupported value: "PS": supported values: "Master", "Worker"'
    ]


def rules(job_: XGBoostJob, **statuses: Any) -> list[tuple[str, str, str]]:
    return [(p.type.value, p.reason, p.message) for p in XGB.status_rules(status_context(job_, statuses))]


RUNNING = ("Running", "XGBoostJobRunning", "XGBoostJob xgb is running.")


def test_running_when_the_master_runs() -> None:
    assert rules(xgbjob({"Master": 1, "Worker": 1}), Master=counted(active=1), Worker=counted(active=1)) == [
        RUNNING
    ]


def test_success_is_preceded_by_running_when_the_job_never_showed_running() -> None:
    assert rules(xgbjob({"Master": 1, "Worker": 1}), Master=counted(succeeded=1)) == [
        RUNNING,
        ("Succeeded", "XGBoostJobSucceeded", "XGBoostJob xgb is successfully completed."),
    ]


def test_success_adds_no_running_once_the_job_has_a_running_condition() -> None:
    running = JobCondition(
        type=ConditionType.RUNNING, status=ConditionStatus.FALSE, reason="XGBoostJobRunning"
    )
    built = xgbjob({"Master": 1}).with_status(JobStatus(conditions=[running]))
    assert [r[0] for r in rules(built, Master=counted(succeeded=1))] == ["Succeeded"]


def test_failure_is_preceded_by_running_when_the_job_never_showed_running() -> None:
    assert [r[0] for r in rules(xgbjob({"Master": 1, "Worker": 1}), Worker=counted(failed=1))] == [
        "Running",
        "Failed",
    ]


def test_a_failed_replica_fails_the_job_unless_its_policy_is_exit_code() -> None:
    assert rules(
        xgbjob({"Master": 1, "Worker": 2}), Master=counted(active=1), Worker=counted(active=1, failed=1)
    ) == [
        RUNNING,
        ("Failed", "XGBoostJobFailed", "XGBoostJob xgb is failed because 1 Worker replica(s) failed."),
    ]


def test_a_failed_replica_with_exit_code_policy_restarts_the_job() -> None:
    built = xgbjob({"Master": 1, "Worker": 2}, restart_policy="ExitCode")
    assert rules(built, Master=counted(active=1), Worker=counted(active=1, failed=1))[-1] == (
        "Restarting",
        "XGBoostJobRestarting",
        "XGBoostJob xgb is restarting because 1 Worker replica(s) failed.",
    )


def test_on_failure_policy_still_fails_the_job_as_upstream() -> None:
    built = xgbjob({"Master": 1, "Worker": 1}, restart_policy="OnFailure")
    assert rules(built, Master=counted(active=1), Worker=counted(failed=1))[-1][0] == "Failed"
