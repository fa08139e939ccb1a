"""MPIJob kubeflow.org/v2beta1: the launcher reaches workers over SSH (§2.8)."""

from __future__ import annotations

from typing import ClassVar

from kubetrain.api.common import RestartPolicy
from kubetrain.api.errors import FieldError
from kubetrain.api.jobs import MPIJobV2
from kubetrain.frameworks.addressing import Addressing
from kubetrain.frameworks.base import ConditionProposal, EnvTarget, EnvVar, Framework, StatusContext


class MPIV2Framework(Framework[MPIJobV2]):
    model: ClassVar[type[MPIJobV2]] = MPIJobV2
    scheme_name: ClassVar[str] = "mpijob-v2beta1"
    framework_label: ClassVar[str] = "mpi"
    controller_name: ClassVar[str] = "mpi-operator"
    replica_types: ClassVar[tuple[str, ...]] = ("Launcher", "Worker")
    default_container: ClassVar[str] = "mpi"
    default_port_name: ClassVar[str | None] = None
    default_port: ClassVar[int | None] = None
    default_restart_policy: ClassVar[RestartPolicy] = RestartPolicy.NEVER
    scale_replica_type: ClassVar[str | None] = None
    env_target: ClassVar[EnvTarget] = EnvTarget.FIRST_CONTAINER
    per_replica_services: ClassVar[bool] = False

    def set_defaults(self, job: MPIJobV2) -> MPIJobV2:
        raise NotImplementedError

    def validate(self, job: MPIJobV2) -> list[FieldError]:
        raise NotImplementedError

    def is_master_role(self, job: MPIJobV2, replica_type: str, index: int) -> bool:
        raise NotImplementedError

    def replica_env(
        self, job: MPIJobV2, replica_type: str, index: int, addressing: Addressing
    ) -> list[EnvVar]:
        raise NotImplementedError

    def status_rules(self, context: StatusContext) -> list[ConditionProposal]:
        raise NotImplementedError
