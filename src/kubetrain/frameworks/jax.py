"""JAXJob: jax.distributed coordinator on worker-0 (§2.5)."""

from __future__ import annotations

from typing import ClassVar

from kubetrain.api.common import RestartPolicy
from kubetrain.api.errors import FieldError
from kubetrain.api.jobs import JAXJob
from kubetrain.frameworks.addressing import Addressing
from kubetrain.frameworks.base import ConditionProposal, EnvTarget, EnvVar, Framework, StatusContext


class JAXFramework(Framework[JAXJob]):
    model: ClassVar[type[JAXJob]] = JAXJob
    scheme_name: ClassVar[str] = "jaxjob"
    framework_label: ClassVar[str] = "jax"
    controller_name: ClassVar[str] = "jaxjob-controller"
    replica_types: ClassVar[tuple[str, ...]] = ("Worker",)
    default_container: ClassVar[str] = "jax"
    default_port_name: ClassVar[str | None] = "jaxjob-port"
    default_port: ClassVar[int | None] = 6666
    default_restart_policy: ClassVar[RestartPolicy] = RestartPolicy.NEVER
    scale_replica_type: ClassVar[str | None] = "Worker"
    env_target: ClassVar[EnvTarget] = EnvTarget.ALL_CONTAINERS
    per_replica_services: ClassVar[bool] = True

    def set_defaults(self, job: JAXJob) -> JAXJob:
        raise NotImplementedError

    def validate(self, job: JAXJob) -> list[FieldError]:
        raise NotImplementedError

    def is_master_role(self, job: JAXJob, replica_type: str, index: int) -> bool:
        raise NotImplementedError

    def replica_env(self, job: JAXJob, replica_type: str, index: int, addressing: Addressing) -> list[EnvVar]:
        raise NotImplementedError

    def status_rules(self, context: StatusContext) -> list[ConditionProposal]:
        raise NotImplementedError
