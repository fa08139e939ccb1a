"""MPIJob kubeflow.org/v1: the launcher reaches workers through ``kubectl exec`` (§2.7)."""

from __future__ import annotations

from typing import ClassVar

from kubetrain.api.common import RestartPolicy
from kubetrain.api.errors import FieldError
from kubetrain.api.jobs import MPIJob
from kubetrain.frameworks.addressing import Addressing
from kubetrain.frameworks.base import ConditionProposal, EnvTarget, EnvVar, Framework, StatusContext


class MPIFramework(Framework[MPIJob]):
    model: ClassVar[type[MPIJob]] = MPIJob
    scheme_name: ClassVar[str] = "mpijob"
    framework_label: ClassVar[str] = "mpi"
    controller_name: ClassVar[str] = "mpijob-controller"
    replica_types: ClassVar[tuple[str, ...]] = ("Launcher", "Worker")
    default_container: ClassVar[str] = "mpi"
    default_port_name: ClassVar[str | None] = None
    default_port: ClassVar[int | None] = None
    default_restart_policy: ClassVar[RestartPolicy] = RestartPolicy.NEVER
    scale_replica_type: ClassVar[str | None] = None
    env_target: ClassVar[EnvTarget] = EnvTarget.FIRST_CONTAINER
    per_replica_services: ClassVar[bool] = False

    def set_defaults(self, job: MPIJob) -> MPIJob:
        raise NotImplementedError

    def validate(self, job: MPIJob) -> list[FieldError]:
        raise NotImplementedError

    def is_master_role(self, job: MPIJob, replica_type: str, index: int) -> bool:
        raise NotImplementedError

    def replica_env(self, job: MPIJob, replica_type: str, index: int, addressing: Addressing) -> list[EnvVar]:
        raise NotImplementedError

    def status_rules(self, context: StatusContext) -> list[ConditionProposal]:
        raise NotImplementedError
