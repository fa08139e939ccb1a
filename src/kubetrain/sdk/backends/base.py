"""What every backend answers. ``TrainingClient`` adds upstream's signatures, defaults and error vocabulary on
top; backends only fetch and change things, raising the errors of ``kubetrain.sdk.errors``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from kubetrain.api.jobs import TrainingJob
from kubetrain.api.progress import ProgressHistory
from kubetrain.api.summary import NodeTally
from kubetrain.api.trainer import TrainingRuntime, TrainJob
from kubetrain.engine.diagnosis import Finding
from kubetrain.engine.failures import FailureRecord
from kubetrain.sdk.kinds import Job, JobKind

if TYPE_CHECKING:
    # lightkube's import pulls in its HTTP client: only for the annotations, not for every CLI command.
    from lightkube.resources.core_v1 import Pod


@dataclass(frozen=True)
class JobEvent:
    """A Kubernetes Event about the job or one of its pods (locally: the runner's events)."""

    type: str
    reason: str
    message: str
    involved: str
    """``<Kind>/<name>`` of the object the event is about."""
    count: int = 1
    last_seen: datetime | None = None


@dataclass(frozen=True)
class LogLine:
    pod: str
    line: str


class WatchEventType(StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    SYNCED = "SYNCED"
    """Every job that exists has been yielded: after the initial list, and again after each re-list."""
    UNAVAILABLE = "UNAVAILABLE"
    """The backend cannot be reached; the watch retries on its own (``message`` says why)."""


@dataclass(frozen=True)
class JobWatchEvent:
    type: WatchEventType
    job: Mapping[str, Any] | None = None
    """The job's wire form (``status`` included); for DELETED, as last seen. None for SYNCED, UNAVAILABLE."""
    restarts: int | None = None
    """Container restarts of the job's live pods, as ``restarts()`` answers; None when the backend cannot
    tell (pods it may not watch)."""
    message: str = ""
    nodes: NodeTally | None = None
    """A TrainJob's training nodes as its pods show them (its state, Running or Created, depends on them);
    None for a v1 job, or when the backend cannot tell."""


class JobWatch(Protocol):
    """What a watch promises, on both backends (the Jobs view is written against exactly this):

    - It first yields ADDED for every job that exists (in no particular order), then SYNCED.
    - Then ADDED, MODIFIED or DELETED whenever a job is created, changes (its status included) or goes, in
      the order they happened for each job; a change of its pods' restart count (a TrainJob's: of its
      ``nodes``) is a MODIFIED of the job.
      DELETED carries the job as last seen.
    - A lost connection or an expired resourceVersion (410 Gone) is healed inside: the watch yields
      UNAVAILABLE once while it cannot reach the backend, retries with backoff (up to 30 s apart), re-lists,
      yields what changed meanwhile (ADDED, MODIFIED, DELETED of the jobs that went) and SYNCED again. So
      applying the events in order to a map keyed by the job's kind, namespace and name gives exactly the
      backend's jobs at every SYNCED, however long the outage; a MODIFIED may repeat a job unchanged.
    - What retrying cannot fix (403 Forbidden) is raised from the iteration, as every method raises it;
      watching every kind, a kind the user may not list is left out, and the refusal raised only once every
      kind is refused (as ``list_jobs`` of every kind does).
    - ``close()``, from any thread, ends the iteration: the consumer's loop stops at once; the backend's own
      connection ends within a minute. A watch is never restarted: make another.
    """

    def __iter__(self) -> Iterator[JobWatchEvent]: ...

    def close(self) -> None: ...


class Backend(Protocol):
    default_namespace: str

    def create(self, job: TrainingJob, *, dry_run: bool = False) -> TrainingJob: ...

    def create_trainjob(
        self, trainjob: TrainJob, runtimes: Sequence[Mapping[str, Any]], *, dry_run: bool = False
    ) -> TrainJob:
        """Create a TrainJob; ``runtimes`` are the runtimes a local run may name besides the built-in ones (a
        cluster's TrainJob names the cluster's)."""
        ...

    def get(self, kind: JobKind, namespace: str, name: str) -> Job: ...

    def training_runtime(self, trainjob: TrainJob) -> TrainingRuntime:
        """The runtime a TrainJob names, as it would run on it: the cluster's; locally a built-in one."""
        ...

    def list_jobs(
        self, kind: JobKind | None, namespace: str | None, label_selector: str | None = None
    ) -> list[Job]:
        """``kind`` None: every kind; ``namespace`` None: every namespace."""
        ...

    def patch(self, kind: JobKind, namespace: str, name: str, patch: Mapping[str, Any]) -> Job:
        """A JSON merge patch of the job."""
        ...

    def scale(self, kind: JobKind, namespace: str, name: str, replicas: int) -> Job: ...

    def delete(
        self,
        kind: JobKind,
        namespace: str,
        name: str,
        *,
        propagation: str | None = None,
        grace_period: int | None = None,
    ) -> None:
        """``propagation``: Background (default), Foreground or Orphan, as the API's propagationPolicy."""
        ...

    def watch(self, kind: JobKind | None, namespace: str | None) -> JobWatch:
        """The jobs of ``kind`` (None: every kind served) in ``namespace`` (None: every namespace), then
        their changes, as ``JobWatch`` promises."""
        ...

    def pods(self, namespace: str, job_name: str, labels: Mapping[str, str]) -> list[Pod]:
        """The job's pods carrying ``labels`` (locally: one synthesized Pod per replica process)."""
        ...

    def restarts(self, namespace: str, job_name: str) -> int:
        """Container restarts of the job's live pods (``get``'s RESTARTS without building Pod models)."""
        ...

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
        """Lines of the pods' ``container`` (``containers``: each pod's own, by pod name), each pod's in order
        (``tail_lines``: each pod's last N first).

        Following streams every pod at once, waiting for pending ones to start, and ends when every pod's
        stream has ended: on a cluster when its container exits (the kubelet ends the stream; a container
        restarted in place is a new stream, which a caller follows again) or the pod is deleted; locally when
        the run ends (a replica's restarts append to one log). A job deleted while it is followed ends the
        iteration quietly. Without following, a pod that does not exist raises ``JobNotFoundError``."""
        ...

    def events(
        self,
        namespace: str,
        kind: str,
        job_name: str,
        pod_names: list[str],
        related: Sequence[tuple[str, str]] = (),
    ) -> list[JobEvent]:
        """Events about the job (``<kind>/<job_name>``), its pods and the ``related`` objects (``(kind,
        name)``: a TrainJob's JobSet), oldest first."""
        ...

    def progress_history(self, kind: JobKind, namespace: str, name: str) -> ProgressHistory:
        """The job's progress reports over its life, thinned (``api.progress.ProgressHistory``); empty when
        it never reported."""
        ...

    def diagnose(self, kind: JobKind, namespace: str, name: str) -> list[Finding]:
        """The failure modes the job shows now (``engine.diagnosis``), computed from its replicas as they are:
        a resolved one is no longer listed."""
        ...

    def failures(self, kind: JobKind, namespace: str, name: str) -> FailureRecord | None:
        """Which of the job's replicas failed first and how, and each failed replica's latest failure
        (``engine.failures``), as kept on the job (after its pods are gone too); None while none failed."""
        ...
