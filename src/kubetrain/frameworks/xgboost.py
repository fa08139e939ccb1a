"""XGBoostJob: rabit/collective tracker on the master, LightGBM worker list (§1.3, §2.3, §4.4, §5.1)."""

from __future__ import annotations

from typing import ClassVar

from kubetrain.api.common import ConditionType, RestartPolicy
from kubetrain.api.errors import FieldError
from kubetrain.api.jobs import XGBoostJob
from kubetrain.api.validation import forbidden, required
from kubetrain.frameworks.addressing import Addressing
from kubetrain.frameworks.base import ConditionProposal, EnvTarget, EnvVar, StatusContext
from kubetrain.frameworks.standard import (
    StandardFramework,
    counts,
    env,
    proposal,
    replicas_of,
    restart_only_on_exit_code,
    total_replicas,
)

MASTER = "Master"
WORKER = "Worker"


class XGBoostFramework(StandardFramework[XGBoostJob]):
    model: ClassVar[type[XGBoostJob]] = XGBoostJob
    scheme_name: ClassVar[str] = "xgboostjob"
    framework_label: ClassVar[str] = "xgboost"
    controller_name: ClassVar[str] = "xgboostjob-controller"
    replica_types: ClassVar[tuple[str, ...]] = (MASTER, WORKER)
    supported_replica_keys: ClassVar[tuple[str, ...] | None] = (MASTER, WORKER)
    default_container: ClassVar[str] = "xgboost"
    default_port_name: ClassVar[str] = "xgboostjob-port"
    default_port: ClassVar[int] = 9999
    default_restart_policy: ClassVar[RestartPolicy] = RestartPolicy.NEVER
    scale_replica_type: ClassVar[str | None] = None
    env_target: ClassVar[EnvTarget] = EnvTarget.ALL_CONTAINERS
    per_replica_services: ClassVar[bool] = True

    def _kind_errors(self, job: XGBoostJob, specs_path: str) -> list[FieldError]:
        master = job.replica_specs.get(MASTER)
        if master is None:
            return [required(f"{specs_path}.{MASTER}", "must be present")]
        if master.replicas != 1:
            return [forbidden(f"{specs_path}.{MASTER}.replicas", "must be 1")]
        return []

    def is_master_role(self, job: XGBoostJob, replica_type: str, index: int) -> bool:
        return replica_type == MASTER

    def replica_env(
        self, job: XGBoostJob, replica_type: str, index: int, addressing: Addressing
    ) -> list[EnvVar]:
        rank = index + replicas_of(job, MASTER) if replica_type == WORKER else index
        total = total_replicas(job)
        found = [
            env("MASTER_PORT", addressing.port(job, MASTER, 0, self.container_port(job, MASTER))),
            env("MASTER_ADDR", addressing.host(job, MASTER, 0)),
            env("WORLD_SIZE", total),
            env("RANK", rank),
            env("PYTHONUNBUFFERED", "1"),
        ]
        if total > 1:
            # LightGBM support; upstream lists workers 0..total-2 (one per non-master replica).
            worker_port = addressing.port(job, WORKER, 0, self.container_port(job, WORKER))
            addresses = ",".join(addressing.host(job, WORKER, i) for i in range(total - 1))
            found += [env("WORKER_PORT", worker_port), env("WORKER_ADDRS", addresses)]
        return found

    def status_rules(self, context: StatusContext) -> list[ConditionProposal]:
        """Master decides. Before success or failure, ``Running`` is added if the job has none.

        Upstream's ``setRunningCondition`` adds ``Running`` there only when the job has no Running
        condition at all (whatever its status), so a finished job always shows it ran. (Upstream
        also uses it for a running master; kubetrain sets Running then as every kind does, so a
        resumed job shows Running again.)
        """
        job = context.job
        found: list[ConditionProposal] = []
        had_running = any(c.type == ConditionType.RUNNING for c in job.status.conditions)

        def ensure_running() -> None:
            nonlocal had_running
            if not had_running:
                found.append(proposal(self.kind, ConditionType.RUNNING, f"XGBoostJob {job.name} is running."))
                had_running = True

        for replica_type in (t for t in self.replica_types if t in job.replica_specs):
            counted = counts(context, replica_type)
            if replica_type == MASTER:
                if counted.running > 0:
                    found.append(
                        proposal(self.kind, ConditionType.RUNNING, f"XGBoostJob {job.name} is running.")
                    )
                    had_running = True
                if counted.expected == 0:
                    ensure_running()
                    message = f"XGBoostJob {job.name} is successfully completed."
                    return [*found, proposal(self.kind, ConditionType.SUCCEEDED, message)]
            if counted.failed > 0:
                ensure_running()
                found += restart_only_on_exit_code(self.kind, context, replica_type, counted)
        return found
