"""PyTorchJob: Master/Worker, torchrun rendezvous (§2.1)."""

from __future__ import annotations

from typing import ClassVar

from kubetrain.api.common import RestartPolicy
from kubetrain.api.errors import FieldError
from kubetrain.api.jobs import PyTorchJob
from kubetrain.frameworks.addressing import Addressing
from kubetrain.frameworks.base import ConditionProposal, EnvTarget, EnvVar, Framework, StatusContext


class PyTorchFramework(Framework[PyTorchJob]):
    model: ClassVar[type[PyTorchJob]] = PyTorchJob
    scheme_name: ClassVar[str] = "pytorchjob"
    framework_label: ClassVar[str] = "pytorch"
    controller_name: ClassVar[str] = "pytorchjob-controller"
    replica_types: ClassVar[tuple[str, ...]] = ("Master", "Worker")
    default_container: ClassVar[str] = "pytorch"
    default_port_name: ClassVar[str | None] = "pytorchjob-port"
    default_port: ClassVar[int | None] = 23456
    default_restart_policy: ClassVar[RestartPolicy] = RestartPolicy.ON_FAILURE
    scale_replica_type: ClassVar[str | None] = "Worker"
    env_target: ClassVar[EnvTarget] = EnvTarget.ALL_CONTAINERS
    per_replica_services: ClassVar[bool] = True

    def set_defaults(self, job: PyTorchJob) -> PyTorchJob:
        raise NotImplementedError

    def validate(self, job: PyTorchJob) -> list[FieldError]:
        raise NotImplementedError

    def is_master_role(self, job: PyTorchJob, replica_type: str, index: int) -> bool:
        raise NotImplementedError

    def replica_env(
        self, job: PyTorchJob, replica_type: str, index: int, addressing: Addressing
    ) -> list[EnvVar]:
        raise NotImplementedError

    def status_rules(self, context: StatusContext) -> list[ConditionProposal]:
        raise NotImplementedError
