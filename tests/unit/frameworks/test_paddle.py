"""PaddleJob: defaulting (§1.3), env in collective and PS modes (§2.4), validation (§5.1), status (§4.4)."""

from __future__ import annotations

from typing import Any

from builders import container, counted, defaulted, status_context
from kubetrain.api.common import RestartPolicy
from kubetrain.api.jobs import PaddleJob
from kubetrain.frameworks.addressing import ClusterAddressing, LocalAddressing
from kubetrain.frameworks.base import EnvVar
from kubetrain.frameworks.paddle import PaddleFramework

PADDLE = PaddleFramework()
CLUSTER = ClusterAddressing()
POD_IP = {"name": "POD_IP_DUMMY", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def paddlejob(replicas: dict[str, int | None], **options: Any) -> PaddleJob:
    built = defaulted("PaddleJob", replicas, name="pd", **options)
    assert isinstance(built, PaddleJob)
    return built


def env_of(job_: PaddleJob, replica_type: str, index: int, addressing: Any = CLUSTER) -> list[EnvVar]:
    return PADDLE.replica_env(job_, replica_type, index, addressing)


def test_restart_policy_defaults_to_on_failure() -> None:
    assert paddlejob({"Worker": 2}).replica_specs["Worker"].restart_policy == RestartPolicy.ON_FAILURE


def test_the_master_port_is_declared_on_the_paddle_container() -> None:
    ports = paddlejob({"Worker": 1}).replica_specs["Worker"].template["spec"]["containers"][0]["ports"]
    assert ports == [{"name": "master", "containerPort": 36543}]


def test_elastic_bounds_default_like_pytorch() -> None:
    policy = paddlejob({"Worker": 4}, spec={"elasticPolicy": {"minReplicas": 2}}).spec.elastic_policy
    assert policy is not None
    assert (policy.min_replicas, policy.max_replicas) == (2, 2)
    unset = paddlejob({"Worker": 4}, spec={"elasticPolicy": {}}).spec.elastic_policy
    assert unset is not None
    assert (unset.min_replicas, unset.max_replicas) == (4, 4)


def test_master_pods_have_the_master_role_and_a_worker_only_job_has_none() -> None:
    assert PADDLE.is_master_role(paddlejob({"Master": 1, "Worker": 1}), "Master", 0)
    assert not PADDLE.is_master_role(paddlejob({"Worker": 2}), "Worker", 0)


def test_collective_worker_zero_advertises_its_own_pod_ip() -> None:
    assert env_of(paddlejob({"Worker": 2}), "Worker", 0) == [
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "PADDLE_JOB_ID", "value": "pd"},
        {"name": "PADDLE_NNODES", "value": "2"},
        POD_IP,
        {"name": "PADDLE_MASTER", "value": "$(POD_IP_DUMMY):36543"},
    ]


def test_collective_other_workers_reach_worker_zero() -> None:
    assert env_of(paddlejob({"Worker": 2}), "Worker", 1)[-1] == {
        "name": "PADDLE_MASTER",
        "value": "pd-worker-0:36543",
    }


def test_collective_mode_uses_the_workers_declared_master_port() -> None:
    declared = container("paddle", ports=[{"name": "master", "containerPort": 37000}])
    built = paddlejob({"Worker": 2}, containers=[declared])
    assert env_of(built, "Worker", 1)[-1]["value"] == "pd-worker-0:37000"


def test_ps_mode_master_zero_advertises_its_pod_ip_and_is_one_server() -> None:
    assert env_of(paddlejob({"Master": 2, "Worker": 2}), "Master", 0)[3:] == [
        POD_IP,
        {"name": "PADDLE_MASTER", "value": "$(POD_IP_DUMMY):36543"},
        {"name": "PADDLE_SERVER_NUM", "value": "1"},
    ]


def test_ps_mode_other_masters_reach_master_zero() -> None:
    assert env_of(paddlejob({"Master": 2, "Worker": 2}), "Master", 1)[3:] == [
        {"name": "PADDLE_MASTER", "value": "pd-master-0:36543"},
        {"name": "PADDLE_SERVER_NUM", "value": "1"},
    ]


def test_ps_mode_workers_reach_master_zero_and_are_one_trainer() -> None:
    assert env_of(paddlejob({"Master": 1, "Worker": 2}), "Worker", 0)[3:] == [
        {"name": "PADDLE_MASTER", "value": "pd-master-0:36543"},
        {"name": "PADDLE_TRAINER_NUM", "value": "1"},
    ]


def test_locally_workers_reach_worker_zeros_loopback_port() -> None:
    local = LocalAddressing(ports={("Worker", 0): 44000, ("Worker", 1): 44001})
    assert env_of(paddlejob({"Worker": 2}), "Worker", 1, local)[-1]["value"] == "127.0.0.1:44000"


def test_replica_types_other_than_master_and_worker_are_not_supported() -> None:
    assert [str(e) for e in PADDLE.validate(paddlejob({"Worker": 1, "Server": 1}))] == [
        'spec.paddleReplicaSpecs.Server: Unsupported value: "Server": supported values: "Master", "Worker"'
    ]


def rules(job_: PaddleJob, **statuses: Any) -> list[tuple[str, str, str]]:
    return [(p.type.value, p.reason, p.message) for p in PADDLE.status_rules(status_context(job_, statuses))]


def test_with_a_master_the_master_decides_running_and_success() -> None:
    built = paddlejob({"Master": 1, "Worker": 2})
    assert rules(built, Master=counted(active=1)) == [
        ("Running", "PaddleJobRunning", "PaddleJob pd is running.")
    ]
    assert rules(built, Master=counted(succeeded=1)) == [
        ("Succeeded", "PaddleJobSucceeded", "PaddleJob pd is successfully completed.")
    ]


def test_worker_only_job_succeeds_when_every_worker_succeeded() -> None:
    assert rules(paddlejob({"Worker": 2}), Worker=counted(succeeded=2)) == [
        ("Succeeded", "PaddleJobSucceeded", "PaddleJob default/pd successfully completed.")
    ]


def test_worker_only_job_runs_while_a_worker_runs() -> None:
    assert rules(paddlejob({"Worker": 2}), Worker=counted(active=1, succeeded=1)) == [
        ("Running", "PaddleJobRunning", "PaddleJob default/pd is running.")
    ]


def test_a_failed_replica_restarts_the_job_unless_its_policy_is_never() -> None:
    assert rules(paddlejob({"Worker": 2}), Worker=counted(active=1, failed=1))[-1] == (
        "Restarting",
        "PaddleJobRestarting",
        "PaddleJob pd is restarting because 1 Worker replica(s) failed.",
    )
    never = paddlejob({"Worker": 2}, restart_policy="Never")
    assert rules(never, Worker=counted(active=1, failed=1))[-1][:2] == ("Failed", "PaddleJobFailed")
