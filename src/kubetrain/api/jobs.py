"""The job kinds of ``kubeflow.org/v1`` and the MPIJob of ``kubeflow.org/v2beta1``.

Every kind is a ``TrainingJob`` whose spec names its replica map differently
(``pytorchReplicaSpecs``, ``tfReplicaSpecs``, ...); ``replica_specs`` and ``with_replica_specs``
hide that difference from the rest of kubetrain.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar, Self

from pydantic import Field

from kubetrain.api.base import WireModel
from kubetrain.api.common import CleanPodPolicy, JobStatus, ObjectMeta, ReplicaSpec, RunPolicy
from kubetrain.api.progress import StatusRoute

GROUP = "kubeflow.org"
V1 = f"{GROUP}/v1"
V2BETA1 = f"{GROUP}/v2beta1"


class JobSpec(WireModel):
    REPLICA_SPECS_FIELD: ClassVar[str]
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    """How the job runs: pod cleanup, TTL, deadline, backoff, gang scheduling, suspension."""

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        specs: dict[str, ReplicaSpec] = getattr(self, self.REPLICA_SPECS_FIELD)
        return specs


class TrainingJob(WireModel):
    """Any training job. ``API_VERSION``/``KIND`` identify the concrete model."""

    API_VERSION: ClassVar[str] = V1
    KIND: ClassVar[str]
    PLURAL: ClassVar[str]

    api_version: str = V1
    kind: str = ""
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: JobSpec
    status: JobStatus = Field(default_factory=JobStatus)

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.spec.replica_specs

    @property
    def replica_specs_path(self) -> str:
        """Wire path of the replica map, e.g. ``spec.pytorchReplicaSpecs``, for error messages."""
        field = type(self.spec).model_fields[self.spec.REPLICA_SPECS_FIELD]
        return f"spec.{field.alias or self.spec.REPLICA_SPECS_FIELD}"

    @property
    def run_policy(self) -> RunPolicy:
        return self.spec.run_policy

    def with_replica_specs(self, specs: dict[str, ReplicaSpec]) -> Self:
        spec = self.spec.model_copy(update={self.spec.REPLICA_SPECS_FIELD: specs})
        return self.model_copy(update={"spec": spec})

    def with_run_policy(self, run_policy: RunPolicy) -> Self:
        return self.model_copy(update={"spec": self.spec.model_copy(update={"run_policy": run_policy})})

    @property
    def shown_kind(self) -> str:
        """The kind a person is shown: its own."""
        return self.KIND

    @classmethod
    def status_route(cls) -> StatusRoute:
        """Where its training reports progress: its own kind's status path."""
        return StatusRoute.of(cls.API_VERSION, cls.PLURAL)

    def with_status(self, status: JobStatus) -> Self:
        return self.model_copy(update={"status": status})

    def to_wire(self) -> dict[str, Any]:
        data = super().to_wire()
        data["apiVersion"], data["kind"] = self.API_VERSION, self.KIND
        return data


# --- PyTorchJob -----------------------------------------------------------------------------


class RdzvBackend(StrEnum):
    C10D = "c10d"
    ETCD = "etcd"
    ETCD_V2 = "etcd-v2"


class RDZVConf(WireModel):
    key: str | None = None
    """Rendezvous option name."""
    value: str | None = None
    """Rendezvous option value."""


class ElasticPolicy(WireModel):
    min_replicas: int | None = None
    """Fewest Workers the elastic job runs with; defaults to maxReplicas or Worker replicas."""
    max_replicas: int | None = None
    """Most Workers the elastic job runs with; defaults to minReplicas or Worker replicas."""
    rdzv_backend: RdzvBackend | None = None
    """torchrun rendezvous backend: c10d (default), etcd or etcd-v2."""
    rdzv_port: int | None = None
    """Rendezvous port; defaults to the Worker's pytorchjob-port."""
    rdzv_host: str | None = None
    """Rendezvous host; defaults to the job's worker-0 service."""
    rdzv_id: str | None = None
    """Rendezvous id."""
    rdzv_conf: list[RDZVConf] | None = None
    """Extra rendezvous options, passed as key=value pairs."""
    standalone: bool | None = None
    """Run torchrun with --standalone."""
    n_proc_per_node: int | None = Field(default=None, alias="nProcPerNode")
    """Deprecated: use spec.nprocPerNode (the two are mutually exclusive)."""
    max_restarts: int | None = None
    """torchrun --max-restarts."""
    metrics: list[dict[str, Any]] | None = None
    """autoscaling/v2 MetricSpecs; when set, an HPA scales the Workers."""


class PyTorchJobSpec(JobSpec):
    REPLICA_SPECS_FIELD: ClassVar[str] = "pytorch_replica_specs"
    pytorch_replica_specs: dict[str, ReplicaSpec]
    """Master (at most 1) and Worker replicas."""
    nproc_per_node: str | None = None
    """Processes per pod: auto (default), cpu, gpu or a number."""
    elastic_policy: ElasticPolicy | None = None
    """Elastic training with torchrun: the Worker count may change between min and max."""


class PyTorchJob(TrainingJob):
    KIND: ClassVar[str] = "PyTorchJob"
    PLURAL: ClassVar[str] = "pytorchjobs"
    kind: str = "PyTorchJob"
    spec: PyTorchJobSpec


# --- TFJob ----------------------------------------------------------------------------------


class SuccessPolicy(StrEnum):
    DEFAULT = ""
    ALL_WORKERS = "AllWorkers"


class TFJobSpec(JobSpec):
    REPLICA_SPECS_FIELD: ClassVar[str] = "tf_replica_specs"
    tf_replica_specs: dict[str, ReplicaSpec] = Field(alias="tfReplicaSpecs")
    """Chief or Master, PS, Worker and Evaluator replicas."""
    success_policy: SuccessPolicy | None = None
    """Empty (default): the chief, or worker 0, decides success; AllWorkers: every worker must."""
    enable_dynamic_worker: bool | None = None
    """Workers may join and leave: sparse TF_CONFIG, failed workers tolerated."""


class TFJob(TrainingJob):
    KIND: ClassVar[str] = "TFJob"
    PLURAL: ClassVar[str] = "tfjobs"
    kind: str = "TFJob"
    spec: TFJobSpec


# --- XGBoostJob -----------------------------------------------------------------------------


class XGBoostJobSpec(JobSpec):
    REPLICA_SPECS_FIELD: ClassVar[str] = "xgb_replica_specs"
    xgb_replica_specs: dict[str, ReplicaSpec]
    """Master (exactly 1, runs the tracker) and Worker replicas."""


class XGBoostJob(TrainingJob):
    KIND: ClassVar[str] = "XGBoostJob"
    PLURAL: ClassVar[str] = "xgboostjobs"
    kind: str = "XGBoostJob"
    spec: XGBoostJobSpec


# --- PaddleJob ------------------------------------------------------------------------------


class PaddleElasticPolicy(WireModel):
    min_replicas: int | None = None
    """Fewest Workers; accepted, not acted on (as upstream)."""
    max_replicas: int | None = None
    """Most Workers; accepted, not acted on (as upstream)."""
    max_restarts: int | None = None
    """Accepted, not acted on (as upstream)."""
    metrics: list[dict[str, Any]] | None = None
    """Accepted, not acted on (as upstream)."""


class PaddleJobSpec(JobSpec):
    REPLICA_SPECS_FIELD: ClassVar[str] = "paddle_replica_specs"
    paddle_replica_specs: dict[str, ReplicaSpec]
    """Master and Worker replicas."""
    elastic_policy: PaddleElasticPolicy | None = None
    """Elastic settings, accepted for compatibility; the Paddle controller ignores them."""


class PaddleJob(TrainingJob):
    KIND: ClassVar[str] = "PaddleJob"
    PLURAL: ClassVar[str] = "paddlejobs"
    kind: str = "PaddleJob"
    spec: PaddleJobSpec


# --- JAXJob ---------------------------------------------------------------------------------


class JAXJobSpec(JobSpec):
    REPLICA_SPECS_FIELD: ClassVar[str] = "jax_replica_specs"
    jax_replica_specs: dict[str, ReplicaSpec] = Field(alias="jaxReplicaSpecs")
    """Worker replicas; worker 0 is the coordinator."""


class JAXJob(TrainingJob):
    KIND: ClassVar[str] = "JAXJob"
    PLURAL: ClassVar[str] = "jaxjobs"
    kind: str = "JAXJob"
    spec: JAXJobSpec


# --- MXJob ----------------------------------------------------------------------------------


class MXJobMode(StrEnum):
    TRAIN = "MXTrain"
    TUNE = "MXTune"


class MXJobSpec(JobSpec):
    REPLICA_SPECS_FIELD: ClassVar[str] = "mx_replica_specs"
    mx_replica_specs: dict[str, ReplicaSpec]
    """Scheduler, Server and Worker replicas (MXTune: TunerTracker, TunerServer, Tuner)."""
    job_mode: MXJobMode | None = None
    """MXTrain or MXTune."""


class MXJob(TrainingJob):
    KIND: ClassVar[str] = "MXJob"
    PLURAL: ClassVar[str] = "mxjobs"
    kind: str = "MXJob"
    spec: MXJobSpec


# --- MPIJob (kubeflow.org/v1, the kubectl-exec design) ----------------------------------------


class MPIJobSpec(JobSpec):
    REPLICA_SPECS_FIELD: ClassVar[str] = "mpi_replica_specs"
    slots_per_worker: int | None = None
    """MPI slots per Worker in the hostfile; defaults to 1."""
    clean_pod_policy: CleanPodPolicy | None = None
    """Deprecated top-level copy of ``runPolicy.cleanPodPolicy`` (runPolicy wins)."""
    mpi_replica_specs: dict[str, ReplicaSpec]
    """Launcher (exactly 1, runs mpirun) and Worker replicas."""
    main_container: str | None = None
    """The container mpirun execs into on Workers."""


class MPIJob(TrainingJob):
    KIND: ClassVar[str] = "MPIJob"
    PLURAL: ClassVar[str] = "mpijobs"
    kind: str = "MPIJob"
    spec: MPIJobSpec


# --- MPIJob (kubeflow.org/v2beta1, the mpi-operator SSH design) -------------------------------


class LauncherCreationPolicy(StrEnum):
    AT_STARTUP = "AtStartup"
    WAIT_FOR_WORKERS_READY = "WaitForWorkersReady"


class MPIImplementation(StrEnum):
    OPEN_MPI = "OpenMPI"
    INTEL = "Intel"
    MPICH = "MPICH"


class MPIJobV2Spec(JobSpec):
    REPLICA_SPECS_FIELD: ClassVar[str] = "mpi_replica_specs"
    slots_per_worker: int | None = None
    """MPI slots per Worker in the hostfile."""
    run_launcher_as_worker: bool | None = None
    """Also list the Launcher as a host in the hostfile."""
    mpi_replica_specs: dict[str, ReplicaSpec]
    """Launcher (exactly 1, runs mpirun) and Worker replicas."""
    ssh_auth_mount_path: str | None = None
    """Where the job's SSH key Secret is mounted."""
    launcher_creation_policy: LauncherCreationPolicy | None = None
    """AtStartup, or WaitForWorkersReady: start the launcher once every worker is ready."""
    mpi_implementation: MPIImplementation | None = None
    """OpenMPI, Intel or MPICH: decides the hostfile format and launcher env."""


class MPIJobV2(TrainingJob):
    API_VERSION: ClassVar[str] = V2BETA1
    KIND: ClassVar[str] = "MPIJob"
    PLURAL: ClassVar[str] = "mpijobs"
    api_version: str = V2BETA1
    kind: str = "MPIJob"
    spec: MPIJobV2Spec


JOB_MODELS: tuple[type[TrainingJob], ...] = (
    PyTorchJob,
    TFJob,
    XGBoostJob,
    PaddleJob,
    JAXJob,
    MXJob,
    MPIJob,
    MPIJobV2,
)
