"""``TrainingClient``: upstream's ``kubeflow.training.TrainingClient`` (v1.9) over a cluster or local runs.

Same method names, arguments and defaults as upstream (upstream-behaviour.md §7), typed returns (the
``kubetrain.api`` models), and upstream's error vocabulary: ``ValueError`` for bad input, ``TimeoutError``
when waiting runs out, ``RuntimeError`` (subclasses in ``kubetrain.sdk.errors``) when the backend fails.
Deliberate differences: ``Suspended`` is a known condition, replica types are accepted in any case,
``stream_job_logs`` yields ``(pod, line)`` pairs, and ``train()`` (LLM fine-tuning) is not provided.

Kubeflow Trainer v2's TrainJobs are one more kind (``job_kind="TrainJob"``): read, listed, waited for,
followed and deleted with the same methods (``sdk.trainjobs`` says how their pods and states are read).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubetrain.api.common import ConditionType, JobCondition
from kubetrain.api.jobs import TrainingJob
from kubetrain.api.manifest import parse_job
from kubetrain.api.progress import ProgressHistory
from kubetrain.api.summary import LiveCounts, is_trainjob
from kubetrain.api.trainer import Condition, TrainJob
from kubetrain.engine.diagnosis import Finding
from kubetrain.engine.failures import FailureRecord
from kubetrain.frameworks.jobset_run import REPLICATED_JOB_LABEL
from kubetrain.frameworks.labels import (
    JOB_NAME_LABEL,
    JOB_ROLE_LABEL,
    REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL,
)
from kubetrain.frameworks.registry import FRAMEWORKS
from kubetrain.frameworks.trainer.constants import NODE
from kubetrain.frameworks.trainer.jobset import JOBSET_KIND
from kubetrain.sdk import trainjobs
from kubetrain.sdk.backends.base import Backend, JobEvent
from kubetrain.sdk.errors import JobFailedError
from kubetrain.sdk.functions import DEFAULT_PIP_INDEX_URL, EnvVars, FunctionJobRequest, build_job
from kubetrain.sdk.kinds import TRAINJOB, Job, JobKind, kind_of, resolve_kind

if TYPE_CHECKING:
    # lightkube's import pulls in its HTTP client: only for the annotations, not for every CLI command.
    from lightkube.resources.core_v1 import Pod

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 120
KNOWN_CONDITIONS = frozenset(str(c) for c in ConditionType)
"""Created, Running, Restarting, Succeeded, Suspended, Failed (upstream's set lacks Suspended)."""
BACKENDS = ("kubernetes", "local")
REPLICA_TYPES = frozenset(t.lower() for f in FRAMEWORKS for t in f.replica_types)

JobLike = TrainingJob | TrainJob | Mapping[str, Any]
TRAINJOB_CONDITIONS = {
    ConditionType.CREATED: "Created",
    ConditionType.RUNNING: "Running",
    ConditionType.SUCCEEDED: "Complete",
    ConditionType.FAILED: "Failed",
    ConditionType.SUSPENDED: "Suspended",
}
"""What ``is_job_<condition>`` asks of a TrainJob's state (it is never Restarting)."""


class TrainingClient:
    """Create, watch and delete training jobs on a Kubernetes cluster or as local runs.

    Example::

        client = TrainingClient(backend="local")
        client.create_job(name="hello", train_func=train, num_workers=1)
        client.wait_for_job_conditions("hello")
        print(client.get_job_logs("hello")[0])
    """

    def __init__(
        self,
        config_file: str | None = None,
        context: str | None = None,
        client_configuration: Any = None,
        namespace: str | None = None,
        job_kind: str = "PyTorchJob",
        backend: str = "kubernetes",
        state_dir: str | Path | None = None,
        runtime: str = "process",
    ) -> None:
        """``backend="kubernetes"`` loads ``config_file`` (or in-cluster config, ``$KUBECONFIG``,
        ``~/.kube/config``); ``client_configuration`` may be a lightkube ``KubeConfig``. ``backend="local"``
        runs jobs on this machine, recorded under ``state_dir`` (default ``$KUBETRAIN_STATE_DIR`` or
        ``~/.local/state/kubetrain/runs``) and run by ``runtime``: ``process`` (each replica a process here),
        ``podman`` or ``docker`` (each in its image, as ``kubetrain run --runtime``). ``namespace`` defaults
        to the kubeconfig context's, else ``default``."""
        if backend != "local" and runtime != "process":
            raise ValueError(
                "runtime chooses how a local run starts its replicas: use it with backend='local'"
            )
        self.job_kind = resolve_kind(job_kind)
        self.backend_name = backend
        self.backend: Backend
        if backend == "local":
            from kubetrain.sdk.backends.local import LocalBackend

            self.backend = LocalBackend(Path(state_dir) if state_dir is not None else None, runtime=runtime)
        elif backend == "kubernetes":
            from kubetrain.sdk.backends.kubernetes import KubernetesBackend

            self.backend = KubernetesBackend(config_file, context, client_configuration)
        else:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        self.namespace = namespace or self.backend.default_namespace

    # --- helpers -------------------------------------------------------------------------------

    def _kind(self, job_kind: str | None) -> JobKind:
        return self.job_kind if job_kind is None else resolve_kind(job_kind)

    def _namespace(self, namespace: str | None) -> str:
        return namespace or self.namespace

    # --- create, read, update, delete ----------------------------------------------------------

    def create_job(
        self,
        job: JobLike | None = None,
        name: str | None = None,
        namespace: str | None = None,
        job_kind: str | None = None,
        base_image: str | None = None,
        train_func: Callable[..., Any] | None = None,
        parameters: Mapping[str, Any] | None = None,
        num_workers: int | None = 1,
        num_procs_per_worker: int | str | None = None,
        resources_per_worker: Mapping[str, Any] | None = None,
        num_chief_replicas: int | None = None,
        num_ps_replicas: int | None = None,
        packages_to_install: Sequence[str] | None = None,
        pip_index_url: str = DEFAULT_PIP_INDEX_URL,
        env_vars: EnvVars | None = None,
        dry_run: bool = False,
        runtimes: Sequence[Mapping[str, Any]] = (),
    ) -> Job:
        """Create a job from a full job object (a model or its wire dict, a TrainJob too), or a PyTorchJob /
        TFJob from ``train_func`` (run with ``torchrun`` when ``num_workers > 1`` or ``num_procs_per_worker``
        is set, else ``python -u``) or from ``base_image``. Returns the created job (``dry_run``: what would
        be).

        ``runtimes``: TrainingRuntime / ClusterTrainingRuntime documents a local TrainJob may name besides the
        built-in ones (a cluster's TrainJob names the cluster's runtimes).

        Raises ``ValueError`` for an invalid combination or job, ``RuntimeError`` when creation fails."""
        if job is not None:
            if any(v is not None for v in (name, base_image, train_func, parameters, job_kind)):
                raise ValueError(
                    "If job is set only namespace can be set besides it (not name, job_kind, ...)"
                )
            if isinstance(job, TrainJob) or (not isinstance(job, TrainingJob) and is_trainjob(job)):
                return self._create_trainjob(job, namespace, dry_run, runtimes)
            model = job if isinstance(job, TrainingJob) else parse_job(job, strict=True)
        else:
            if self._kind(job_kind).is_trainjob:
                raise ValueError(
                    "a TrainJob is created from its manifest (job=...): train_func and base_image build "
                    "PyTorchJobs and TFJobs; the Kubeflow SDK's TrainerClient.train builds TrainJobs"
                )
            if train_func is None and base_image is None:
                raise ValueError("One of the following must be set: job, train_func or base_image")
            model = build_job(
                FunctionJobRequest(
                    name=name or "",
                    namespace=self._namespace(namespace),
                    kind=self._kind(job_kind),
                    base_image=base_image,
                    train_func=train_func,
                    parameters=parameters,
                    num_workers=num_workers,
                    num_procs_per_worker=num_procs_per_worker,
                    resources_per_worker=resources_per_worker,
                    num_chief_replicas=num_chief_replicas,
                    num_ps_replicas=num_ps_replicas,
                    packages_to_install=packages_to_install,
                    pip_index_url=pip_index_url,
                    env_vars=env_vars,
                )
            )
        # Refused here with the field named, rather than by the API server or the operator later.
        from kubetrain.engine.admission import admit  # the engine: only for the commands that create
        from kubetrain.engine.types import CLUSTER_CEILING

        admit(model, limits=CLUSTER_CEILING)
        target = self._namespace(namespace or model.metadata.namespace)
        model = model.model_copy(update={"metadata": model.metadata.model_copy(update={"namespace": target})})
        created = self.backend.create(model, dry_run=dry_run)
        log.info("%s %s/%s has been created", created.KIND, target, created.name)
        return created

    def _create_trainjob(
        self,
        job: TrainJob | Mapping[str, Any],
        namespace: str | None,
        dry_run: bool,
        runtimes: Sequence[Mapping[str, Any]],
    ) -> TrainJob:
        from kubetrain.local.trainjob import parse_trainjob

        model = parse_trainjob(job.to_wire() if isinstance(job, TrainJob) else job)
        target = self._namespace(namespace or job_namespace(job))
        model = model.model_copy(update={"metadata": model.metadata.model_copy(update={"namespace": target})})
        created = self.backend.create_trainjob(model, runtimes, dry_run=dry_run)
        log.info("%s %s/%s has been created", created.KIND, target, created.name)
        return created

    def get_job(
        self,
        name: str,
        namespace: str | None = None,
        job_kind: str | None = None,
        timeout: int = DEFAULT_TIMEOUT,
    ) -> Job:
        """The job; a TrainJob as a ``kubetrain.api.trainer.TrainJob`` (``get_job_state`` says its state)."""
        return self.backend.get(self._kind(job_kind), self._namespace(namespace), name)

    def get_job_state(self, name: str, namespace: str | None = None, job_kind: str | None = None) -> str:
        """What ``kubetrain get`` shows as STATE (kubetrain extension): a v1 job's last condition; a
        TrainJob's state as the Kubeflow SDK gives it (Complete, Failed, or Running once all its nodes run,
        else Created) or Suspended."""
        job = self.get_job(name, namespace, job_kind)
        if isinstance(job, TrainJob):
            return self._trainjob_state(job)
        return str(job.status.conditions[-1].type) if job.status.conditions else ""

    def _trainjob_state(self, job: TrainJob) -> str:
        return trainjobs.state(job, self.get_job_live_counts(job.name, job.namespace, TRAINJOB.kind).nodes)

    def list_jobs(
        self,
        namespace: str | None = None,
        job_kind: str | None = None,
        timeout: int = DEFAULT_TIMEOUT,
        label_selector: str | None = None,
        all_namespaces: bool = False,
        all_kinds: bool = False,
    ) -> list[Job]:
        """Jobs of one kind in one namespace; ``all_kinds`` / ``all_namespaces`` widen that (extensions)."""
        kind = None if all_kinds else self._kind(job_kind)
        return self.backend.list_jobs(
            kind, None if all_namespaces else self._namespace(namespace), label_selector
        )

    def update_job(
        self, job: JobLike, name: str, namespace: str | None = None, job_kind: str | None = None
    ) -> Job:
        """A JSON merge patch of job ``name`` with ``job`` (a model, or any partial wire dict)."""
        patch = job.to_wire() if isinstance(job, TrainingJob | TrainJob) else dict(job)
        if isinstance(job, TrainingJob | TrainJob):
            patch.pop("status", None)
        return self.backend.patch(self._kind(job_kind), self._namespace(namespace), name, patch)

    def delete_job(
        self,
        name: str,
        namespace: str | None = None,
        job_kind: str | None = None,
        delete_options: Any = None,
    ) -> None:
        """``delete_options``: a dict with ``propagationPolicy`` / ``gracePeriodSeconds``, or an object with
        ``propagation_policy`` / ``grace_period_seconds`` (the kubernetes client's V1DeleteOptions)."""
        propagation, grace_period = _delete_options(delete_options)
        self.backend.delete(
            self._kind(job_kind),
            self._namespace(namespace),
            name,
            propagation=propagation,
            grace_period=grace_period,
        )
        log.info("%s %s/%s has been deleted", self._kind(job_kind), self._namespace(namespace), name)

    def suspend_job(self, name: str, namespace: str | None = None, job_kind: str | None = None) -> Job:
        """Set ``runPolicy.suspend`` (a TrainJob's ``spec.suspend``): the job's pods are deleted and it holds
        (kubetrain extension)."""
        kind = self._kind(job_kind)
        return self.backend.patch(kind, self._namespace(namespace), name, _suspend_patch(kind, True))

    def resume_job(self, name: str, namespace: str | None = None, job_kind: str | None = None) -> Job:
        """Clear ``runPolicy.suspend`` (a TrainJob's ``spec.suspend``): the job's pods are created again
        (kubetrain extension)."""
        kind = self._kind(job_kind)
        return self.backend.patch(kind, self._namespace(namespace), name, _suspend_patch(kind, False))

    def scale_job(
        self, name: str, replicas: int, namespace: str | None = None, job_kind: str | None = None
    ) -> TrainingJob:
        """Set the replicas of the kind's scalable type (the CRD's scale subresource; kubetrain extension). A
        TrainJob has none (its nodes are immutable): ``ValueError``."""
        if replicas < 0:
            raise ValueError(f"replicas must be 0 or more, got {replicas}")
        scaled = self.backend.scale(self._kind(job_kind), self._namespace(namespace), name, replicas)
        assert isinstance(scaled, TrainingJob)
        return scaled

    # --- conditions ----------------------------------------------------------------------------

    def get_job_conditions(
        self,
        name: str | None = None,
        namespace: str | None = None,
        job_kind: str | None = None,
        job: Job | None = None,
        timeout: int = DEFAULT_TIMEOUT,
    ) -> list[JobCondition] | list[Condition]:
        """The job's conditions (a TrainJob's are ``kubetrain.api.trainer.Condition``s)."""
        if job is None:
            if name is None:
                raise ValueError("name or job must be set")
            job = self.get_job(name, namespace, job_kind, timeout)
        if isinstance(job, TrainJob):
            return list(job.status.conditions or [])
        return list(job.status.conditions)

    def _is(
        self,
        condition: ConditionType,
        name: str | None,
        namespace: str | None,
        job_kind: str | None,
        job: Job | None,
        timeout: int,
    ) -> bool:
        if job is None:
            if name is None:
                raise ValueError("name or job must be set")
            job = self.get_job(name, namespace, job_kind, timeout)
        if isinstance(job, TrainJob):
            # Created as the Kubeflow SDK means it of a job that exists: every later state is past it.
            return condition is ConditionType.CREATED or self._trainjob_state(job) == TRAINJOB_CONDITIONS.get(
                condition
            )
        return job.status.is_true(condition)

    def is_job_created(
        self,
        name: str | None = None,
        namespace: str | None = None,
        job_kind: str | None = None,
        job: Job | None = None,
        timeout: int = DEFAULT_TIMEOUT,
    ) -> bool:
        return self._is(ConditionType.CREATED, name, namespace, job_kind, job, timeout)

    def is_job_running(
        self,
        name: str | None = None,
        namespace: str | None = None,
        job_kind: str | None = None,
        job: Job | None = None,
        timeout: int = DEFAULT_TIMEOUT,
    ) -> bool:
        return self._is(ConditionType.RUNNING, name, namespace, job_kind, job, timeout)

    def is_job_restarting(
        self,
        name: str | None = None,
        namespace: str | None = None,
        job_kind: str | None = None,
        job: Job | None = None,
        timeout: int = DEFAULT_TIMEOUT,
    ) -> bool:
        return self._is(ConditionType.RESTARTING, name, namespace, job_kind, job, timeout)

    def is_job_succeeded(
        self,
        name: str | None = None,
        namespace: str | None = None,
        job_kind: str | None = None,
        job: Job | None = None,
        timeout: int = DEFAULT_TIMEOUT,
    ) -> bool:
        return self._is(ConditionType.SUCCEEDED, name, namespace, job_kind, job, timeout)

    def is_job_failed(
        self,
        name: str | None = None,
        namespace: str | None = None,
        job_kind: str | None = None,
        job: Job | None = None,
        timeout: int = DEFAULT_TIMEOUT,
    ) -> bool:
        return self._is(ConditionType.FAILED, name, namespace, job_kind, job, timeout)

    def is_job_suspended(
        self,
        name: str | None = None,
        namespace: str | None = None,
        job_kind: str | None = None,
        job: Job | None = None,
        timeout: int = DEFAULT_TIMEOUT,
    ) -> bool:
        return self._is(ConditionType.SUSPENDED, name, namespace, job_kind, job, timeout)

    def wait_for_job_conditions(
        self,
        name: str,
        namespace: str | None = None,
        job_kind: str | None = None,
        expected_conditions: set[str] | frozenset[str] = frozenset({"Succeeded"}),
        wait_timeout: float = 600,
        polling_interval: float = 15,
        callback: Callable[[Job], Any] | None = None,
        timeout: int = DEFAULT_TIMEOUT,
    ) -> Job:
        """Poll until one of ``expected_conditions`` is True and return the job.

        A TrainJob waits for its state instead (``get_job_state``: Created, Running, Complete, Failed,
        Suspended, as the Kubeflow SDK's ``wait_for_job_status``); ``Succeeded`` means ``Complete``.

        Raises ``ValueError`` for an unknown condition, ``JobFailedError`` (a ``RuntimeError``) with the
        Failed condition's message when the job fails and Failed was not expected, ``TimeoutError`` after
        ``wait_timeout`` seconds."""
        if polling_interval <= 0:
            raise ValueError(f"polling_interval must be positive, got {polling_interval}")
        if self._kind(job_kind).is_trainjob:
            return self._wait_for_trainjob(
                name, namespace, expected_conditions, wait_timeout, polling_interval, callback
            )
        unknown = set(expected_conditions) - KNOWN_CONDITIONS
        if unknown or not expected_conditions:
            raise ValueError(
                f"Expected conditions: {sorted(expected_conditions)} must be a subset of "
                f"{sorted(KNOWN_CONDITIONS)}"
            )
        kind, target = self._kind(job_kind), self._namespace(namespace)
        deadline = time.monotonic() + wait_timeout
        while True:
            job = self.get_job(name, target, kind.kind if job_kind is None else job_kind, timeout)
            assert isinstance(job, TrainingJob)
            conditions = job.status.conditions
            if conditions:
                log.info("%s %s/%s: %s", kind, target, name, conditions[-1].type)
            if callback is not None:
                callback(job)
            failed = job.status.condition(ConditionType.FAILED)
            if job.status.is_true(ConditionType.FAILED) and "Failed" not in expected_conditions:
                detail = (failed.message or failed.reason or "") if failed is not None else ""
                raise JobFailedError(f"{kind} {target}/{name} failed: {detail}", job)
            if any(job.status.is_true(ConditionType(c)) for c in expected_conditions):
                return job
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(
                    f"Timeout waiting for {kind}: {target}/{name} to reach expected conditions: "
                    f"{sorted(expected_conditions)}"
                )
            time.sleep(min(polling_interval, remaining))

    def _wait_for_trainjob(
        self,
        name: str,
        namespace: str | None,
        expected: set[str] | frozenset[str],
        wait_timeout: float,
        polling_interval: float,
        callback: Callable[[Job], Any] | None,
    ) -> TrainJob:
        wanted = trainjobs.wanted_states(expected)
        target = self._namespace(namespace)
        deadline = time.monotonic() + wait_timeout
        while True:
            job = self.get_job(name, target, TRAINJOB.kind)
            assert isinstance(job, TrainJob)
            state = self._trainjob_state(job)
            log.info("TrainJob %s/%s: %s", target, name, state)
            if callback is not None:
                callback(job)
            if state == "Failed" and "Failed" not in wanted:
                failed = job.status.condition("Failed")
                detail = (failed.message or failed.reason) if failed is not None else ""
                raise JobFailedError(f"TrainJob {target}/{name} failed: {detail}", job)
            if state in wanted:
                return job
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(
                    f"Timeout waiting for TrainJob: {target}/{name} to reach expected conditions: "
                    f"{sorted(wanted)}"
                )
            time.sleep(min(polling_interval, remaining))

    # --- pods, logs, events --------------------------------------------------------------------

    def get_job_pods(
        self,
        name: str,
        namespace: str | None = None,
        is_master: bool = False,
        replica_type: str | None = None,
        replica_index: int | None = None,
        timeout: int = DEFAULT_TIMEOUT,
        job_kind: str | None = None,
    ) -> list[Pod]:
        """The job's pods (``lightkube`` Pod models), optionally only the master, one replica type (any case)
        or one index. A TrainJob's replica types are its replicated jobs (``node``, ``launcher``, ...) and its
        master is ``node`` 0 (the Kubeflow SDK's default step, ``node-0``)."""
        target = self._namespace(namespace)
        if not self._kind(job_kind).is_trainjob:
            return self.backend.pods(target, name, pod_labels(name, is_master, replica_type, replica_index))
        if is_master:
            replica_type, replica_index = replica_type or NODE, 0
        pods = self.backend.pods(target, name, trainjobs.pod_selector(name, replica_type))
        if replica_index is None:
            return pods
        found = trainjobs.replicas(_seen(pods))
        return [p for p in pods if found.get(_pod_name(p), ("", -1))[1] == replica_index]

    def get_job_restarts(self, name: str, namespace: str | None = None, job_kind: str | None = None) -> int:
        """Container restarts of the job's live pods (kubetrain's: what ``kubetrain get`` shows, without
        listing the pods as models)."""
        return self.get_job_live_counts(name, namespace, job_kind).restarts

    def get_job_live_counts(
        self, name: str, namespace: str | None = None, job_kind: str | None = None
    ) -> LiveCounts:
        """What ``kubetrain get`` reads of the job's pods (kubetrain extension): their container restarts and,
        for a TrainJob, its training nodes (how many exist, are active, are running)."""
        target = self._namespace(namespace)
        if not self._kind(job_kind).is_trainjob:
            return LiveCounts(self.backend.restarts(target, name))
        pods = self.backend.pods(target, name, trainjobs.pod_selector(name))
        restarts = sum(s.restartCount for p in pods if p.status for s in p.status.containerStatuses or [])
        return LiveCounts(restarts, trainjobs.node_tally(_seen(pods)))

    def get_job_pod_names(
        self,
        name: str,
        namespace: str | None = None,
        is_master: bool = False,
        replica_type: str | None = None,
        replica_index: int | None = None,
        timeout: int = DEFAULT_TIMEOUT,
        job_kind: str | None = None,
    ) -> list[str]:
        pods = self.get_job_pods(name, namespace, is_master, replica_type, replica_index, timeout, job_kind)
        return [p.metadata.name for p in pods if p.metadata is not None and p.metadata.name]

    def get_job_replicas(
        self, name: str, namespace: str | None = None, job_kind: str | None = None
    ) -> dict[str, str]:
        """Each of the job's pods by its replica, ``<type>-<index>`` (``worker-1``, a TrainJob's ``node-1``):
        what ``kubetrain logs --replica`` and the Jobs view call them (kubetrain extension)."""
        pods = self.get_job_pods(name, namespace, job_kind=job_kind)
        return _replica_names(name, pods, self._kind(job_kind).is_trainjob)

    def stream_job_logs(
        self,
        name: str,
        namespace: str | None = None,
        job_kind: str | None = None,
        is_master: bool = False,
        replica_type: str | None = None,
        replica_index: int | None = None,
        follow: bool = False,
        tail_lines: int | None = None,
        pod_wait_timeout: float = 600,
    ) -> Iterator[tuple[str, str]]:
        """``(pod name, line)`` for every selected pod (all of the job's by default). Following waits for the
        job's pods to appear (up to ``pod_wait_timeout``) and streams every one until it finishes. A
        TrainJob's pods are read from the container of their step: ``node`` for training nodes (and an MPI
        launcher), the replicated job's name for the others (``dataset-initializer``), as the Kubeflow SDK
        reads them."""
        target, kind = self._namespace(namespace), self._kind(job_kind)

        def selected() -> list[Pod]:
            return self.get_job_pods(
                name, target, is_master, replica_type, replica_index, job_kind=kind_argument(kind)
            )

        pods = selected()
        deadline = time.monotonic() + pod_wait_timeout
        while follow and not pods:
            job = self.get_job(name, target, kind_argument(kind))
            if job.status.is_finished or time.monotonic() > deadline:
                break
            time.sleep(0.5)
            pods = selected()
        containers = None
        if kind.is_trainjob:
            containers = {
                _pod_name(pod): trainjobs.container_of(
                    ((pod.metadata.labels if pod.metadata else None) or {}).get(REPLICATED_JOB_LABEL)
                )
                for pod in pods
            }
        for entry in self.backend.logs(
            target,
            name,
            [_pod_name(p) for p in pods],
            container=kind.default_container,
            containers=containers,
            follow=follow,
            tail_lines=tail_lines,
        ):
            yield entry.pod, entry.line

    def _pod_names(self, namespace: str, name: str, labels: Mapping[str, str]) -> list[str]:
        pods = self.backend.pods(namespace, name, labels)
        return [p.metadata.name for p in pods if p.metadata is not None and p.metadata.name]

    def get_job_logs(
        self,
        name: str,
        namespace: str | None = None,
        job_kind: str | None = None,
        is_master: bool = True,
        replica_type: str | None = None,
        replica_index: int | None = None,
        follow: bool = False,
        timeout: int = DEFAULT_TIMEOUT,
        verbose: bool = False,
        tail_lines: int | None = None,
    ) -> tuple[dict[str, str], dict[str, str]]:
        """Upstream's ``(logs by pod name, events by object)``. ``follow`` also prints each line as
        ``[Pod <name>]: <line>`` while streaming, as upstream does; ``verbose`` collects the events."""
        logs: dict[str, list[str]] = {}
        for pod, line in self.stream_job_logs(
            name, namespace, job_kind, is_master, replica_type, replica_index, follow, tail_lines
        ):
            logs.setdefault(pod, []).append(line)
            if follow:
                print(f"[Pod {pod}]: {line}")
        events: dict[str, str] = {}
        if verbose:
            for event in self.get_job_events(name, namespace, job_kind):
                when = event.last_seen.isoformat() if event.last_seen else ""
                events[event.involved] = f"{events.get(event.involved, '')}{when} {event.message}\n"
        return {pod: "\n".join(lines) + "\n" for pod, lines in logs.items()}, events

    def get_job_events(
        self, name: str, namespace: str | None = None, job_kind: str | None = None
    ) -> list[JobEvent]:
        """Events about the job and its pods (and a TrainJob's JobSet), oldest first (kubetrain extension)."""
        target, kind = self._namespace(namespace), self._kind(job_kind)
        if kind.is_trainjob:
            pods = self._pod_names(target, name, trainjobs.pod_selector(name))
            return self.backend.events(target, kind.kind, name, pods, related=[(JOBSET_KIND, name)])
        pods = self._pod_names(target, name, {JOB_NAME_LABEL: name})
        return self.backend.events(target, kind.kind, name, pods)

    # --- progress, diagnosis (kubetrain extensions) ---------------------------------------------

    def get_job_progress_history(
        self, name: str, namespace: str | None = None, job_kind: str | None = None
    ) -> ProgressHistory:
        """The job's progress reports over its whole life, thinned to a few hundred points: its loss curve.
        The latest report is on the job itself, ``get_job(name).status.trainer_status``."""
        return self.backend.progress_history(self._kind(job_kind), self._namespace(namespace), name)

    def get_job_diagnosis(
        self, name: str, namespace: str | None = None, job_kind: str | None = None
    ) -> list[Finding]:
        """What is wrong with the job now, if anything: each finding names the replicas, the cause and the
        fix (the same findings the operator and ``kubetrain run`` raise as Warning events)."""
        return self.backend.diagnose(self._kind(job_kind), self._namespace(namespace), name)

    def get_job_failures(
        self, name: str, namespace: str | None = None, job_kind: str | None = None
    ) -> FailureRecord | None:
        """Which replica failed first, and how (type, index, pod, node, exit code, reason, time, its last
        lines), and each failed replica's latest failure: kept on the job, so it is there after its pods are
        gone (``cleanPodPolicy``, TTL). None while no replica failed (kubetrain extension)."""
        return self.backend.failures(self._kind(job_kind), self._namespace(namespace), name)

    def kind_of(self, job: Job) -> JobKind:
        return kind_of(job)


def kind_argument(kind: JobKind) -> str:
    """A kind name ``resolve_kind`` maps back to exactly this kind (the v2beta1 MPIJob needs its version)."""
    return f"{kind.plural}.{kind.group}/{kind.version}"


def job_namespace(job: TrainJob | Mapping[str, Any]) -> str | None:
    if isinstance(job, TrainJob):
        return job.metadata.namespace
    metadata = job.get("metadata")
    return (
        str(metadata.get("namespace"))
        if isinstance(metadata, Mapping) and metadata.get("namespace")
        else None
    )


def _suspend_patch(kind: JobKind, suspend: bool) -> dict[str, Any]:
    if kind.is_trainjob:
        return {"spec": {"suspend": suspend}}
    return {"spec": {"runPolicy": {"suspend": suspend}}}


def _pod_name(pod: Pod) -> str:
    return (pod.metadata.name if pod.metadata else None) or ""


def _seen(pods: Sequence[Pod]) -> list[trainjobs.PodSeen]:
    return [
        trainjobs.PodSeen(
            _pod_name(pod),
            (pod.metadata.labels if pod.metadata else None) or {},
            (pod.status.phase if pod.status else None) or "Pending",
        )
        for pod in pods
    ]


def _replica_names(job_name: str, pods: Sequence[Pod], trainjob: bool) -> dict[str, str]:
    """A v1 pod's replica is in its labels (an MPIJob's launcher has no index: its name, less the job's)."""
    if trainjob:
        return {name: trainjobs.replica_name(r) for name, r in trainjobs.replicas(_seen(pods)).items()}
    names = {}
    for pod in pods:
        labels = (pod.metadata.labels if pod.metadata else None) or {}
        replica_type, index = labels.get(REPLICA_TYPE_LABEL), labels.get(REPLICA_INDEX_LABEL)
        if replica_type is not None and index is not None:
            names[_pod_name(pod)] = f"{replica_type}-{index}"
        else:
            names[_pod_name(pod)] = _pod_name(pod).removeprefix(f"{job_name}-")
    return names


PROPAGATION_POLICIES = ("Background", "Foreground", "Orphan")


def _delete_options(options: Any) -> tuple[str | None, int | None]:
    if options is None:
        return None, None
    if isinstance(options, Mapping):
        propagation = options.get("propagationPolicy", options.get("propagation_policy"))
        grace = options.get("gracePeriodSeconds", options.get("grace_period_seconds"))
    else:
        propagation = getattr(options, "propagation_policy", None)
        grace = getattr(options, "grace_period_seconds", None)
    if propagation is not None and propagation not in PROPAGATION_POLICIES:
        raise ValueError(
            f"propagationPolicy must be one of {', '.join(PROPAGATION_POLICIES)}, got {propagation!r}"
        )
    return propagation, None if grace is None else int(grace)


def pod_labels(
    name: str, is_master: bool, replica_type: str | None, replica_index: int | None
) -> dict[str, str]:
    """Upstream's pod selector: job name, plus master role, replica type (any case here) and index."""
    labels = {JOB_NAME_LABEL: name}
    if is_master:
        labels[JOB_ROLE_LABEL] = "master"
    if replica_type is not None:
        if replica_type.lower() not in REPLICA_TYPES:
            raise ValueError(
                f"replica_type {replica_type!r} is not a replica type; "
                f"known: {', '.join(sorted(REPLICA_TYPES))}"
            )
        labels[REPLICA_TYPE_LABEL] = replica_type.lower()
    if replica_index is not None:
        labels[REPLICA_INDEX_LABEL] = str(replica_index)
    return labels
