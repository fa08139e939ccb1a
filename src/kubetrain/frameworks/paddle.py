"""PaddleJob: collective or parameter-server mode (§2.4)."""

from __future__ import annotations

from typing import ClassVar

from kubetrain.api.common import RestartPolicy
from kubetrain.api.errors import FieldError
from kubetrain.api.jobs import PaddleJob
from kubetrain.frameworks.addressing import Addressing
from kubetrain.frameworks.base import ConditionProposal, EnvTarget, EnvVar, Framework, StatusContext


class PaddleFramework(Framework[PaddleJob]):
    model: ClassVar[type[PaddleJob]] = PaddleJob
    scheme_name: ClassVar[str] = "paddlejob"
    framework_label: ClassVar[str] = "paddle"
    controller_name: ClassVar[str] = "paddlejob-controller"
    replica_types: ClassVar[tuple[str, ...]] = ("Master", "Worker")
    default_container: ClassVar[str] = "paddle"
    default_port_name: ClassVar[str | None] = "master"
    default_port: ClassVar[int | None] = 36543
    default_restart_policy: ClassVar[RestartPolicy] = RestartPolicy.ON_FAILURE
    scale_replica_type: ClassVar[str | None] = "Worker"
    env_target: ClassVar[EnvTarget] = EnvTarget.ALL_CONTAINERS
    per_replica_services: ClassVar[bool] = True

    def set_defaults(self, job: PaddleJob) -> PaddleJob:
        raise NotImplementedError

    def validate(self, job: PaddleJob) -> list[FieldError]:
        raise NotImplementedError

    def is_master_role(self, job: PaddleJob, replica_type: str, index: int) -> bool:
        raise NotImplementedError

    def replica_env(
        self, job: PaddleJob, replica_type: str, index: int, addressing: Addressing
    ) -> list[EnvVar]:
        raise NotImplementedError

    def status_rules(self, context: StatusContext) -> list[ConditionProposal]:
        raise NotImplementedError
