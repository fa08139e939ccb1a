"""PaddleJob: collective mode (workers only) or parameter-server mode (with a Master) (§2.4)."""

from __future__ import annotations

from typing import ClassVar

from kubetrain.api.common import RestartPolicy
from kubetrain.api.defaults import default_min_max
from kubetrain.api.jobs import PaddleElasticPolicy, PaddleJob
from kubetrain.frameworks.addressing import Addressing
from kubetrain.frameworks.base import ConditionProposal, EnvTarget, EnvVar, StatusContext
from kubetrain.frameworks.standard import (
    StandardFramework,
    all_workers_rule,
    counts,
    deciding_replica_rule,
    env,
    restart_or_fail_when_replicas_lack,
    total_replicas,
)

MASTER = "Master"
WORKER = "Worker"
POD_IP_DUMMY: EnvVar = {"name": "POD_IP_DUMMY", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
"""The rendezvous replica advertises its own pod IP, read through the downward API."""


class PaddleFramework(StandardFramework[PaddleJob]):
    model: ClassVar[type[PaddleJob]] = PaddleJob
    scheme_name: ClassVar[str] = "paddlejob"
    deleted_job_reason: ClassVar[str] = "SuccessfulDeletePod"
    framework_label: ClassVar[str] = "paddle"
    controller_name: ClassVar[str] = "paddlejob-controller"
    replica_types: ClassVar[tuple[str, ...]] = (MASTER, WORKER)
    supported_replica_keys: ClassVar[tuple[str, ...] | None] = (MASTER, WORKER)
    default_container: ClassVar[str] = "paddle"
    default_port_name: ClassVar[str] = "master"
    default_port: ClassVar[int] = 36543
    default_restart_policy: ClassVar[RestartPolicy] = RestartPolicy.ON_FAILURE
    scale_replica_type: ClassVar[str | None] = WORKER
    env_target: ClassVar[EnvTarget] = EnvTarget.ALL_CONTAINERS
    per_replica_services: ClassVar[bool] = True

    def _kind_defaults(self, job: PaddleJob) -> PaddleJob:
        """``elasticPolicy`` min/max as PyTorch's (upstream defaults them but never acts on them)."""
        policy = job.spec.elastic_policy
        if policy is None or (policy.min_replicas is not None and policy.max_replicas is not None):
            return job
        workers = job.replica_specs[WORKER].replicas if WORKER in job.replica_specs else None
        low, high = default_min_max(policy.min_replicas, policy.max_replicas, workers)
        defaulted: PaddleElasticPolicy = policy.model_copy(update={"min_replicas": low, "max_replicas": high})
        return job.model_copy(update={"spec": job.spec.model_copy(update={"elastic_policy": defaulted})})

    def is_master_role(self, job: PaddleJob, replica_type: str, index: int) -> bool:
        return replica_type == MASTER

    def replica_env(
        self, job: PaddleJob, replica_type: str, index: int, addressing: Addressing
    ) -> list[EnvVar]:
        found = [
            env("PYTHONUNBUFFERED", "1"),
            env("PADDLE_JOB_ID", job.name),
            env("PADDLE_NNODES", total_replicas(job)),
        ]
        parameter_server = MASTER in job.replica_specs
        # Collective mode rendezvous at worker-0, parameter-server mode at master-0.
        rendezvous = MASTER if parameter_server else WORKER
        port = addressing.port(job, rendezvous, 0, self.container_port(job, rendezvous))
        if index == 0 and replica_type == rendezvous:
            found += [POD_IP_DUMMY, env("PADDLE_MASTER", f"$(POD_IP_DUMMY):{port}")]
        else:
            found.append(env("PADDLE_MASTER", f"{addressing.host(job, rendezvous, 0)}:{port}"))
        if parameter_server:
            found.append(env("PADDLE_SERVER_NUM" if replica_type == MASTER else "PADDLE_TRAINER_NUM", "1"))
        return found

    def status_rules(self, context: StatusContext) -> list[ConditionProposal]:
        job = context.job
        has_master = MASTER in job.replica_specs
        found: list[ConditionProposal] = []
        for replica_type in (t for t in self.replica_types if t in job.replica_specs):
            counted = counts(context, replica_type)
            if has_master and replica_type == MASTER:
                decided, succeeded = deciding_replica_rule(self.kind, job, counted)
                if succeeded:
                    return [*found, *decided]
                found += decided
            elif not has_master and replica_type == WORKER:
                found += all_workers_rule(self.kind, job, counted)
            found += restart_or_fail_when_replicas_lack(self.kind, context, replica_type, counted)
        return found
