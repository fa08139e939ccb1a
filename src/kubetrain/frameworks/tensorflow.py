"""TFJob: TF_CONFIG on the ``tensorflow`` container (§2.2)."""

from __future__ import annotations

from typing import ClassVar

from kubetrain.api.common import RestartPolicy
from kubetrain.api.errors import FieldError
from kubetrain.api.jobs import TFJob
from kubetrain.frameworks.addressing import Addressing
from kubetrain.frameworks.base import ConditionProposal, EnvTarget, EnvVar, Framework, StatusContext


class TensorFlowFramework(Framework[TFJob]):
    model: ClassVar[type[TFJob]] = TFJob
    scheme_name: ClassVar[str] = "tfjob"
    framework_label: ClassVar[str] = "tensorflow"
    controller_name: ClassVar[str] = "tfjob-controller"
    replica_types: ClassVar[tuple[str, ...]] = ("Chief", "Master", "PS", "Worker", "Evaluator")
    default_container: ClassVar[str] = "tensorflow"
    default_port_name: ClassVar[str | None] = "tfjob-port"
    default_port: ClassVar[int | None] = 2222
    default_restart_policy: ClassVar[RestartPolicy] = RestartPolicy.NEVER
    scale_replica_type: ClassVar[str | None] = None
    env_target: ClassVar[EnvTarget] = EnvTarget.DEFAULT_CONTAINER
    per_replica_services: ClassVar[bool] = True

    def set_defaults(self, job: TFJob) -> TFJob:
        raise NotImplementedError

    def validate(self, job: TFJob) -> list[FieldError]:
        raise NotImplementedError

    def is_master_role(self, job: TFJob, replica_type: str, index: int) -> bool:
        raise NotImplementedError

    def replica_env(self, job: TFJob, replica_type: str, index: int, addressing: Addressing) -> list[EnvVar]:
        raise NotImplementedError

    def status_rules(self, context: StatusContext) -> list[ConditionProposal]:
        raise NotImplementedError
