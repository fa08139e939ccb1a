"""The one protocol every framework implements. Nothing outside ``frameworks/`` knows framework names.

A framework answers: which replica types exist and how they default, which replica is the master,
what environment each replica receives, and when the job has succeeded or failed. The engine and
both substrates ask only these questions.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeVar

from kubetrain.api.common import ConditionType, ReplicaStatus, RestartPolicy
from kubetrain.api.errors import FieldError
from kubetrain.api.jobs import TrainingJob
from kubetrain.frameworks.addressing import Addressing, replica_name
from kubetrain.frameworks.labels import (
    JOB_ROLE_LABEL,
    REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL,
    job_labels,
)

JobT = TypeVar("JobT", bound=TrainingJob)

Awaited = Literal["Ready", "ReadyOrSucceeded", "Complete"]
"""What a replica type waits for of another before its replicas are created: every replica Ready
(mpi-operator's WaitForWorkersReady), Ready or already succeeded (JobSet's ``dependsOn: Ready``), or
succeeded (``dependsOn: Complete``)."""

EnvVar = dict[str, Any]
"""A Kubernetes ``EnvVar`` (``{"name": ..., "value": ...}`` or ``{"name": ..., "valueFrom": ...}``)."""


class EnvTarget(Enum):
    """Which containers of a replica's pod receive the injected environment."""

    ALL_CONTAINERS = "all"
    DEFAULT_CONTAINER = "default"
    FIRST_CONTAINER = "first"


class ReplicaPhase(Protocol):
    """What the status rules may look at for one replica (a pod, or a local process): the engine hands them
    its observations as they are (a 5,000-replica job's reconcile made a copy of each, 5 % of its CPU)."""

    @property
    def replica_type(self) -> str: ...
    @property
    def index(self) -> int: ...
    @property
    def phase(self) -> str:
        """``Pending`` | ``Running`` | ``Succeeded`` | ``Failed`` | ``Unknown`` (Kubernetes pod phases)."""

    @property
    def exit_code(self) -> int | None:
        """Exit code of the framework's default container, when it has terminated."""

    @property
    def reason(self) -> str | None:
        """Pod ``status.reason`` (``Evicted``, ...)."""

    @property
    def message(self) -> str | None:
        """Why it failed, in words, when its controller says (a batch Job's ``Failed`` condition)."""


@dataclass(frozen=True)
class Autoscaling:
    """An autoscaler on the job's ``scale`` subresource: an ``autoscaling/v2`` HPA's bounds and metrics."""

    min_replicas: int | None
    max_replicas: int
    metrics: tuple[Mapping[str, Any], ...]


class EventStyle(StrEnum):
    """Whose way a kind records events beside its conditions: the operator that defines it (upstream's
    training-operator for the v1 kinds, the mpi-operator for MPIJob v2beta1), so that the events a user or a
    tool reads are the ones that operator records."""

    TRAINING_OPERATOR = "training-operator"
    """No event for ``Created`` or ``Running``; ``Suspended`` on every reconcile while suspended;
    ``Resumed`` when it is resumed."""
    MPI_OPERATOR = "mpi-operator"
    """``Created``, ``Suspended`` and ``Resumed`` once each, when they happen; a suspended job's conditions
    and launcher Job as that operator makes them (``engine.suspension``)."""


@dataclass(frozen=True)
class Announcement:
    """The event a status rule records each time it holds, whether or not its condition changes (upstream
    records them in its status update, on every reconcile, and a condition that is already set, or a job
    that already failed, does not stop it)."""

    type: Literal["Normal", "Warning"]
    reason: str | None = None
    """When it is not the condition's (MPI v1's ``mpijobsSucceeded``)."""
    message: str | None = None
    """When it is not the condition's (the mpi-operator's ``Running`` event has no full stop)."""


@dataclass(frozen=True)
class ConditionProposal:
    """A condition a framework's status rules want set; the engine applies the state machine."""

    type: ConditionType
    reason: str
    message: str
    event: Announcement | None = None
    """The event recorded with it, each time it is proposed; None: none (upstream's ``Running``)."""


@dataclass(frozen=True)
class StatusEvent:
    """An event a status rule records each time it holds, with no condition: upstream's MPIJob v1 controller
    records the launcher's outcome as events, then writes only the conditions of its generic replica rules."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass(frozen=True)
class StatusContext:
    """Everything a framework's success/failure rules need (upstream ``UpdateJobStatus`` inputs)."""

    job: TrainingJob
    """The defaulted job; ``job.status`` holds the conditions as they stand before these rules run
    (some rules look at them: TF keeps an existing Restarting, XGBoost adds Running only once)."""
    replica_statuses: Mapping[str, ReplicaStatus]
    """This round's counts per replica type (active = running, succeeded, failed)."""
    replicas: Sequence[ReplicaPhase]
    colocated: bool
    """Local substrate: replica types the framework does not materialise are not observed."""
    retried_by_controller: frozenset[str] = frozenset()
    """Replica types run by a ``batch/v1`` Job on this substrate: a failure observed for them is final
    (the Job already spent its ``backoffLimit``)."""


class Framework(ABC, Generic[JobT]):
    """One training framework. Subclasses set the class attributes and implement the rules."""

    model: ClassVar[type[TrainingJob]]
    scheme_name: ClassVar[str]
    """The name upstream's ``--enable-scheme`` uses (``pytorchjob``, ``tfjob``, ...)."""
    framework_label: ClassVar[str]
    """The ``framework`` label of upstream's metrics (``pytorch``, ``tensorflow``, ...)."""
    controller_name: ClassVar[str]
    """Value of the ``training.kubeflow.org/operator-name`` label (``pytorchjob-controller``)."""
    replica_types: ClassVar[tuple[str, ...]]
    """Canonical replica types, in the order replicas are created and listed."""
    default_container: ClassVar[str]
    default_port_name: ClassVar[str | None]
    default_port: ClassVar[int | None]
    default_restart_policy: ClassVar[RestartPolicy]
    scale_replica_type: ClassVar[str | None] = None
    """The replica type the CRD ``scale`` subresource scales, if any."""
    env_target: ClassVar[EnvTarget] = EnvTarget.ALL_CONTAINERS
    per_replica_services: ClassVar[bool] = True
    """One headless Service per replica (every v1 kind but MPIJob)."""
    managed_by_self: ClassVar[str] = "kubeflow.org/training-operator"
    """The ``runPolicy.managedBy`` value meaning "reconciled by us"; any other set value is skipped."""
    event_style: ClassVar[EventStyle] = EventStyle.TRAINING_OPERATOR
    """Whose way its events are recorded (the operator that defines the kind)."""
    counts_end_with: ClassVar[str | None] = None
    """A replica type whose end (succeeded or failed) leaves the other types uncounted, and which is
    listed in ``replicaStatuses`` only once it exists: the mpi-operator lists workers only while its
    launcher Job runs, and the MPIJob v1 controller stops counting them once its launcher pod ended."""
    event_source: ClassVar[str] = ""
    """The component its events name as their source; ``controller_name`` when empty (the mpi-operator's
    controller records as ``mpi-job-controller`` though its pods are labelled ``mpi-operator``)."""
    companions_while_suspended: ClassVar[bool] = True
    """Whether ``companion_objects`` and ``config_files`` exist while the job is suspended (the mpi-operator
    makes them; the MPIJob v1 controller makes nothing for a suspended job)."""
    deleted_job_reason: ClassVar[str] = "SuccessfulDeleteJob"
    """The reason of the event recorded when the TTL deletes the job (PyTorch, Paddle and JAX reuse
    ``SuccessfulDeletePod`` upstream)."""
    replaces_failed_replicas: ClassVar[frozenset[RestartPolicy]] = frozenset(
        {RestartPolicy.ON_FAILURE, RestartPolicy.ALWAYS, RestartPolicy.EXIT_CODE}
    )
    """The restart policies under which a replica whose pod failed is deleted to be created again (under
    ``ExitCode`` only for an exit code of 128 or more), as upstream's common pod reconciler does. Its MPIJob
    v1 controller has its own, which never deletes a failed pod: its status rules fail the job instead."""
    exit_code_events: ClassVar[bool] = True
    """An ``ExitedWithCode`` event for each replica whose default container has ended, on every reconcile,
    as upstream's common pod reconciler records it (its MPIJob controllers have their own, which do not)."""
    mpi_operator_gang: ClassVar[bool] = False
    """Gang scheduling as mpi-operator does it (§4.9): ``schedulerName`` forced over the template's, no
    Volcano ``task-spec`` annotation, pods created without waiting for the PodGroup's admission."""
    config_mount_path: ClassVar[str | None] = None
    """Where ``config_files`` are mounted in pods (MPI: ``/etc/mpi``). The local substrate writes them
    to its own directory and rewrites env values under this path to point there."""
    config_file_modes: ClassVar[Mapping[str, int]] = {}
    """File mode of each ``config_files`` entry when mounted (MPI: scripts 0o555, hostfile 0o444)."""
    function_base_image: ClassVar[str | None] = None
    """Upstream SDK's image for jobs built from a Python function (``function_job``)."""
    local_root_env: ClassVar[Mapping[str, str]] = {}
    """Env a replica needs to run as root, which its image would normally provide (Open MPI refuses
    root without ``OMPI_ALLOW_RUN_AS_ROOT``). The local substrate, which has no image, adds it under
    the template's env when it runs as root."""

    @property
    def kind(self) -> str:
        return self.model.KIND

    @property
    def api_version(self) -> str:
        return self.model.API_VERSION

    @abstractmethod
    def set_defaults(self, job: JobT) -> JobT:
        """Upstream defaulting (§1.3 / §1.4): a new, defaulted job; the input is not modified."""

    @abstractmethod
    def validate(self, job: JobT) -> list[FieldError]:
        """Every rule of §5 for this kind (plus derived-name length), on the defaulted job."""

    @abstractmethod
    def is_master_role(self, job: JobT, replica_type: str, index: int) -> bool:
        """Drives the ``training.kubeflow.org/job-role=master`` label."""

    @abstractmethod
    def replica_env(self, job: JobT, replica_type: str, index: int, addressing: Addressing) -> list[EnvVar]:
        """The env appended to the containers ``env_target`` names, in upstream's order (§2)."""

    @abstractmethod
    def status_rules(self, context: StatusContext) -> Sequence[ConditionProposal | StatusEvent]:
        """The success / failure / running rules of §4.4, as conditions to apply (and events to record) in
        order."""

    def pod_name(self, job: JobT, replica_type: str, index: int) -> str:
        """The pod and process name: ``<job>-<type>-<index>`` (MPI's launcher: ``<job>-launcher``)."""
        return replica_name(job.name, replica_type, index)

    def replica_labels(self, job: JobT, replica_type: str, index: int) -> dict[str, str]:
        """Labels kubetrain adds to a replica's template labels (§3; MPI v2beta1 has its own set)."""
        labels = {
            **job_labels(self.controller_name, job.name),
            REPLICA_TYPE_LABEL: replica_type.lower(),
            REPLICA_INDEX_LABEL: str(index),
        }
        if self.is_master_role(job, replica_type, index):
            labels[JOB_ROLE_LABEL] = "master"
        return labels

    def autoscaling(self, job: JobT) -> Autoscaling | None:
        """The HorizontalPodAutoscaler the job asks for (elastic PyTorch's ``elasticPolicy.metrics``)."""
        return None

    def materialised_replica_types(self, job: JobT, colocated: bool) -> tuple[str, ...]:
        """Replica types that become pods or processes. Locally MPI runs only its launcher."""
        return tuple(t for t in self.replica_types if t in job.replica_specs)

    def init_containers(
        self,
        job: JobT,
        replica_type: str,
        index: int,
        addressing: Addressing,
        settings: InitSettings,
    ) -> list[dict[str, Any]]:
        """Init containers appended after the user's on Kubernetes (PyTorch's wait-for-master)."""
        return []

    def waits_for_master(self, job: JobT, replica_type: str) -> bool:
        """Whether ``init_containers`` holds ``replica_type``'s replicas until the master's name resolves."""
        return False

    def config_files(self, job: JobT, addressing: Addressing, running_hosts: Sequence[str]) -> dict[str, str]:
        """Files a job needs beside its pods (MPI hostfile, discover_hosts.sh); ``{}`` for most."""
        return {}

    def pod_decoration(self, job: JobT, replica_type: str, index: int) -> PodDecoration:
        """What a replica's pod needs on Kubernetes beyond its template, env and init containers."""
        return PodDecoration()

    def child_event(
        self, job: JobT, replica_type: str, kind: str, name: str, action: str
    ) -> tuple[str, str] | None:
        """The ``(reason, message)`` of the event recorded when one of the job's pods, Services or batch Jobs
        (``kind``) was created or deleted (``action``: ``Create``, ``Delete``), as upstream's pod and
        service control records it; None for none."""
        past = {"Create": "Created", "Delete": "Deleted"}[action]
        return f"Successful{action}{kind}", f"{past} {kind.lower()}: {name}"

    def companion_objects(self, job: JobT) -> list[dict[str, Any]]:
        """Objects a job needs beside its pods and per-replica services (MPI: RBAC, Service, Secret).

        Returned without namespace or ownerReferences: the kube substrate adds both. The
        ``config_files`` ConfigMap is not among them (the substrate renders it); a Secret of type
        ``kubernetes.io/ssh-auth`` without data gets a fresh key pair when it is created.
        """
        return []

    def function_job(self, shape: FunctionShape, template: dict[str, Any]) -> JobT:
        """The job upstream's SDK builds to run a Python function, every replica from ``template``.

        Only kinds with a ``function_base_image`` can be built this way (upstream: PyTorchJob and
        TFJob). Raises ``ValueError`` for a shape this kind cannot take.
        """
        raise ValueError(f"{self.kind} can't be created from a function: pass a full job object")

    def function_entrypoint(self, shape: FunctionShape) -> str:
        """The program that runs the function's script in each replica."""
        return "python -u"

    def runs_as_batch_job(self, job: JobT, replica_type: str) -> bool:
        """Replicas run by a ``batch/v1`` Job carrying the run policy (MPI v2beta1's launcher)."""
        return False

    def condition_message(self, job: JobT, type_: ConditionType, value: bool, default: str) -> str:
        """The message of a lifecycle condition (Created, Suspended, Running=False on suspension);
        ``default`` is the training operator's. mpi-operator words some differently."""
        return default

    def startup_dependencies(self, job: JobT, replica_type: str) -> tuple[tuple[str, Awaited], ...]:
        """The replica types whose replicas must all be Ready, or all done, before ``replica_type``'s are
        created (JobSet's ``dependsOn``); by default the ``awaited_replica_type``, Ready."""
        awaited = self.awaited_replica_type(job, replica_type)
        return () if awaited is None else ((awaited, "Ready"),)

    def replica_annotations(self, job: JobT, replica_type: str, index: int) -> dict[str, str]:
        """Annotations a replica's pod template gets (a Job's completion index, which the downward API
        reads); none by default."""
        return {}

    def limit_failure(self, job: JobT, reason: str, message: str) -> tuple[str, str]:
        """The ``Failed`` condition's reason and message when backoffLimit or activeDeadlineSeconds is
        exceeded; upstream's (``<Kind>Failed``) by default."""
        return reason, message

    def awaited_replica_type(self, job: JobT, replica_type: str) -> str | None:
        """A replica type whose replicas must all be Ready before ``replica_type`` is created
        (MPI v2beta1's ``launcherCreationPolicy: WaitForWorkersReady``); None: created at once."""
        return None

    def replica_type_of(self, labels: Mapping[str, str]) -> str | None:
        """The canonical replica type a child's labels name (``replica-type``, any case)."""
        label = labels.get(REPLICA_TYPE_LABEL)
        if label is None:
            return None
        return _by_lowercase(self.replica_types).get(label.lower(), label)

    def replica_index_of(self, job: JobT, labels: Mapping[str, str]) -> int | None:
        """The replica index a child's labels name; None when missing or malformed."""
        try:
            return int(labels[REPLICA_INDEX_LABEL])
        except (KeyError, ValueError):
            return None


@dataclass(frozen=True)
class FunctionShape:
    """The replicas of a job built from a Python function (upstream SDK's ``create_job`` arguments)."""

    num_workers: int | None = 1
    num_procs_per_worker: int | str | None = None
    num_chief_replicas: int | None = None
    num_ps_replicas: int | None = None


@dataclass(frozen=True)
class PodDecoration:
    """Additions to a replica's pod on Kubernetes (volumes, DNS identity, defaults)."""

    volumes: tuple[dict[str, Any], ...] = ()
    main_volume_mounts: tuple[dict[str, Any], ...] = ()
    """Mounted into the first container."""
    default_command: tuple[str, ...] = ()
    """The first container's command when it sets neither ``command`` nor ``args``."""
    default_args: tuple[str, ...] = ()
    """With ``default_command``: the first container's args, and then the command and these args are set
    whenever it has no command (what it had as args replaced, as upstream's MPIJob v1 does)."""
    hostname: str | None = None
    subdomain: str | None = None
    dns_searches: tuple[str, ...] = ()
    service_account_name: str | None = None
    """Used when the template names no service account."""


def decorate_pod_spec(spec: dict[str, Any], decoration: PodDecoration) -> None:
    """Add ``decoration`` to a pod spec in place: what both the operator's pods and local containers get."""
    containers = spec.get("containers") or [{}]
    main = containers[0]
    if decoration.default_args and not main.get("command"):
        main["command"], main["args"] = list(decoration.default_command), list(decoration.default_args)
    elif decoration.default_command and not main.get("command") and not main.get("args"):
        main["command"] = list(decoration.default_command)
    if decoration.main_volume_mounts:
        main["volumeMounts"] = [*(main.get("volumeMounts") or []), *decoration.main_volume_mounts]
    if decoration.volumes:
        spec["volumes"] = [*(spec.get("volumes") or []), *decoration.volumes]
    if decoration.hostname:
        spec["hostname"] = decoration.hostname
    if decoration.subdomain:
        spec["subdomain"] = decoration.subdomain
        if spec.get("hostNetwork"):
            spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    if decoration.dns_searches:
        dns = spec.setdefault("dnsConfig", {})
        dns["searches"] = [*(dns.get("searches") or []), *decoration.dns_searches]
    if decoration.service_account_name and not spec.get("serviceAccountName"):
        spec["serviceAccountName"] = decoration.service_account_name


class InitContainerTemplate(Protocol):
    """The PyTorch workers' init containers from a user's template (its values filled in per job)."""

    def __call__(self, *, master_addr: str, image: str, max_tries: int) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class InitSettings:
    """Operator settings for injected init containers (upstream's ``--pytorch-init-container-*``)."""

    pytorch_init_image: str = "alpine:3.10"
    pytorch_init_max_tries: int = 100
    pytorch_init_template: InitContainerTemplate | None = None
    """Replaces the built-in ``init-pytorch`` container (``--pytorch-init-container-template-file``)."""
    mpi_kubectl_delivery_image: str = "kubeflow/kubectl-delivery:latest"
    """MPIJob v1 launcher's ``kubectl-delivery`` init container (``--mpi-kubectl-delivery-image``)."""


@functools.cache
def _by_lowercase(replica_types: tuple[str, ...]) -> dict[str, str]:
    """Lowercase → replica type, the first of equals winning: looked up for every child on every reconcile
    (twice per replica), so built once per framework rather than scanned each time."""
    found: dict[str, str] = {}
    for replica_type in replica_types:
        found.setdefault(replica_type.lower(), replica_type)
    return found
