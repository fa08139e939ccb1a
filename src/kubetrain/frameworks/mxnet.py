"""MXJob: MX_CONFIG and DMLC_* for ps-lite (§2.6)."""

from __future__ import annotations

from typing import ClassVar

from kubetrain.api.common import RestartPolicy
from kubetrain.api.errors import FieldError
from kubetrain.api.jobs import MXJob
from kubetrain.frameworks.addressing import Addressing
from kubetrain.frameworks.base import ConditionProposal, EnvTarget, EnvVar, Framework, StatusContext


class MXNetFramework(Framework[MXJob]):
    model: ClassVar[type[MXJob]] = MXJob
    scheme_name: ClassVar[str] = "mxjob"
    framework_label: ClassVar[str] = "mxnet"
    controller_name: ClassVar[str] = "mxjob-controller"
    replica_types: ClassVar[tuple[str, ...]] = (
        "Scheduler",
        "Server",
        "Worker",
        "TunerTracker",
        "TunerServer",
        "Tuner",
    )
    default_container: ClassVar[str] = "mxnet"
    default_port_name: ClassVar[str | None] = "mxjob-port"
    default_port: ClassVar[int | None] = 9091
    default_restart_policy: ClassVar[RestartPolicy] = RestartPolicy.NEVER
    scale_replica_type: ClassVar[str | None] = None
    env_target: ClassVar[EnvTarget] = EnvTarget.ALL_CONTAINERS
    per_replica_services: ClassVar[bool] = True

    def set_defaults(self, job: MXJob) -> MXJob:
        raise NotImplementedError

    def validate(self, job: MXJob) -> list[FieldError]:
        raise NotImplementedError

    def is_master_role(self, job: MXJob, replica_type: str, index: int) -> bool:
        raise NotImplementedError

    def replica_env(self, job: MXJob, replica_type: str, index: int, addressing: Addressing) -> list[EnvVar]:
        raise NotImplementedError

    def status_rules(self, context: StatusContext) -> list[ConditionProposal]:
        raise NotImplementedError
