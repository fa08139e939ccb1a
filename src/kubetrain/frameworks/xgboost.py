"""XGBoostJob: rabit/collective tracker on the master (§2.3)."""

from __future__ import annotations

from typing import ClassVar

from kubetrain.api.common import RestartPolicy
from kubetrain.api.errors import FieldError
from kubetrain.api.jobs import XGBoostJob
from kubetrain.frameworks.addressing import Addressing
from kubetrain.frameworks.base import ConditionProposal, EnvTarget, EnvVar, Framework, StatusContext


class XGBoostFramework(Framework[XGBoostJob]):
    model: ClassVar[type[XGBoostJob]] = XGBoostJob
    scheme_name: ClassVar[str] = "xgboostjob"
    framework_label: ClassVar[str] = "xgboost"
    controller_name: ClassVar[str] = "xgboostjob-controller"
    replica_types: ClassVar[tuple[str, ...]] = ("Master", "Worker")
    default_container: ClassVar[str] = "xgboost"
    default_port_name: ClassVar[str | None] = "xgboostjob-port"
    default_port: ClassVar[int | None] = 9999
    default_restart_policy: ClassVar[RestartPolicy] = RestartPolicy.NEVER
    scale_replica_type: ClassVar[str | None] = None
    env_target: ClassVar[EnvTarget] = EnvTarget.ALL_CONTAINERS
    per_replica_services: ClassVar[bool] = True

    def set_defaults(self, job: XGBoostJob) -> XGBoostJob:
        raise NotImplementedError

    def validate(self, job: XGBoostJob) -> list[FieldError]:
        raise NotImplementedError

    def is_master_role(self, job: XGBoostJob, replica_type: str, index: int) -> bool:
        raise NotImplementedError

    def replica_env(
        self, job: XGBoostJob, replica_type: str, index: int, addressing: Addressing
    ) -> list[EnvVar]:
        raise NotImplementedError

    def status_rules(self, context: StatusContext) -> list[ConditionProposal]:
        raise NotImplementedError
