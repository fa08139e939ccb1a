"""What every backend answers. ``TrainingClient`` adds upstream's signatures, defaults and error vocabulary on
top; backends only fetch and change things, raising the errors of ``kubetrain.sdk.errors``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from kubetrain.api.jobs import TrainingJob
from kubetrain.api.progress import ProgressHistory
from kubetrain.engine.diagnosis import Finding
from kubetrain.sdk.kinds import JobKind

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


class Backend(Protocol):
    default_namespace: str

    def create(self, job: TrainingJob, *, dry_run: bool = False) -> TrainingJob: ...

    def get(self, kind: JobKind, namespace: str, name: str) -> TrainingJob: ...

    def list_jobs(
        self, kind: JobKind | None, namespace: str | None, label_selector: str | None = None
    ) -> list[TrainingJob]:
        """``kind`` None: every kind; ``namespace`` None: every namespace."""
        ...

    def patch(self, kind: JobKind, namespace: str, name: str, patch: Mapping[str, Any]) -> TrainingJob:
        """A JSON merge patch of the job."""
        ...

    def scale(self, kind: JobKind, namespace: str, name: str, replicas: int) -> TrainingJob: ...

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
    ) -> Iterator[LogLine]:
        """Lines of the pods' ``container``; following streams every pod, waiting for pending ones to start,
        until each has finished."""
        ...

    def events(self, namespace: str, kind: str, job_name: str, pod_names: list[str]) -> list[JobEvent]:
        """Events about the job (``<kind>/<job_name>``) and its pods, oldest first."""
        ...

    def progress_history(self, kind: JobKind, namespace: str, name: str) -> ProgressHistory:
        """The job's progress reports over its life, thinned (``api.progress.ProgressHistory``); empty when
        it never reported."""
        ...

    def diagnose(self, kind: JobKind, namespace: str, name: str) -> list[Finding]:
        """The failure modes the job shows now (``engine.diagnosis``), computed from its replicas as they are:
        a resolved one is no longer listed."""
        ...
