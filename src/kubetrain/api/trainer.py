"""Kubeflow Trainer v2's API (``trainer.kubeflow.org/v1alpha1``, as v2.3.0 serves it): ``TrainJob`` says what
to train, a ``TrainingRuntime`` (namespaced) or ``ClusterTrainingRuntime`` says how (an ML policy, a gang
policy and a JobSet template).

Field names, defaults and limits are v2.3.0's (``pkg/apis/trainer/v1alpha1``). Pod templates inside the
JobSet template, env vars, resources and the parts of a runtime patch that Kubernetes types define are kept
as written (``dict``), as the v1 kinds keep their pod templates: the API server checks them when the pods are
made, and the CRDs stay small.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar

from pydantic import Field

from kubetrain.api.base import Time, WireModel
from kubetrain.api.common import ObjectMeta
from kubetrain.api.progress import TrainerStatus

GROUP = "trainer.kubeflow.org"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

TRAINJOB_CONTROLLER = f"{GROUP}/trainjob-controller"
"""``spec.managedBy`` of a TrainJob the built-in controller (kubetrain's operator) reconciles."""
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
"""``spec.managedBy`` of a TrainJob MultiKueue dispatches to a worker cluster: left alone here."""
MANAGED_BY_VALUES = (TRAINJOB_CONTROLLER, MULTIKUEUE_CONTROLLER)

CLUSTER_TRAINING_RUNTIME = "ClusterTrainingRuntime"
TRAINING_RUNTIME = "TrainingRuntime"

MAX_ENV = 128
MAX_ARGS = 128
MAX_RUNTIME_PATCHES = 16
MAX_CONDITIONS = 8
MAX_JOBS_STATUS = 100
MAX_STORAGE_URI = 2048
STORAGE_URI_PATTERN = r"^[A-Za-z][A-Za-z0-9+.-]*://.+$"
NAME_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
MAX_NAME = 63


# --- TrainJob ----------------------------------------------------------------------------------------


class RuntimeRef(WireModel):
    name: str
    """Name of the runtime. A namespaced TrainingRuntime must be in the TrainJob's namespace."""
    api_group: str | None = None
    """API group of the runtime; defaults to ``trainer.kubeflow.org``."""
    kind: str | None = None
    """``ClusterTrainingRuntime`` (default) or ``TrainingRuntime``."""


class LocalObjectReference(WireModel):
    name: str = ""
    """Name of the object, in the TrainJob's namespace."""


class DatasetInitializer(WireModel):
    storage_uri: str | None = None
    """Where the dataset comes from (``hf://...``, ``s3://...``); empty or ``scheme://...``."""
    env: list[dict[str, Any]] | None = None
    """Env vars for the dataset initializer container, merged over the runtime's."""
    secret_ref: LocalObjectReference | None = None
    """A Secret with the credentials to download the dataset, added as ``envFrom``."""


class ModelInitializer(WireModel):
    storage_uri: str | None = None
    """Where the pre-trained model comes from (``hf://...``, ``s3://...``); empty or ``scheme://...``."""
    env: list[dict[str, Any]] | None = None
    """Env vars for the model initializer container, merged over the runtime's."""
    secret_ref: LocalObjectReference | None = None
    """A Secret with the credentials to download the model, added as ``envFrom``."""


class Initializer(WireModel):
    dataset: DatasetInitializer | None = None
    """The dataset initializer (the runtime's ``dataset-initializer`` job)."""
    model: ModelInitializer | None = None
    """The model initializer (the runtime's ``model-initializer`` job)."""


class Trainer(WireModel):
    image: str | None = None
    """Image of the training container (``node``), replacing the runtime's."""
    command: list[str] | None = None
    """Entrypoint of the training container, replacing the runtime's."""
    args: list[str] | None = None
    """Arguments of the training container, replacing the runtime's."""
    env: list[dict[str, Any]] | None = None
    """Env vars of the training container, merged over the runtime's."""
    num_nodes: int | None = None
    """How many training nodes (pods); defaults to the runtime's ``mlPolicy.numNodes``."""
    resources_per_node: dict[str, Any] | None = None
    """Compute resources of each node's training container, merged over the runtime's."""
    num_proc_per_node: int | None = None
    """Processes per node (torch: ``auto`` when unset; MPI: hostfile slots)."""


class RuntimePatch(WireModel):
    manager: str
    """Who owns this patch (e.g. ``kueue.x-k8s.io/manager``): a domain-prefixed path."""
    time: Time | None = None
    """When the patch was last written."""
    training_runtime_spec: dict[str, Any] | None = None
    """The patch: ``template`` (a JobSet template patch: labels and annotations, and per replicated job a
    pod spec patch of serviceAccountName, volumes, containers' env/volumeMounts/securityContext,
    imagePullSecrets, securityContext, nodeSelector, affinity, tolerations, schedulingGates and
    terminationGracePeriodSeconds)."""


class TrainJobSpec(WireModel):
    runtime_ref: RuntimeRef
    """The training runtime this job runs on. Immutable."""
    initializer: Initializer | None = None
    """Dataset and model initialization. Immutable."""
    trainer: Trainer | None = None
    """What to train: image, command, env, nodes, resources. Immutable."""
    runtime_patches: list[RuntimePatch] | None = None
    """Patches over the runtime's template, each owned by one manager."""
    suspend: bool | None = None
    """True holds the job: its JobSet is suspended (no pods). Defaults to false."""
    active_deadline_seconds: int | None = None
    """Seconds the job may be active (from creation or its last resume) before it is failed. Immutable."""
    managed_by: str | None = None
    """``trainer.kubeflow.org/trainjob-controller`` (default) or ``kueue.x-k8s.io/multikueue``. Immutable."""


class Condition(WireModel):
    """A ``metav1.Condition``."""

    type: str
    """``Suspended``, ``Complete`` or ``Failed`` (and kubetrain's ``Stalled``)."""
    status: str
    """``True``, ``False`` or ``Unknown``."""
    observed_generation: int | None = None
    last_transition_time: Time | None = None
    reason: str = ""
    message: str = ""


class JobStatus(WireModel):
    """One replicated job of the TrainJob's JobSet, counted in child Jobs (copied from the JobSet)."""

    name: str
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    active: int = 0
    suspended: int = 0


class TrainJobStatus(WireModel):
    conditions: list[Condition] | None = None
    """The job's conditions: ``Suspended``, ``Complete``, ``Failed``."""
    jobs_status: list[JobStatus] | None = None
    """Its JobSet's replicated jobs, counted in child Jobs."""
    trainer_status: TrainerStatus | None = None
    """The progress and metrics the training last reported."""

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions or () if c.type == type_), None)

    def is_true(self, type_: str) -> bool:
        found = self.condition(type_)
        return found is not None and found.status == "True"

    @property
    def is_finished(self) -> bool:
        return self.is_true(TrainJobConditionType.COMPLETE) or self.is_true(TrainJobConditionType.FAILED)


class TrainJobConditionType(StrEnum):
    SUSPENDED = "Suspended"
    COMPLETE = "Complete"
    FAILED = "Failed"


class TrainJob(WireModel):
    """A training job on a training runtime (Kubeflow Trainer v2)."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "TrainJob"
    PLURAL: ClassVar[str] = "trainjobs"

    api_version: str = API_VERSION
    kind: str = "TrainJob"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TrainJobSpec
    status: TrainJobStatus = Field(default_factory=TrainJobStatus)

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"

    def to_wire(self) -> dict[str, Any]:
        data = super().to_wire()
        data["apiVersion"], data["kind"] = self.API_VERSION, self.KIND
        return data


# --- TrainingRuntime / ClusterTrainingRuntime ---------------------------------------------------------


class EnvInjectionTarget(WireModel):
    job_name: str
    """The replicated job whose containers also get the ``PET_*`` env (e.g. ``node``)."""
    container_names: list[str]
    """Its containers that get them (not ``node``, which always does)."""


class EnvInjection(WireModel):
    targets: list[EnvInjectionTarget] | None = None
    """Containers besides ``node`` that get the ``PET_*`` env."""


class TorchMLPolicySource(WireModel):
    env_injection: EnvInjection | None = None
    """Sidecar or init containers that also get the ``PET_*`` env."""


class MPIImplementation(StrEnum):
    OPEN_MPI = "OpenMPI"
    INTEL = "Intel"
    MPICH = "MPICH"


class MPIMLPolicySource(WireModel):
    num_proc_per_node: int | None = None
    """Slots per node in the hostfile. Defaults to 1."""
    mpi_implementation: str | None = None
    """The MPI implementation the hostfile is written for; only ``OpenMPI`` (the default)."""
    ssh_auth_mount_path: str | None = None
    """Where the job's SSH key is mounted. Defaults to ``/root/.ssh``."""
    run_launcher_as_node: bool | None = None
    """Also run a training process on the launcher (it is listed in the hostfile). Defaults to false."""


class JAXMLPolicySource(WireModel):
    """JAX multi-process: ``JAX_*`` env on every node."""


class XGBoostMLPolicySource(WireModel):
    """XGBoost collective: ``DMLC_*`` env on every node."""


class FluxMLPolicySource(WireModel):
    num_proc_per_node: int | None = None
    """Flux processes per node. Defaults to 1."""


class MLPolicy(WireModel):
    num_nodes: int | None = None
    """Training nodes (pods) of the ``trainer`` job. Defaults to 1."""
    torch: TorchMLPolicySource | None = None
    """PyTorch (torchrun): ``PET_*`` env."""
    mpi: MPIMLPolicySource | None = None
    """MPI: SSH keys, hostfile, launcher env."""
    flux: FluxMLPolicySource | None = None
    """Flux HPC (accepted; kubetrain does not run it)."""
    jax: JAXMLPolicySource | None = None
    """JAX: ``JAX_*`` env."""
    xgboost: XGBoostMLPolicySource | None = None
    """XGBoost: ``DMLC_*`` env."""


class CoschedulingPodGroupPolicySource(WireModel):
    schedule_timeout_seconds: int | None = None
    """How long the PodGroup may wait to be scheduled whole. Defaults to 60."""


class VolcanoPodGroupPolicySource(WireModel):
    network_topology: dict[str, Any] | None = None
    """Volcano's NetworkTopologySpec (``mode``, ``highestTierAllowed``)."""


class PodGroupPolicy(WireModel):
    coscheduling: CoschedulingPodGroupPolicySource | None = None
    """scheduler-plugins' coscheduling PodGroup."""
    volcano: VolcanoPodGroupPolicySource | None = None
    """Volcano's PodGroup."""


class TemplateMeta(WireModel):
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class JobSetTemplateSpec(WireModel):
    metadata: TemplateMeta | None = None
    """Labels and annotations of the JobSet (its name and namespace are the TrainJob's)."""
    spec: dict[str, Any] = Field(default_factory=dict)
    """A JobSet spec (``jobset.x-k8s.io/v1alpha2``): replicatedJobs, network, successPolicy, failurePolicy,
    startupPolicy, ..."""


class TrainingRuntimeSpec(WireModel):
    ml_policy: MLPolicy | None = None
    """The ML framework's parameters: nodes and one of torch, mpi, jax, xgboost, flux (none: plain)."""
    pod_group_policy: PodGroupPolicy | None = None
    """Gang scheduling: coscheduling or volcano."""
    template: JobSetTemplateSpec = Field(default_factory=JobSetTemplateSpec)
    """The JobSet every TrainJob on this runtime gets."""


class TrainingRuntime(WireModel):
    """How to train, in one namespace (Kubeflow Trainer v2)."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = TRAINING_RUNTIME
    PLURAL: ClassVar[str] = "trainingruntimes"
    NAMESPACED: ClassVar[bool] = True

    api_version: str = API_VERSION
    kind: str = TRAINING_RUNTIME
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TrainingRuntimeSpec = Field(default_factory=TrainingRuntimeSpec)

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    def to_wire(self) -> dict[str, Any]:
        data = super().to_wire()
        data["apiVersion"], data["kind"] = self.API_VERSION, self.KIND
        return data


class ClusterTrainingRuntime(TrainingRuntime):
    """How to train, for every namespace (Kubeflow Trainer v2)."""

    KIND: ClassVar[str] = CLUSTER_TRAINING_RUNTIME
    PLURAL: ClassVar[str] = "clustertrainingruntimes"
    NAMESPACED: ClassVar[bool] = False

    kind: str = CLUSTER_TRAINING_RUNTIME


RUNTIME_MODELS: tuple[type[TrainingRuntime], ...] = (ClusterTrainingRuntime, TrainingRuntime)
TRAINER_MODELS: tuple[type[WireModel], ...] = (TrainJob, ClusterTrainingRuntime, TrainingRuntime)
