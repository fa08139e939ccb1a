"""JAXJob: ``jax.distributed`` coordinator on worker-0 (§1.3, §2.5, §4.4, §5.1)."""

from __future__ import annotations

from typing import ClassVar

from kubetrain.api.common import RestartPolicy
from kubetrain.api.jobs import JAXJob
from kubetrain.frameworks.addressing import Addressing
from kubetrain.frameworks.base import ConditionProposal, EnvTarget, EnvVar, StatusContext
from kubetrain.frameworks.standard import (
    StandardFramework,
    all_workers_rule,
    counts,
    env,
    restart_or_fail_when_replicas_lack,
    total_replicas,
)

WORKER = "Worker"


class JAXFramework(StandardFramework[JAXJob]):
    """JAXJob. Deliberate difference: ``managedBy`` is checked as for the other v1 kinds (upstream's
    JAX webhook checks only the name and the replica specs)."""

    model: ClassVar[type[JAXJob]] = JAXJob
    scheme_name: ClassVar[str] = "jaxjob"
    deleted_job_reason: ClassVar[str] = "SuccessfulDeletePod"
    framework_label: ClassVar[str] = "jax"
    controller_name: ClassVar[str] = "jaxjob-controller"
    replica_types: ClassVar[tuple[str, ...]] = (WORKER,)
    supported_replica_keys: ClassVar[tuple[str, ...] | None] = (WORKER,)
    default_container: ClassVar[str] = "jax"
    default_port_name: ClassVar[str] = "jaxjob-port"
    default_port: ClassVar[int] = 6666
    default_restart_policy: ClassVar[RestartPolicy] = RestartPolicy.NEVER
    scale_replica_type: ClassVar[str | None] = WORKER
    env_target: ClassVar[EnvTarget] = EnvTarget.ALL_CONTAINERS
    per_replica_services: ClassVar[bool] = True

    def is_master_role(self, job: JAXJob, replica_type: str, index: int) -> bool:
        return index == 0

    def replica_env(self, job: JAXJob, replica_type: str, index: int, addressing: Addressing) -> list[EnvVar]:
        return [
            env("PYTHONUNBUFFERED", "1"),
            env("COORDINATOR_PORT", addressing.port(job, WORKER, 0, self.container_port(job, WORKER))),
            env("COORDINATOR_ADDRESS", addressing.host(job, WORKER, 0)),
            env("NUM_PROCESSES", total_replicas(job)),
            env("PROCESS_ID", index),
        ]

    def status_rules(self, context: StatusContext) -> list[ConditionProposal]:
        job = context.job
        found: list[ConditionProposal] = []
        for replica_type in (t for t in self.replica_types if t in job.replica_specs):
            counted = counts(context, replica_type)
            if replica_type == WORKER:
                found += all_workers_rule(self.kind, job, counted)
            found += restart_or_fail_when_replicas_lack(self.kind, context, replica_type, counted)
        return found
