"""MXJob (training-operator ≤ 1.8): ``MX_CONFIG`` and ps-lite's ``DMLC_*`` env (§2.6, §4.4, §5.1)."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from kubetrain.api.common import RestartPolicy
from kubetrain.api.errors import FieldError
from kubetrain.api.jobs import MXJob
from kubetrain.api.validation import forbidden
from kubetrain.frameworks.addressing import Addressing
from kubetrain.frameworks.base import ConditionProposal, EnvTarget, EnvVar, StatusContext
from kubetrain.frameworks.standard import (
    StandardFramework,
    counts,
    deciding_replica_rule,
    env,
    replicas_of,
    restart_only_on_exit_code,
)

SCHEDULER, SERVER, WORKER = "Scheduler", "Server", "Worker"
TUNER_TRACKER, TUNER_SERVER, TUNER = "TunerTracker", "TunerServer", "Tuner"
TUNER_SERVER_KEY = "tuner-server-key"
"""Template annotation whose value MX_CONFIG lists under ``labels`` (TVM auto-tuning)."""


class MXNetFramework(StandardFramework[MXJob]):
    model: ClassVar[type[MXJob]] = MXJob
    scheme_name: ClassVar[str] = "mxjob"
    framework_label: ClassVar[str] = "mxnet"
    controller_name: ClassVar[str] = "mxjob-controller"
    replica_types: ClassVar[tuple[str, ...]] = (SCHEDULER, SERVER, WORKER, TUNER_TRACKER, TUNER_SERVER, TUNER)
    normalised_replica_types: ClassVar[tuple[str, ...] | None] = (SCHEDULER, SERVER, WORKER)
    supported_replica_keys: ClassVar[tuple[str, ...] | None] = None
    default_container: ClassVar[str] = "mxnet"
    default_port_name: ClassVar[str] = "mxjob-port"
    default_port: ClassVar[int] = 9091
    default_restart_policy: ClassVar[RestartPolicy] = RestartPolicy.NEVER
    scale_replica_type: ClassVar[str | None] = None
    env_target: ClassVar[EnvTarget] = EnvTarget.ALL_CONTAINERS
    per_replica_services: ClassVar[bool] = True

    def _kind_errors(self, job: MXJob, specs_path: str) -> list[FieldError]:
        if replicas_of(job, SCHEDULER) > 1:
            return [forbidden(f"{specs_path}.{SCHEDULER}.replicas", "must not be more than 1")]
        return []

    def is_master_role(self, job: MXJob, replica_type: str, index: int) -> bool:
        return replica_type == SERVER

    def mx_config(self, job: MXJob, replica_type: str, index: int, addressing: Addressing) -> dict[str, Any]:
        """The MX_CONFIG object: struct fields cluster, labels, task; map keys sorted (Go JSON)."""
        cluster = {
            t.lower(): [
                {
                    "url": addressing.host(job, t, i),
                    "port": addressing.port(job, t, i, self.container_port(job, t)),
                }
                for i in range(replicas_of(job, t))
            ]
            for t in sorted(job.replica_specs, key=str.lower)
        }
        labels = {
            t.lower(): str(
                ((spec.template.get("metadata") or {}).get("annotations") or {}).get(TUNER_SERVER_KEY, "")
            )
            for t, spec in sorted(job.replica_specs.items(), key=lambda item: item[0].lower())
        }
        return {"cluster": cluster, "labels": labels, "task": {"type": replica_type.lower(), "index": index}}

    def replica_env(self, job: MXJob, replica_type: str, index: int, addressing: Addressing) -> list[EnvVar]:
        config = self.mx_config(job, replica_type, index, addressing)
        schedulers = config["cluster"].get("scheduler") or [{"url": "", "port": 0}]
        found = [
            env("MX_CONFIG", json.dumps(config, separators=(",", ":"))),
            env("DMLC_PS_ROOT_PORT", schedulers[0]["port"]),
            env("DMLC_PS_ROOT_URI", schedulers[0]["url"]),
            env("DMLC_NUM_SERVER", len(config["cluster"].get("server", []))),
            env("DMLC_NUM_WORKER", len(config["cluster"].get("worker", []))),
            env("DMLC_ROLE", replica_type.lower()),
            env("DMLC_USE_KUBERNETES", 1),
        ]
        if replica_type == WORKER:
            found.append(env("DMLC_WORKER_ID", index))  # BytePS
        return found

    def is_single_worker(self, job: MXJob) -> bool:
        """One worker and no scheduler or server: that worker decides the job's outcome."""
        return (
            replicas_of(job, WORKER) == 1
            and replicas_of(job, SCHEDULER) == 0
            and replicas_of(job, SERVER) == 0
        )

    def status_rules(self, context: StatusContext) -> list[ConditionProposal]:
        job = context.job
        assert isinstance(job, MXJob)
        deciding = WORKER if self.is_single_worker(job) else SCHEDULER
        found: list[ConditionProposal] = []
        for replica_type in (t for t in self.replica_types if t in job.replica_specs):
            counted = counts(context, replica_type)
            if replica_type == deciding:
                decided, succeeded = deciding_replica_rule(self.kind, job, counted)
                if succeeded:
                    return [*found, *decided]
                found += decided
            found += restart_only_on_exit_code(self.kind, context, replica_type, counted)
        return found
