"""TFJob: ``TF_CONFIG`` on the ``tensorflow`` container (§1.3, §2.2, §4.4, §5.1)."""

from __future__ import annotations

import copy
import json
from typing import Any, ClassVar

from kubetrain.api.common import ConditionType, ReplicaSpec, RestartPolicy
from kubetrain.api.errors import FieldError
from kubetrain.api.jobs import SuccessPolicy, TFJob, TFJobSpec
from kubetrain.api.validation import forbidden
from kubetrain.frameworks.addressing import Addressing
from kubetrain.frameworks.base import ConditionProposal, EnvTarget, EnvVar, FunctionShape, StatusContext
from kubetrain.frameworks.standard import StandardFramework, counts, env, proposal, replicas_of

CHIEF, MASTER, PS, WORKER, EVALUATOR = "Chief", "Master", "PS", "Worker", "Evaluator"
_STATUS_ORDER = (CHIEF, EVALUATOR, MASTER, PS, WORKER)
"""The order upstream's ``UpdateJobStatus`` walks the types in."""
_UNSET_EXIT_CODE = 0xBEEF


def go_json(value: Any) -> str:
    """``json.Marshal`` output: compact; callers order struct fields, map keys are sorted here."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class TensorFlowFramework(StandardFramework[TFJob]):
    model: ClassVar[type[TFJob]] = TFJob
    scheme_name: ClassVar[str] = "tfjob"
    framework_label: ClassVar[str] = "tensorflow"
    controller_name: ClassVar[str] = "tfjob-controller"
    replica_types: ClassVar[tuple[str, ...]] = (CHIEF, MASTER, PS, WORKER, EVALUATOR)
    supported_replica_keys: ClassVar[tuple[str, ...] | None] = None
    default_container: ClassVar[str] = "tensorflow"
    default_port_name: ClassVar[str] = "tfjob-port"
    default_port: ClassVar[int] = 2222
    default_restart_policy: ClassVar[RestartPolicy] = RestartPolicy.NEVER
    scale_replica_type: ClassVar[str | None] = None
    env_target: ClassVar[EnvTarget] = EnvTarget.DEFAULT_CONTAINER
    per_replica_services: ClassVar[bool] = True

    function_base_image: ClassVar[str | None] = "docker.io/tensorflow/tensorflow:2.9.1"

    def function_job(self, shape: FunctionShape, template: dict[str, Any]) -> TFJob:
        """Optional Chief and PS, then ``num_workers`` Workers, each running the function."""
        counts = ((CHIEF, shape.num_chief_replicas), (PS, shape.num_ps_replicas), (WORKER, shape.num_workers))
        specs = {
            replica_type: ReplicaSpec(replicas=count, template=copy.deepcopy(template))
            for replica_type, count in counts
            if count is not None
        }
        return TFJob(spec=TFJobSpec(tf_replica_specs=specs))

    def _kind_defaults(self, job: TFJob) -> TFJob:
        if job.spec.success_policy is not None:
            return job
        spec = job.spec.model_copy(update={"success_policy": SuccessPolicy.DEFAULT})
        return job.model_copy(update={"spec": spec})

    def _kind_errors(self, job: TFJob, specs_path: str) -> list[FieldError]:
        if sum(t in job.replica_specs for t in (CHIEF, MASTER)) > 1:
            return [forbidden(specs_path, "must not have more than 1 Chief or Master role")]
        return []

    def is_master_role(self, job: TFJob, replica_type: str, index: int) -> bool:
        if CHIEF in job.replica_specs or MASTER in job.replica_specs:
            return replica_type in (CHIEF, MASTER)
        return replica_type == WORKER and index == 0

    # --- TF_CONFIG ----------------------------------------------------------------------------

    def is_distributed(self, job: TFJob) -> bool:
        """More (or fewer) than one replica over Chief/Evaluator/Master/PS/Worker."""
        return sum(replicas_of(job, t) for t in _STATUS_ORDER if t in job.replica_specs) != 1

    def replica_env(self, job: TFJob, replica_type: str, index: int, addressing: Addressing) -> list[EnvVar]:
        if not self.is_distributed(job):
            return []
        return [env("TF_CONFIG", self.tf_config(job, replica_type, index, addressing))]

    def cluster_spec(self, job: TFJob, addressing: Addressing) -> dict[str, list[str]]:
        """Every replica's ``<fqdn>:<port>``, keyed by lowercase type (all types, Evaluator too)."""
        cluster: dict[str, list[str]] = {}
        for replica_type in job.replica_specs:
            port = self.container_port(job, replica_type)
            cluster[replica_type.lower()] = [
                f"{addressing.fqdn(job, replica_type, i)}:{addressing.port(job, replica_type, i, port)}"
                for i in range(replicas_of(job, replica_type))
            ]
        return dict(sorted(cluster.items()))

    def tf_config(self, job: TFJob, replica_type: str, index: int, addressing: Addressing) -> str:
        cluster = self.cluster_spec(job, addressing)
        task = {"type": replica_type.lower(), "index": index}
        if not job.spec.enable_dynamic_worker:
            return go_json({"cluster": cluster, "task": task, "environment": "cloud"})
        return go_json({"cluster": _sparse(cluster, replica_type.lower(), index), "task": task})

    # --- status -------------------------------------------------------------------------------

    def status_rules(self, context: StatusContext) -> list[ConditionProposal]:
        job = context.job
        assert isinstance(job, TFJob)
        has_chief = CHIEF in job.replica_specs or MASTER in job.replica_specs
        running = proposal(self.kind, ConditionType.RUNNING, f"TFJob {job.namespace}/{job.name} is running.")
        succeeded = proposal(
            self.kind, ConditionType.SUCCEEDED, f"TFJob {job.namespace}/{job.name} successfully completed."
        )
        found: list[ConditionProposal] = []
        for replica_type in (t for t in _STATUS_ORDER if t in job.replica_specs):
            counted = counts(context, replica_type)
            if has_chief and replica_type in (CHIEF, MASTER):
                if counted.running > 0:
                    found.append(running)
                if counted.expected == 0:
                    found.append(succeeded)
            elif not has_chief and replica_type == WORKER:
                worker0_rule = job.spec.success_policy != SuccessPolicy.ALL_WORKERS and _worker0_completed(
                    context
                )
                if counted.expected == 0 or worker0_rule:
                    found.append(succeeded)
                elif counted.running > 0:
                    found.append(running)
            if counted.failed > 0:
                found += self._failure(context, job, replica_type, counted.failed)
        return found

    def _failure(
        self, context: StatusContext, job: TFJob, replica_type: str, failed: int
    ) -> list[ConditionProposal]:
        """A restart already under way stays ``Restarting``; dynamic workers may fail; else ``Failed``."""
        restarting = next((c for c in job.status.conditions if c.type == ConditionType.RESTARTING), None)
        if restarting is not None:
            return [
                ConditionProposal(ConditionType.RESTARTING, restarting.reason or "", restarting.message or "")
            ]
        if job.spec.enable_dynamic_worker and replica_type == WORKER:
            return []
        message = (
            f"TFJob {job.namespace}/{job.name} has failed because {failed} {replica_type} replica(s) failed."
        )
        return [proposal(self.kind, ConditionType.FAILED, message)]


def _worker0_completed(context: StatusContext) -> bool:
    """worker-0's pod Succeeded with its ``tensorflow`` container exiting 0."""
    for replica in context.replicas:
        if replica.replica_type == WORKER and replica.index == 0:
            exit_code = _UNSET_EXIT_CODE if replica.exit_code is None else replica.exit_code
            return replica.phase == "Succeeded" and exit_code == 0
    return False


def _sparse(cluster: dict[str, list[str]], task_type: str, index: int) -> dict[str, Any]:
    """``enableDynamicWorker``: a worker knows only itself and the PS; a PS only itself.

    As upstream, a worker of a job without PS gets ``"ps":null`` (Go's nil slice).
    """
    worker: dict[str, str] = {}
    ps: list[str] | None = []
    if task_type == "ps":
        ps = [cluster["ps"][index]]
    elif task_type == "worker":
        ps = cluster.get("ps")
        worker = {str(index): cluster["worker"][index]}
    return {"worker": worker, "ps": ps}
