"""The cluster backend's watch: a list, then a watch from its resourceVersion, per job kind, and one over the
jobs' pods for their restart counts (and one over the JobSets' pods for the TrainJobs' restarts and nodes),
merged into the events ``JobWatch`` promises.

Each kind and the pods are followed by a thread of their own on lightkube's HTTP client (its TLS and
credentials), reading the API server's JSON lines as they are rather than building a model per event: the
jobs are handed on in their wire form, and of a pod only its job and restart count are kept, so memory grows
with the number of jobs and pods, not with their specs. A thread re-lists after 410 Gone or a broken stream;
the consumer compares the re-list with what it has told (``WatchLedger``), so nothing is missed or repeated.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx2

from kubetrain.api.summary import NodeTally
from kubetrain.frameworks.jobset_run import (
    COMPLETION_INDEX_LABEL,
    JOB_INDEX_LABEL,
    JOBSET_NAME_LABEL,
    REPLICATED_JOB_LABEL,
)
from kubetrain.frameworks.labels import JOB_NAME_LABEL
from kubetrain.sdk import trainjobs
from kubetrain.sdk.backends.base import JobWatchEvent, WatchEventType
from kubetrain.sdk.backends.watching import JobKey, Listed, WatchLedger, job_key
from kubetrain.sdk.errors import AccessDeniedError, JobNotFoundError, TrainingApiError
from kubetrain.sdk.kinds import JobKind

if TYPE_CHECKING:
    from kubetrain.sdk.backends.kubernetes import KubernetesBackend

WATCH_SECONDS = 50
"""The API server ends each watch request after this long; the thread then watches on from where it was."""
READ_TIMEOUT = 80.0
"""A watch that has sent nothing, not even its end, for this long is broken: re-list."""
PAGE = 500
BACKOFF_START, BACKOFF_MAX = 1.0, 30.0
PODS = "pods"
JOBSET_PODS = "jobset-pods"
"""The pods of JobSets: a TrainJob's (its JobSet has its name) carry no kubetrain job label."""


class _GoneError(Exception):
    """410: the resourceVersion watched from is too old; only a re-list continues."""


@dataclass(frozen=True)
class _Listed:
    source: str
    """A kind's ``apiVersion/kind``, or ``PODS``."""
    items: list[dict[str, Any]] | None
    """None: the source cannot be read (a kind not served, pods not permitted)."""


@dataclass(frozen=True)
class _Changed:
    source: str
    type: str
    item: dict[str, Any]


@dataclass(frozen=True)
class _Unavailable:
    message: str


@dataclass(frozen=True)
class _Failed:
    error: Exception
    source: str = ""
    """The kind refused (403), when a kind's list or watch was."""


_Message = _Listed | _Changed | _Unavailable | _Failed


def _source(kind: JobKind) -> str:
    return f"{kind.api_version}/{kind.kind}"


def _pod_restarts(pod: Mapping[str, Any]) -> int:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return sum(int(s.get("restartCount") or 0) for s in statuses if isinstance(s, Mapping))


def _pod_job(pod: Mapping[str, Any], label: str = JOB_NAME_LABEL) -> tuple[str, str] | None:
    metadata = pod.get("metadata") or {}
    job = (metadata.get("labels") or {}).get(label)
    return None if not job else (str(metadata.get("namespace") or ""), str(job))


@dataclass(frozen=True)
class _JobSetPod:
    """Of a JobSet's pod, what its TrainJob's row needs."""

    job: tuple[str, str]
    restarts: int
    seen: trainjobs.PodSeen


class _JobSetPods:
    """The JobSets' pods by their JobSet (a TrainJob's has its name): restarts and training nodes."""

    def __init__(self) -> None:
        self.by_job: dict[tuple[str, str], dict[str, _JobSetPod]] = {}
        self.where: dict[tuple[str, str], tuple[str, str]] = {}
        """Pod (namespace, name) → its JobSet (namespace, name)."""

    def put(self, pod: Mapping[str, Any], *, deleted: bool) -> set[tuple[str, str]]:
        """Fold one pod in; the JobSets whose pods changed."""
        metadata = pod.get("metadata") or {}
        name = (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))
        changed = set()
        before = self.where.pop(name, None)
        if before is not None:
            self.by_job.get(before, {}).pop(name[1], None)
            changed.add(before)
        job = None if deleted else _pod_job(pod, JOBSET_NAME_LABEL)
        if job is not None:
            labels = {str(k): str(v) for k, v in (metadata.get("labels") or {}).items() if v is not None}
            phase = str((pod.get("status") or {}).get("phase") or "Pending")
            seen = trainjobs.PodSeen(name[1], labels, phase)
            self.by_job.setdefault(job, {})[name[1]] = _JobSetPod(job, _pod_restarts(pod), seen)
            self.where[name] = job
            changed.add(job)
        return changed

    def restarts(self, job: tuple[str, str]) -> int:
        return sum(p.restarts for p in self.by_job.get(job, {}).values())

    def nodes(self, job: tuple[str, str]) -> NodeTally:
        return trainjobs.node_tally(p.seen for p in self.by_job.get(job, {}).values())


class ClusterJobWatch:
    def __init__(self, backend: KubernetesBackend, kinds: list[JobKind], namespace: str | None) -> None:
        self.backend = backend
        self.kinds = kinds
        self.namespace = namespace
        self._stop = threading.Event()
        self._messages: queue.Queue[_Message] = queue.Queue(maxsize=10_000)
        self._streams: set[httpx2.Response] = set()
        self._lock = threading.Lock()
        self._started = False

    # --- the consumer's side ---------------------------------------------------------------------

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            streams = list(self._streams)
        for stream in streams:
            with contextlib.suppress(Exception):
                stream.close()

    def __iter__(self) -> Iterator[JobWatchEvent]:
        if self._started:
            raise RuntimeError("a watch is iterated once; make another")
        self._started = True
        sources = [_source(k) for k in self.kinds]
        trainjob_sources = {_source(k) for k in self.kinds if k.is_trainjob}
        for kind in self.kinds:
            self._thread(self._follow_jobs, kind)
        self._thread(self._follow_pods)
        if trainjob_sources:
            self._thread(self._follow_jobset_pods)
        jobs: dict[JobKey, Mapping[str, Any]] = {}
        pods: dict[tuple[str, str], tuple[tuple[str, str], int]] | None = {}
        """Pod (namespace, name) → its job (namespace, name) and restarts; None: pods not readable."""
        totals: dict[tuple[str, str], int] = {}
        jobset_pods: _JobSetPods | None = _JobSetPods()
        """None: the JobSets' pods are not readable."""
        waiting = {*sources, PODS, *([JOBSET_PODS] if trainjob_sources else [])}
        forbidden: set[str] = set()
        """Kinds the user may not list: left out while another kind is watched (a user of the v1 kinds only
        still sees them); the refusal is raised once every kind is refused."""
        ledger = WatchLedger()
        unavailable = False

        def restarts_of(key: JobKey) -> int | None:
            if key[0] in trainjob_sources:
                return None if jobset_pods is None else jobset_pods.restarts((key[1], key[2]))
            return None if pods is None else totals.get((key[1], key[2]), 0)

        def nodes_of(key: JobKey) -> NodeTally | None:
            if key[0] not in trainjob_sources or jobset_pods is None:
                return None
            return jobset_pods.nodes((key[1], key[2]))

        def listed(key: JobKey, job: Mapping[str, Any]) -> Listed:
            version = str((job.get("metadata") or {}).get("resourceVersion") or "")
            return Listed(job, version, restarts_of(key), nodes_of(key))

        while not self._stop.is_set():
            try:
                message = self._messages.get(timeout=0.25)
            except queue.Empty:
                continue
            events: list[JobWatchEvent | None] = []
            if isinstance(message, _Failed):
                forbidden.add(message.source)
                if not message.source or forbidden >= set(sources):
                    raise message.error
                message = _Listed(message.source, None)
            if isinstance(message, _Unavailable):
                if not unavailable:
                    unavailable = True
                    yield JobWatchEvent(WatchEventType.UNAVAILABLE, message=message.message)
                continue
            if isinstance(message, _Listed) and message.source == PODS:
                pods = None if message.items is None else {}
                totals = {}
                for pod in message.items or []:
                    self._count_pod(pods, totals, pod, deleted=False)
            elif isinstance(message, _Listed) and message.source == JOBSET_PODS:
                jobset_pods = None if message.items is None else _JobSetPods()
                for pod in message.items or []:
                    if jobset_pods is not None:
                        jobset_pods.put(pod, deleted=False)
            elif isinstance(message, _Listed):
                for key in [k for k in jobs if k[0] == message.source]:
                    del jobs[key]
                for item in message.items or []:
                    jobs[job_key(item)] = item
            elif message.source == PODS:
                job = self._count_pod(pods, totals, message.item, deleted=message.type == "DELETED")
                if job is not None and not waiting:
                    for source in sources:
                        if source not in trainjob_sources:
                            events.append(ledger.with_restarts((source, *job), restarts_of((source, *job))))
            elif message.source == JOBSET_PODS:
                changed = (
                    set()
                    if jobset_pods is None
                    else jobset_pods.put(message.item, deleted=message.type == "DELETED")
                )
                if not waiting:
                    for job in changed:
                        for source in trainjob_sources:
                            key = (source, *job)
                            events.append(ledger.with_pods(key, restarts_of(key), nodes_of(key)))
            else:
                key = job_key(message.item)
                if message.type == "DELETED":
                    jobs.pop(key, None)
                    if ledger.knows(key):
                        events.append(ledger.delete(key, message.item))
                else:
                    jobs[key] = message.item
                    if not waiting:
                        events.append(ledger.change(listed(key, message.item)))
            if isinstance(message, _Listed):
                unavailable = False
                waiting.discard(message.source)
                if not waiting:
                    relisted = message.source
                    events += ledger.resync(
                        [listed(k, j) for k, j in jobs.items()],
                        lambda key, source=relisted: source in (PODS, JOBSET_PODS) or key[0] == source,  # type: ignore[misc]
                    )
                    events.append(JobWatchEvent(WatchEventType.SYNCED))
            for event in events:
                if event is not None:
                    yield event

    @staticmethod
    def _count_pod(
        pods: dict[tuple[str, str], tuple[tuple[str, str], int]] | None,
        totals: dict[tuple[str, str], int],
        pod: Mapping[str, Any],
        *,
        deleted: bool,
    ) -> tuple[str, str] | None:
        """Fold one pod into the per-job restart totals; the job whose total changed, if any."""
        if pods is None:
            return None
        metadata = pod.get("metadata") or {}
        name = (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))
        job = None if deleted else _pod_job(pod)
        after = None if job is None else (job, _pod_restarts(pod))
        before = pods.get(name)
        if before == after:
            return None
        if before is not None:
            totals[before[0]] -= before[1]
            del pods[name]
        if after is not None:
            pods[name] = after
            totals[after[0]] = totals.get(after[0], 0) + after[1]
        changed = after if after is not None else before
        return None if changed is None else changed[0]

    # --- the threads -----------------------------------------------------------------------------

    def _thread(self, target: Any, *args: Any) -> None:
        threading.Thread(target=target, args=args, daemon=True, name=f"watch-{args or 'pods'}").start()

    def _put(self, message: _Message) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(queue.Full):
                self._messages.put(message, timeout=0.5)
                return

    def _path(self, kind: JobKind | None) -> str:
        base = "/api/v1" if kind is None else f"/apis/{kind.group}/{kind.version}"
        plural = PODS if kind is None else kind.plural
        where = f"/namespaces/{self.namespace}" if self.namespace else ""
        return f"{base}{where}/{plural}"

    def _follow_jobs(self, kind: JobKind) -> None:
        def stamped(item: dict[str, Any]) -> dict[str, Any]:
            # Items of a list carry no kind; events' objects do. Both are handed on complete.
            item.setdefault("apiVersion", kind.api_version)
            item.setdefault("kind", kind.kind)
            return item

        self._follow(_source(kind), self._path(kind), {}, stamped, served_or_none=True)

    def _follow_pods(self) -> None:
        self._follow(
            PODS, self._path(None), {"labelSelector": JOB_NAME_LABEL}, _slim_pod, served_or_none=False
        )

    def _follow_jobset_pods(self) -> None:
        self._follow(
            JOBSET_PODS,
            self._path(None),
            {"labelSelector": JOBSET_NAME_LABEL},
            _slim_jobset_pod,
            served_or_none=False,
        )

    def _follow(
        self,
        source: str,
        path: str,
        params: dict[str, str],
        shape: Any,
        *,
        served_or_none: bool,
    ) -> None:
        delay = BACKOFF_START
        while not self._stop.is_set():
            try:
                items, version = self._list(path, params)
            except JobNotFoundError:
                self._put(_Listed(source, None))  # a kind this cluster does not serve: nothing to watch
                return
            except AccessDeniedError as error:
                if served_or_none:
                    self._put(_Failed(error, source))
                else:
                    self._put(_Listed(source, None))  # pods not readable: restarts unknown, jobs still shown
                return
            except TrainingApiError as error:
                self._put(_Unavailable(str(error)))
                self._stop.wait(delay)
                delay = min(delay * 2, BACKOFF_MAX)
                continue
            delay = BACKOFF_START
            self._put(_Listed(source, [shape(i) for i in items]))
            try:
                while not self._stop.is_set():
                    for kind, item in self._stream(path, params, version):
                        version = str((item.get("metadata") or {}).get("resourceVersion") or version)
                        if kind != "BOOKMARK":
                            self._put(_Changed(source, kind, shape(item)))
            except _GoneError:
                continue
            except AccessDeniedError as error:
                if served_or_none:
                    self._put(_Failed(error, source))
                return
            except (TrainingApiError, httpx2.HTTPError, ValueError) as error:
                if self._stop.is_set():
                    return
                self._put(_Unavailable(f"the watch of {path} broke: {error or type(error).__name__}"))
                self._stop.wait(delay)
                delay = min(delay * 2, BACKOFF_MAX)

    def _list(self, path: str, params: dict[str, str]) -> tuple[list[dict[str, Any]], str]:
        items: list[dict[str, Any]] = []
        page: dict[str, str] = {**params, "limit": str(PAGE)}
        while True:
            data = self.backend.raw_get(f"Failed to list {path}", path, page)
            items += data.get("items") or []
            metadata = data.get("metadata") or {}
            if not metadata.get("continue"):
                return items, str(metadata.get("resourceVersion") or "")
            page = {**page, "continue": str(metadata["continue"])}

    def _stream(
        self, path: str, params: dict[str, str], version: str
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        query = {
            **params,
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": version,
            "timeoutSeconds": str(WATCH_SECONDS),
        }
        response = self.backend.raw_stream(path, query, READ_TIMEOUT)
        with self._lock:
            self._streams.add(response)
        try:
            if response.status_code == 410:
                raise _GoneError
            if response.status_code >= 400:
                response.read()
                self.backend.raise_status(f"Failed to watch {path}", response)
            for line in response.iter_lines():
                if self._stop.is_set():
                    return
                if not line.strip():
                    continue
                event = json.loads(line)
                kind, item = str(event.get("type") or ""), event.get("object") or {}
                if kind == "ERROR":
                    if item.get("code") == 410:
                        raise _GoneError
                    raise TrainingApiError(f"the watch of {path} failed: {item.get('message') or item}")
                yield kind, item
        finally:
            with self._lock:
                self._streams.discard(response)
            response.close()


def _slim_jobset_pod(pod: Mapping[str, Any]) -> dict[str, Any]:
    """Of a JobSet's pod, what its TrainJob's row needs: its JobSet, replica labels, phase and restarts."""
    metadata = pod.get("metadata") or {}
    labels = metadata.get("labels") or {}
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    kept = (
        JOBSET_NAME_LABEL,
        REPLICATED_JOB_LABEL,
        JOB_INDEX_LABEL,
        COMPLETION_INDEX_LABEL,
    )
    return {
        "metadata": {
            "name": metadata.get("name"),
            "namespace": metadata.get("namespace"),
            "resourceVersion": metadata.get("resourceVersion"),
            "labels": {k: labels[k] for k in kept if k in labels},
        },
        "status": {
            "phase": (pod.get("status") or {}).get("phase"),
            "containerStatuses": [{"restartCount": s.get("restartCount", 0)} for s in statuses],
        },
    }


def _slim_pod(pod: Mapping[str, Any]) -> dict[str, Any]:
    """Of a pod, what the restart counts need: its name, job and containers' restart counts."""
    metadata = pod.get("metadata") or {}
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return {
        "metadata": {
            "name": metadata.get("name"),
            "namespace": metadata.get("namespace"),
            "resourceVersion": metadata.get("resourceVersion"),
            "labels": {JOB_NAME_LABEL: (metadata.get("labels") or {}).get(JOB_NAME_LABEL)},
        },
        "status": {"containerStatuses": [{"restartCount": s.get("restartCount", 0)} for s in statuses]},
    }
