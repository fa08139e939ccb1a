"""Jobs on a Kubernetes cluster, through lightkube: the kubeflow.org kinds as generic resources, pods, events
and logs as typed core/v1 resources. Every API failure becomes one of ``kubetrain.sdk.errors`` with the
server's message."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import httpx2
from lightkube import ALL_NS, ApiError, Client, ConfigError, KubeConfig, SingleConfig, operators
from lightkube.generic_resource import GenericNamespacedResource, create_namespaced_resource
from lightkube.resources.core_v1 import ConfigMap, Event, Pod
from lightkube.types import CascadeType, PatchType

from kubetrain.api.common import ConditionType
from kubetrain.api.errors import InvalidJobError
from kubetrain.api.jobs import TrainingJob
from kubetrain.api.manifest import job_shell, parse_job
from kubetrain.api.progress import ProgressHistory
from kubetrain.api.summary import is_trainjob
from kubetrain.api.trainer import TrainingRuntime, TrainJob
from kubetrain.engine.diagnosis import Finding
from kubetrain.engine.failures import FailureRecord
from kubetrain.engine.types import Observation
from kubetrain.frameworks.jobset_run import JOBSET_NAME_LABEL
from kubetrain.frameworks.labels import JOB_NAME_LABEL
from kubetrain.kube.failure_config_map import failure_config_map_name, read_record
from kubetrain.kube.status.history_config_map import history_config_map_name, read_history
from kubetrain.sdk.backends.base import JobEvent, LogLine
from kubetrain.sdk.errors import (
    AccessDeniedError,
    BackendUnavailableError,
    JobExistsError,
    JobNotFoundError,
    TrainingApiError,
    UnsupportedOperationError,
)
from kubetrain.sdk.kinds import KINDS, Job, JobKind, kind_of
from kubetrain.sdk.selectors import Operator, parse_selector

if TYPE_CHECKING:
    from kubetrain.sdk.backends.base import JobWatch

T = TypeVar("T")

REQUEST_TIMEOUT = 30.0
POD_START_POLL = 0.5
RETRY_DELAYS = (0.2, 0.5, 1.0, 2.0)
RETRIED_STATUSES = frozenset({429, 503})
PREVIOUS_LOG_LINES = 20
PREVIOUS_LOG_CHARACTERS = 2048
KUBELET_PORT = ":10250"
"""Log requests the API server could not forward to a kubelet name this port in their error."""


_DECODING_READY: set[type[Any]] = set()
_DECODING_LOCK = threading.Lock()


def _decoding_ready(*models: type[Any]) -> None:
    """Decode each typed model once, under a lock, before any thread decodes it for real.

    lightkube decodes with msgspec, which builds a type's decoder (walking its annotations) on first use; two
    threads doing that for the same type at once crashed the interpreter (SIGSEGV in msgspec 0.22's
    ``get_class_annotations``: the Jobs view reading a job's pods and events at the same time). Once built, a
    type's decoder is shared safely."""
    from lightkube.core import decoders

    for model in models:
        if model in _DECODING_READY:
            continue
        with _DECODING_LOCK:
            if model not in _DECODING_READY:
                decoders.decode_list(b'{"metadata": {}, "items": []}', model)
                _DECODING_READY.add(model)


def resource(kind: JobKind) -> type[GenericNamespacedResource]:
    return create_namespaced_resource(kind.group, kind.version, kind.kind, kind.plural)


def load_config(
    config_file: str | Path | None, context: str | None, configuration: KubeConfig | SingleConfig | None
) -> SingleConfig:
    """The cluster to talk to, as upstream finds it: ``config_file``, else in-cluster, ``$KUBECONFIG``,
    ``~/.kube/config``."""
    if configuration is not None and not isinstance(configuration, KubeConfig | SingleConfig):
        raise ValueError(
            "client_configuration must be a lightkube KubeConfig or SingleConfig, "
            f"got {type(configuration).__name__} (kubetrain does not use the kubernetes package; "
            "pass config_file and context instead)"
        )
    try:
        if isinstance(configuration, SingleConfig):
            return configuration
        loaded = configuration or (
            KubeConfig.from_file(Path(config_file).expanduser())
            if config_file is not None
            else KubeConfig.from_env()
        )
        single = loaded.get(context_name=context)
    except ConfigError as error:
        raise BackendUnavailableError(
            f"no usable kubeconfig ({error}): set KUBECONFIG or pass --kubeconfig, "
            "or use --local for jobs on this machine"
        ) from None
    if single is None:
        raise BackendUnavailableError("the kubeconfig has no current context: pass --context")
    return single


def _selector(label_selector: str | None) -> dict[str, Any]:
    operator_for: dict[Operator, Callable[[str], Any]] = {
        Operator.EQUAL: operators.equal,
        Operator.NOT_EQUAL: operators.not_equal,
        Operator.EXISTS: lambda _: operators.exists(),
        Operator.NOT_EXISTS: lambda _: operators.not_exists(),
    }
    return {r.key: operator_for[r.operator](r.value) for r in parse_selector(label_selector)}


def _message(response: httpx2.Response) -> str:
    try:
        return str(response.json().get("message") or response.text)
    except ValueError:
        return response.text.strip()


def _api_error(what: str, error: ApiError, missing: str | None = None) -> TrainingApiError:
    return _status_error(what, error.status.code or 0, error.status.message or str(error), missing)


def _status_error(what: str, code: int, message: str, missing: str | None = None) -> TrainingApiError:
    if code == 404:
        return JobNotFoundError(missing or f"{what}: not found ({message})")
    if code in (401, 403):
        return AccessDeniedError(f"{what}: forbidden: {message}")
    if code == 409:
        return JobExistsError(f"{what}: {message}")
    return TrainingApiError(f"{what}: {message}")


class KubernetesBackend:
    def __init__(
        self,
        config_file: str | Path | None = None,
        context: str | None = None,
        configuration: KubeConfig | SingleConfig | None = None,
    ) -> None:
        config = load_config(config_file, context, configuration)
        self.server = config.cluster.server
        self.default_namespace = config.namespace or "default"
        self.client = Client(config, timeout=httpx2.Timeout(REQUEST_TIMEOUT), field_manager="kubetrain")

    # --- errors --------------------------------------------------------------------------------

    def _call(self, what: str, call: Callable[[], T], *, missing: str | None = None) -> T:
        """Run one API call, turning its failure into an SDK error that says ``what`` failed and why.

        The server's "not now" answers (429 Too Many Requests, 503 while a new CRD's storage initializes)
        mean the request was not carried out, so they are retried a few times, as client-go does."""
        delays = iter(RETRY_DELAYS)
        while True:
            try:
                return call()
            except httpx2.HTTPStatusError as error:
                # ApiError carries the server's Status; lightkube's paged list raises the plain httpx error.
                status = error.status if isinstance(error, ApiError) else None
                code = (status.code if status else None) or error.response.status_code
                delay = next(delays, None) if code in RETRIED_STATUSES else None
                if delay is None:
                    message = (status.message if status else None) or _message(error.response)
                    raise _status_error(what, code, message, missing) from None
                time.sleep(delay)
            except httpx2.TransportError as error:
                raise BackendUnavailableError(
                    f"{what}: cannot reach the API server at {self.server}: {error or type(error).__name__}"
                ) from None

    def _kind_missing(self, kind: JobKind) -> str:
        return (
            f"the cluster does not serve {kind.plural}.{kind.group}/{kind.version}: install kubetrain's CRDs "
            "(kubetrain manifests crds | kubectl apply -f -)"
        )

    def _job(self, obj: Any) -> Job:
        wire = obj.to_dict() if hasattr(obj, "to_dict") else obj
        if is_trainjob(wire):
            return TrainJob.model_validate(wire)
        try:
            return parse_job(wire)
        except InvalidJobError:
            # Stored before the CRD had a rule: still listed and described (its Failed/InvalidSpec
            # condition says why), rather than one such job breaking every `get` and `list_jobs`.
            return job_shell(wire)

    # --- jobs ----------------------------------------------------------------------------------

    def create(self, job: TrainingJob, *, dry_run: bool = False) -> TrainingJob:
        created = self._create(job, dry_run)
        assert isinstance(created, TrainingJob)
        return created

    def create_trainjob(
        self, trainjob: TrainJob, runtimes: Sequence[Mapping[str, Any]], *, dry_run: bool = False
    ) -> TrainJob:
        """The API server checks it (the CRD's schema and rules) and the operator plans it on the cluster's
        runtime; ``runtimes`` are for local runs only."""
        created = self._create(trainjob, dry_run)
        assert isinstance(created, TrainJob)
        return created

    def _create(self, job: Job, dry_run: bool) -> Job:
        kind = kind_of(job)
        wire = job.to_wire()
        wire.pop("status", None)
        res = resource(kind)
        what = f"Failed to create {kind}: {job.namespace}/{job.name}"
        created = self._call(
            what,
            lambda: self.client.create(res.from_dict(wire), namespace=job.namespace, dry_run=dry_run),
            missing=f"{what}: {self._kind_missing(kind)}",
        )
        return self._job(created)

    def get(self, kind: JobKind, namespace: str, name: str) -> Job:
        what = f"Failed to get {kind}: {namespace}/{name}"
        res = resource(kind)
        try:
            found = self._call(what, lambda: self.client.get(res, name, namespace=namespace))
        except JobNotFoundError:
            self._require_served(kind, namespace)
            raise JobNotFoundError(f"{kind} {namespace}/{name} not found") from None
        return self._job(found)

    def _require_served(self, kind: JobKind, namespace: str) -> None:
        res = resource(kind)
        self._call(
            f"Failed to list {kind}",
            lambda: next(iter(self.client.list(res, namespace=namespace, chunk_size=1)), None),
            missing=self._kind_missing(kind),
        )

    def list_jobs(
        self, kind: JobKind | None, namespace: str | None, label_selector: str | None = None
    ) -> list[Job]:
        labels = _selector(label_selector)
        where = namespace or ALL_NS
        jobs: list[Job] = []
        refused: list[AccessDeniedError] = []
        listed = 0
        for each in [kind] if kind is not None else KINDS:
            res = resource(each)
            try:
                found = self._call(
                    f"Failed to list {each} in {namespace or 'all namespaces'}",
                    lambda res=res: list(self.client.list(res, namespace=where, labels=labels or None)),  # type: ignore[misc]
                    missing=self._kind_missing(each),
                )
            except JobNotFoundError:
                if kind is not None:
                    raise
                continue  # listing every kind skips the ones this cluster does not serve
            except AccessDeniedError as error:
                if kind is not None:
                    raise
                refused.append(error)  # a user of some kinds only still lists those
                continue
            listed += 1
            jobs += [self._job(o) for o in found]
        if refused and not listed:
            raise refused[0]
        return jobs

    def patch(self, kind: JobKind, namespace: str, name: str, patch: Mapping[str, Any]) -> Job:
        res = resource(kind)
        patched = self._call(
            f"Failed to update {kind}: {namespace}/{name}",
            lambda: self.client.patch(
                res, name, dict(patch), namespace=namespace, patch_type=PatchType.MERGE
            ),
            missing=f"{kind} {namespace}/{name} not found",
        )
        return self._job(patched)

    def scale(self, kind: JobKind, namespace: str, name: str, replicas: int) -> Job:
        if kind.v1_framework.scale_replica_type is None:
            raise ValueError(f"{kind} has no scale subresource; change its replicas with update_job")
        res = resource(kind)
        self._call(
            f"Failed to scale {kind}: {namespace}/{name}",
            lambda: self.client.patch(
                res.Scale,
                name,
                {"spec": {"replicas": replicas}},
                namespace=namespace,
                patch_type=PatchType.MERGE,
            ),
            missing=f"{kind} {namespace}/{name} not found",
        )
        return self.get(kind, namespace, name)

    def delete(
        self,
        kind: JobKind,
        namespace: str,
        name: str,
        *,
        propagation: str | None = None,
        grace_period: int | None = None,
    ) -> None:
        res = resource(kind)
        cascade = CascadeType(propagation) if propagation else None
        self._call(
            f"Failed to delete {kind}: {namespace}/{name}",
            lambda: self.client.delete(
                res, name, namespace=namespace, cascade=cascade, grace_period=grace_period
            ),
            missing=f"{kind} {namespace}/{name} not found",
        )

    # --- watch -------------------------------------------------------------------------------

    def watch(self, kind: JobKind | None, namespace: str | None) -> JobWatch:
        from kubetrain.sdk.backends.kubernetes_watch import ClusterJobWatch

        return ClusterJobWatch(self, [kind] if kind is not None else list(KINDS), namespace)

    @property
    def _http(self) -> httpx2.Client:
        """lightkube's own HTTP client, with its base URL, TLS and credentials: the watch reads the API's JSON
        as it is (wire forms for the Jobs view, and a stream it can close from another thread)."""
        http: httpx2.Client = self.client._client._client
        return http

    def raw_get(self, what: str, path: str, params: Mapping[str, str]) -> dict[str, Any]:
        """``GET path`` as JSON; failures as ``_call`` reports them."""

        def get() -> httpx2.Response:
            response = self._http.get(path, params=dict(params))
            response.raise_for_status()
            return response

        data = self._call(what, get).json()
        return data if isinstance(data, dict) else {}

    def raw_stream(self, path: str, params: Mapping[str, str], read_timeout: float) -> httpx2.Response:
        """``GET path`` with the body left to stream (a watch); the caller closes it."""
        timeout = httpx2.Timeout(REQUEST_TIMEOUT, read=read_timeout)
        try:
            return self._http.send(
                self._http.build_request("GET", path, params=dict(params), timeout=timeout), stream=True
            )
        except httpx2.TransportError as error:
            raise BackendUnavailableError(
                f"cannot reach the API server at {self.server}: {error or type(error).__name__}"
            ) from None

    def raise_status(self, what: str, response: httpx2.Response) -> NoReturn:
        raise _status_error(what, response.status_code, _message(response))

    def review_access(
        self,
        user: str,
        groups: tuple[str, ...],
        *,
        verb: str,
        resource: str,
        namespace: str,
        group: str = "",
        name: str = "",
        subresource: str = "",
    ) -> bool:
        """Whether the API server would let ``user`` do this (a SubjectAccessReview): how a service acting
        for its users with its own credentials asks before it acts."""
        from lightkube.models.authorization_v1 import ResourceAttributes, SubjectAccessReviewSpec
        from lightkube.resources.authorization_v1 import SubjectAccessReview

        attributes = ResourceAttributes(
            verb=verb,
            group=group,
            resource=resource,
            namespace=namespace or None,
            name=name or None,
            subresource=subresource or None,
        )
        review = SubjectAccessReview(
            spec=SubjectAccessReviewSpec(
                user=user, groups=list(groups) or None, resourceAttributes=attributes
            )
        )
        _decoding_ready(SubjectAccessReview)
        answer = self._call(
            f"Failed to review {verb} {resource} for {user}", lambda: self.client.create(review)
        )
        return bool(answer.status is not None and answer.status.allowed)

    # --- pods, logs, events --------------------------------------------------------------------

    def pods(self, namespace: str, job_name: str, labels: Mapping[str, str]) -> list[Pod]:
        _decoding_ready(Pod)
        found = self._call(
            f"Failed to list pods of {namespace}/{job_name}",
            lambda: list(self.client.list(Pod, namespace=namespace, labels=dict(labels))),
        )
        return sorted(found, key=lambda p: (p.metadata.name or "") if p.metadata else "")

    def restarts(self, namespace: str, job_name: str) -> int:
        pods = self.pods(namespace, job_name, {JOB_NAME_LABEL: job_name})
        return sum(s.restartCount for p in pods if p.status for s in p.status.containerStatuses or [])

    def logs(
        self,
        namespace: str,
        job_name: str,
        pods: list[str],
        *,
        container: str | None,
        follow: bool,
        tail_lines: int | None,
        containers: Mapping[str, str] | None = None,
    ) -> Iterator[LogLine]:
        chosen = {pod: (containers or {}).get(pod, container) for pod in pods}
        if not follow:
            for pod in pods:
                if self._phase(namespace, pod) == "Pending":
                    continue  # as upstream: a pod that has not started has no logs yet
                for line in self._pod_log(namespace, pod, chosen[pod], False, tail_lines):
                    yield LogLine(pod, line)
            return
        yield from self._follow(namespace, chosen, tail_lines)

    def _phase(self, namespace: str, pod: str) -> str:
        _decoding_ready(Pod)
        found = self._call(
            f"Failed to get pod {namespace}/{pod}", lambda: self.client.get(Pod, pod, namespace=namespace)
        )
        return (found.status.phase if found.status else None) or "Pending"

    def _pod_log(
        self, namespace: str, pod: str, container: str | None, follow: bool, tail_lines: int | None
    ) -> Iterator[str]:
        what = f"Failed to read logs of pod {namespace}/{pod}"
        try:
            lines = self.client.log(
                pod,
                namespace=namespace,
                container=container,
                follow=follow,
                tail_lines=tail_lines,
                newlines=False,
            )
            yield from lines
        except ApiError as error:
            message = error.status.message or str(error)
            if KUBELET_PORT in message or "containerLogs" in message:
                raise UnsupportedOperationError(
                    f"{what}: the API server could not reach the kubelet of the pod's node ({message}); "
                    "no kubelet serves logs on this cluster (envtest has none)"
                ) from None
            raise _api_error(what, error) from None
        except httpx2.TransportError as error:
            raise BackendUnavailableError(
                f"{what}: cannot reach the API server at {self.server}: {error}"
            ) from None

    def _follow(
        self, namespace: str, pods: Mapping[str, str | None], tail_lines: int | None
    ) -> Iterator[LogLine]:
        """Every pod's stream at once: one thread per pod waits for it to start, then follows it."""
        lines: queue.Queue[LogLine | BaseException | None] = queue.Queue(maxsize=1000)
        stop = threading.Event()

        def pump(pod: str) -> None:
            try:
                while not stop.is_set() and self._phase(namespace, pod) == "Pending":
                    time.sleep(POD_START_POLL)
                for line in self._pod_log(namespace, pod, pods[pod], True, tail_lines):
                    if stop.is_set():
                        return
                    lines.put(LogLine(pod, line))
                lines.put(None)
            except BaseException as error:  # handed to the reader, which raises it
                lines.put(error)

        threads = [threading.Thread(target=pump, args=(p,), daemon=True) for p in pods]
        for thread in threads:
            thread.start()
        remaining = len(threads)
        try:
            while remaining:
                item = lines.get()
                if item is None:
                    remaining -= 1
                elif isinstance(item, BaseException):
                    raise item
                else:
                    yield item
        finally:
            stop.set()
            with contextlib.suppress(queue.Empty):
                while True:
                    lines.get_nowait()

    def events(
        self,
        namespace: str,
        kind: str,
        job_name: str,
        pod_names: list[str],
        related: Sequence[tuple[str, str]] = (),
    ) -> list[JobEvent]:
        wanted = {(kind, job_name)} | {("Pod", p) for p in pod_names} | set(related)
        _decoding_ready(Event)
        found = self._call(
            f"Failed to list events in {namespace}",
            lambda: list(self.client.list(Event, namespace=namespace)),
        )
        events = []
        for event in found:
            involved = event.involvedObject
            if (involved.kind, involved.name) not in wanted:
                continue
            last = (
                event.lastTimestamp
                or event.eventTime
                or (event.metadata.creationTimestamp if event.metadata else None)
            )
            events.append(
                JobEvent(
                    type=event.type or "",
                    reason=event.reason or "",
                    message=event.message or "",
                    involved=f"{involved.kind}/{involved.name}",
                    count=event.count or 1,
                    last_seen=last if isinstance(last, datetime) else None,
                )
            )
        return sorted(events, key=lambda e: e.last_seen.timestamp() if e.last_seen else 0.0)

    def progress_history(self, kind: JobKind, namespace: str, name: str) -> ProgressHistory:
        """The history the operator's status endpoint keeps in ``<job>-progress-history``, owned by the job:
        empty when the job never reported (or the endpoint is off); JobNotFoundError when there is no job."""
        job = self.get(kind, namespace, name)
        config_map_name = history_config_map_name(name)
        try:
            found = self._call(
                f"Failed to read the progress history of {kind} {namespace}/{name}",
                lambda: self.client.get(ConfigMap, config_map_name, namespace=namespace),
            )
        except JobNotFoundError:
            return ProgressHistory()
        return read_history(found.to_dict(), str(job.metadata.uid or ""))

    def failures(self, kind: JobKind, namespace: str, name: str) -> FailureRecord | None:
        """What the operator keeps of the job's failures in ``<job>-failure``, owned by the job: None while no
        replica failed (or for a TrainJob, whose failures are not kept); JobNotFoundError when there is no
        job."""
        job = self.get(kind, namespace, name)
        try:
            found = self._call(
                f"Failed to read the failures of {kind} {namespace}/{name}",
                lambda: self.client.get(ConfigMap, failure_config_map_name(name), namespace=namespace),
            )
        except JobNotFoundError:
            return None
        return read_record(found.to_dict(), str(job.metadata.uid or ""))

    def diagnose(self, kind: JobKind, namespace: str, name: str) -> list[Finding]:
        """As the operator diagnoses the job: its pods observed as the operator observes them, the previous
        log of each crash-looping container a finding quotes read once, then ``engine.diagnosis``."""
        from kubetrain.engine.admission import admit
        from kubetrain.engine.diagnosis import diagnose, quoted_crash_loops
        from kubetrain.frameworks.registry import framework_for
        from kubetrain.kube.observe import ContainerKey, observe_pod, replica_identity, with_last_lines

        found = self.get(kind, namespace, name)
        if isinstance(found, TrainJob):
            run = self._trainjob_run(found)
            if run is None:
                return []  # no JobSet yet (or any more): no pods to diagnose
            job: TrainingJob = run
            framework = framework_for(run)
            pods = [pod.to_dict() for pod in self.pods(namespace, name, {JOBSET_NAME_LABEL: name})]
        else:
            job, framework = found, kind.v1_framework
            # As the operator plans it (defaults: replica counts, policies); an invalid one is read as it is
            # (its InvalidSpec condition says why).
            with contextlib.suppress(InvalidJobError):
                job = admit(job, framework)
            uid = job.metadata.uid
            pods = [
                pod.to_dict()
                for pod in self.pods(namespace, name, {JOB_NAME_LABEL: name})
                if uid is None or _controlled_by(pod, uid)
            ]
        observed = [r for r in (observe_pod(pod, job, framework) for pod in pods) if r is not None]
        now = datetime.now(UTC)
        by_identity = {replica_identity(pod, job, framework): pod for pod in pods}
        lines: dict[ContainerKey, str] = {}
        for replica, container in quoted_crash_loops(job, framework, observed, now):
            pod = by_identity.get((replica.replica_type, replica.index))
            if pod is not None:
                lines[(replica.replica_type, replica.index, container.name)] = self._previous_log(
                    namespace, str(pod["metadata"]["name"]), container.name
                )
        replicas = with_last_lines(Observation(replicas=tuple(observed)), lines).replicas
        return list(diagnose(job, framework, replicas, now).findings)

    def training_runtime(self, trainjob: TrainJob) -> TrainingRuntime:
        """The runtime the TrainJob names, as the cluster holds it (what the operator plans it on)."""
        from lightkube.generic_resource import create_global_resource

        from kubetrain.api.trainer import CLUSTER_TRAINING_RUNTIME, GROUP, VERSION, ClusterTrainingRuntime
        from kubetrain.engine.trainjob_plan import runtime_key

        _, kind = runtime_key(trainjob)
        name, namespace = trainjob.spec.runtime_ref.name, trainjob.namespace
        what = f"Failed to get {kind} {name}"
        found: Any
        try:
            if kind == CLUSTER_TRAINING_RUNTIME:
                res = create_global_resource(GROUP, VERSION, kind, "clustertrainingruntimes")
                found = self._call(what, lambda: self.client.get(res, name))
                return ClusterTrainingRuntime.model_validate(found.to_dict())
            namespaced = create_namespaced_resource(GROUP, VERSION, kind, "trainingruntimes")
            found = self._call(what, lambda: self.client.get(namespaced, name, namespace=namespace))
        except JobNotFoundError:
            raise JobNotFoundError(
                f"{kind} {name} not found: the TrainJob's spec.runtimeRef names no runtime of this cluster"
            ) from None
        return TrainingRuntime.model_validate(found.to_dict())

    def _trainjob_run(self, trainjob: TrainJob) -> TrainingJob | None:
        """The TrainJob's JobSet as the engine reads one (``frameworks.jobset_run``), with the TrainJob's
        progress and Stalled condition, so that the rules diagnose it as they do a v1 job; None without."""
        from kubetrain.api.common import JobCondition
        from kubetrain.frameworks.jobset_run import from_jobset
        from kubetrain.frameworks.trainer.jobset import JOBSET_API, JOBSET_KIND

        group, version = JOBSET_API.split("/")
        jobsets = create_namespaced_resource(group, version, JOBSET_KIND, "jobsets")
        jobset: Any
        try:
            jobset = self._call(
                f"Failed to get the JobSet of TrainJob {trainjob.namespace}/{trainjob.name}",
                lambda: self.client.get(jobsets, trainjob.name, namespace=trainjob.namespace),
            )
        except JobNotFoundError:
            return None
        run = from_jobset(jobset.to_dict(), trainjob.to_wire())
        stalled = [
            JobCondition.model_validate(c.to_wire())
            for c in trainjob.status.conditions or ()
            if c.type == ConditionType.STALLED
        ]
        run.status = run.status.model_copy(
            update={"conditions": stalled, "trainer_status": trainjob.status.trainer_status}
        )
        return run

    def _previous_log(self, namespace: str, pod: str, container: str) -> str:
        """The tail of ``container``'s previous run (``kubectl logs --previous``), or "" where it cannot be
        read: the finding is shown without it. lightkube's ``log`` has no ``previous``, so the request is
        built as it builds its own."""
        from lightkube.resources.core_v1 import PodLog

        client = self.client._client
        request = client.prepare_request(
            "get",
            PodLog,
            name=pod,
            namespace=namespace,
            params={"container": container, "previous": True, "tailLines": PREVIOUS_LOG_LINES},
        )
        try:
            response = client.send(client.build_adapter_request(request))
        except httpx2.HTTPError:
            return ""
        return response.text[-PREVIOUS_LOG_CHARACTERS:] if response.status_code == 200 else ""


def _controlled_by(pod: Pod, uid: str) -> bool:
    """Owned by the job itself (not a pod of an older job of the same name, or of its batch Job)."""
    references = (pod.metadata.ownerReferences if pod.metadata else None) or []
    return any(r.controller and r.uid == uid for r in references)
