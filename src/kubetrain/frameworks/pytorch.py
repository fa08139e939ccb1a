"""PyTorchJob: Master/Worker, ``torch.distributed`` / torchrun env (§1.3, §2.1, §4.4, §5.1)."""

from __future__ import annotations

import copy
import re
from typing import Any, ClassVar

from kubetrain.api.common import ReplicaSpec, RestartPolicy
from kubetrain.api.defaults import default_min_max
from kubetrain.api.errors import FieldError
from kubetrain.api.jobs import ElasticPolicy, PyTorchJob, PyTorchJobSpec
from kubetrain.api.validation import forbidden, invalid, required
from kubetrain.frameworks.addressing import Addressing
from kubetrain.frameworks.base import (
    Autoscaling,
    ConditionProposal,
    EnvTarget,
    EnvVar,
    FunctionShape,
    InitSettings,
    StatusContext,
)
from kubetrain.frameworks.standard import (
    StandardFramework,
    all_workers_rule,
    counts,
    deciding_replica_rule,
    env,
    replicas_of,
    restart_or_fail_when_replicas_lack,
    total_replicas,
)

MASTER = "Master"
WORKER = "Worker"
NPROC_KEYWORDS = ("auto", "cpu", "gpu")
_GO_ATOI = re.compile(r"[+-]?[0-9]+")


def nproc_as_int(nproc_per_node: str | None) -> int:
    """``nprocPerNode`` as a number of processes for WORLD_SIZE: its integer value, else 1.

    Mirrors Go's ``strconv.Atoi`` (so ``auto``/``cpu``/``gpu``/unset all count as 1).
    """
    if nproc_per_node is None or not _GO_ATOI.fullmatch(nproc_per_node):
        return 1
    return int(nproc_per_node)


class PyTorchFramework(StandardFramework[PyTorchJob]):
    model: ClassVar[type[PyTorchJob]] = PyTorchJob
    scheme_name: ClassVar[str] = "pytorchjob"
    deleted_job_reason: ClassVar[str] = "SuccessfulDeletePod"
    framework_label: ClassVar[str] = "pytorch"
    controller_name: ClassVar[str] = "pytorchjob-controller"
    replica_types: ClassVar[tuple[str, ...]] = (MASTER, WORKER)
    supported_replica_keys: ClassVar[tuple[str, ...] | None] = (MASTER, WORKER)
    default_container: ClassVar[str] = "pytorch"
    default_port_name: ClassVar[str] = "pytorchjob-port"
    default_port: ClassVar[int] = 23456
    default_restart_policy: ClassVar[RestartPolicy] = RestartPolicy.ON_FAILURE
    scale_replica_type: ClassVar[str | None] = WORKER
    env_target: ClassVar[EnvTarget] = EnvTarget.ALL_CONTAINERS
    per_replica_services: ClassVar[bool] = True

    function_base_image: ClassVar[str | None] = "docker.io/pytorch/pytorch:2.1.2-cuda11.8-cudnn8-runtime"

    # --- jobs from a Python function (the SDK) --------------------------------------------------

    def function_job(self, shape: FunctionShape, template: dict[str, Any]) -> PyTorchJob:
        """One Master and ``num_workers - 1`` Workers, ``nprocPerNode`` from ``num_procs_per_worker``."""
        if shape.num_workers is None:
            raise ValueError("num_workers must be set for a PyTorchJob")
        specs = {MASTER: ReplicaSpec(replicas=1, template=copy.deepcopy(template))}
        if shape.num_workers > 1:
            specs[WORKER] = ReplicaSpec(replicas=shape.num_workers - 1, template=copy.deepcopy(template))
        nproc = None if shape.num_procs_per_worker is None else str(shape.num_procs_per_worker)
        return PyTorchJob(spec=PyTorchJobSpec(pytorch_replica_specs=specs, nproc_per_node=nproc))

    def function_entrypoint(self, shape: FunctionShape) -> str:
        """``torchrun`` once there are several nodes or processes per node, as upstream's SDK."""
        several = (shape.num_workers or 0) > 1 or shape.num_procs_per_worker is not None
        return "torchrun" if several else "python -u"

    # --- defaulting ---------------------------------------------------------------------------

    def _kind_defaults(self, job: PyTorchJob) -> PyTorchJob:
        update: dict[str, Any] = {}
        if job.spec.elastic_policy is not None:
            update["elastic_policy"] = _default_elastic_bounds(job.spec.elastic_policy, job)
        deprecated_nproc = job.spec.elastic_policy.n_proc_per_node if job.spec.elastic_policy else None
        if job.spec.nproc_per_node is None and deprecated_nproc is None:
            update["nproc_per_node"] = "auto"
        if not update:
            return job
        return job.model_copy(update={"spec": job.spec.model_copy(update=update)})

    def autoscaling(self, job: PyTorchJob) -> Autoscaling | None:
        """An HPA on the Workers exactly when ``elasticPolicy.metrics`` is non-empty (upstream's rule)."""
        policy = job.spec.elastic_policy
        if policy is None or not policy.metrics:
            return None
        workers = job.replica_specs[WORKER].replicas if WORKER in job.replica_specs else None
        maximum = policy.max_replicas or policy.min_replicas or workers or 1
        return Autoscaling(policy.min_replicas, maximum, tuple(policy.metrics))

    # --- validation ---------------------------------------------------------------------------

    def _kind_errors(self, job: PyTorchJob, specs_path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        specs = job.replica_specs
        if MASTER in specs and specs[MASTER].replicas != 1:
            errors.append(forbidden(f"{specs_path}.{MASTER}.replicas", "must be 1"))
        if WORKER in specs and (specs[WORKER].replicas or 0) < 1:
            errors.append(forbidden(f"{specs_path}.{WORKER}.replicas", "must be at least 1"))
        elastic = job.spec.elastic_policy
        if elastic is not None:
            if WORKER not in specs:
                errors.append(
                    required(f"{specs_path}.{WORKER}", "must be configured if elastic policy is used")
                )
            if elastic.n_proc_per_node is not None and job.spec.nproc_per_node is not None:
                errors.append(
                    forbidden("spec.elasticPolicy.nProcPerNode", "must not be used with spec.nprocPerNode")
                )
        nproc = job.spec.nproc_per_node
        if nproc is not None and nproc not in NPROC_KEYWORDS and not _GO_ATOI.fullmatch(nproc):
            errors.append(invalid("spec.nprocPerNode", nproc, "must be auto, cpu, gpu or a whole number"))
        return errors

    # --- roles and env ------------------------------------------------------------------------

    def is_master_role(self, job: PyTorchJob, replica_type: str, index: int) -> bool:
        if MASTER in job.replica_specs:
            return replica_type == MASTER
        return replica_type == WORKER and index == 0

    def replica_env(
        self, job: PyTorchJob, replica_type: str, index: int, addressing: Addressing
    ) -> list[EnvVar]:
        found: list[EnvVar] = [env("PYTHONUNBUFFERED", "1")]
        if MASTER in job.replica_specs:
            port = addressing.port(job, MASTER, 0, self.container_port(job, MASTER))
            host = addressing.host(job, MASTER, 0)
            world_size = total_replicas(job) * nproc_as_int(job.spec.nproc_per_node)
            rank = index + 1 if replica_type == WORKER else index
            found += [
                env("MASTER_PORT", port),
                env("PET_MASTER_PORT", port),
                env("MASTER_ADDR", host),
                env("PET_MASTER_ADDR", host),
                env("WORLD_SIZE", world_size),
                env("RANK", rank),
                env("PET_NODE_RANK", rank),
            ]
        if job.spec.nproc_per_node is not None:
            found.append(env("PET_NPROC_PER_NODE", job.spec.nproc_per_node))
        if job.spec.elastic_policy is None:
            found.append(env("PET_NNODES", total_replicas(job)))
        else:
            found += self._elastic_env(job, job.spec.elastic_policy, addressing)
        return found

    def _elastic_env(self, job: PyTorchJob, policy: ElasticPolicy, addressing: Addressing) -> list[EnvVar]:
        host = policy.rdzv_host if policy.rdzv_host is not None else addressing.host(job, WORKER, 0)
        port = (
            policy.rdzv_port
            if policy.rdzv_port is not None
            else addressing.port(job, WORKER, 0, self.container_port(job, WORKER))
        )
        backend = policy.rdzv_backend.value if policy.rdzv_backend is not None else "c10d"
        if policy.min_replicas is None and policy.max_replicas is None:
            nnodes = str(replicas_of(job, WORKER))
        else:
            nnodes = f"{policy.min_replicas}:{policy.max_replicas}"
        found = [
            env("PET_RDZV_ENDPOINT", f"{host}:{port}"),
            env("PET_RDZV_BACKEND", backend),
            env("PET_NNODES", nnodes),
        ]
        if policy.max_restarts is not None:
            found.append(env("PET_MAX_RESTARTS", policy.max_restarts))
        if policy.n_proc_per_node is not None:
            found.append(env("PET_NPROC_PER_NODE", policy.n_proc_per_node))
        if policy.rdzv_id is not None:
            found.append(env("PET_RDZV_ID", policy.rdzv_id))
        if policy.rdzv_conf is not None:
            found.append(
                env("PET_RDZV_CONF", ",".join(f"{c.key or ''}={c.value or ''}" for c in policy.rdzv_conf))
            )
        if policy.standalone:
            found.append(env("PET_STANDALONE", ""))
        return found

    def init_containers(
        self,
        job: PyTorchJob,
        replica_type: str,
        index: int,
        addressing: Addressing,
        settings: InitSettings,
    ) -> list[dict[str, Any]]:
        """``init-pytorch`` holds workers until the master's service name resolves (Kubernetes only);
        the operator's template, when given, replaces it."""
        if addressing.colocated or replica_type != WORKER or MASTER not in job.replica_specs:
            return []
        master = addressing.host(job, MASTER, 0)
        if settings.pytorch_init_template is not None:
            return settings.pytorch_init_template(
                master_addr=master,
                image=settings.pytorch_init_image,
                max_tries=settings.pytorch_init_max_tries,
            )
        script = (
            f"err=1;for i in $(seq {settings.pytorch_init_max_tries}); do if nslookup {master}; "
            "then err=0 && break; fi;echo waiting for master; sleep 2; done; exit $err"
        )
        return [
            {
                "name": "init-pytorch",
                "image": settings.pytorch_init_image,
                "imagePullPolicy": "IfNotPresent",
                "resources": {
                    "limits": {"cpu": "100m", "memory": "20Mi"},
                    "requests": {"cpu": "50m", "memory": "10Mi"},
                },
                "command": ["sh", "-c", script],
            }
        ]

    def waits_for_master(self, job: PyTorchJob, replica_type: str) -> bool:
        return replica_type == WORKER and MASTER in job.replica_specs

    # --- status -------------------------------------------------------------------------------

    def status_rules(self, context: StatusContext) -> list[ConditionProposal]:
        job = context.job
        assert isinstance(job, PyTorchJob)
        has_master = MASTER in job.replica_specs
        found: list[ConditionProposal] = []
        for replica_type in (t for t in self.replica_types if t in job.replica_specs):
            counted = counts(context, replica_type)
            if has_master and replica_type == MASTER:
                decided, succeeded = deciding_replica_rule(self.kind, job, counted)
                if succeeded:
                    return [*found, *decided]
                found += decided
            elif not has_master and replica_type == WORKER:
                elastic = job.spec.elastic_policy is not None
                found += all_workers_rule(self.kind, job, counted, any_success_suffices=elastic)
            found += restart_or_fail_when_replicas_lack(self.kind, context, replica_type, counted)
        return found


def _default_elastic_bounds(policy: ElasticPolicy, job: PyTorchJob) -> ElasticPolicy:
    """min/max: one given → both equal it; neither → both are the Worker replicas (if any)."""
    if policy.min_replicas is not None and policy.max_replicas is not None:
        return policy
    workers = job.replica_specs[WORKER].replicas if WORKER in job.replica_specs else None
    low, high = default_min_max(policy.min_replicas, policy.max_replicas, workers)
    return policy.model_copy(update={"min_replicas": low, "max_replicas": high})
