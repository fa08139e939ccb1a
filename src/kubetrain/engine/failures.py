"""The first failure, kept: which replica of a job failed first, and how, after its pods are gone.

Once ``cleanPodPolicy`` or a TTL removes a job's pods, their exit codes and last lines go with them (upstream
kubeflow/mpi-operator#354, #461, kubeflow/trainer#1749). So when a replica fails, the substrates keep a
``FailureRecord`` on the job: the replica that failed first (type, index, pod, node, container, exit code,
reason, time and last lines), and the latest failure of each replica that failed since, up to a bound. The
operator keeps it in a ConfigMap the job owns (``<job>-failure``: it survives ``cleanPodPolicy: All`` and an
operator restart, and is garbage-collected with the job); ``kubetrain run`` in its run record. ``kubetrain
describe`` shows it at the top, ``kubetrain logs`` prints the last lines of the replicas whose pods are gone,
the SDK returns it (``TrainingClient.get_job_failures``).

What this module decides, purely: which observed replicas have failed (a container that ended with a non-zero
exit code or was OOM-killed, or a pod that failed without one: evicted), which of them was first (by the time
its container ended; ties in the spec's order), what the record becomes (``record_failures``), which last
lines a substrate should read for it while the pods are still there (``lines_wanted``) and how they are
bounded (``with_lines``), and the Warning event that announces the first failure.

Bounds, per job (docs/operations.md "The first failure, kept"): ``MAX_REPLICAS`` replicas (the first to fail
and the next ones, in the order they first failed: a 5,000-worker job failing at once writes eight entries,
and the count of the others), each with at most ``MAX_LINES`` last lines and ``MAX_LINE_BYTES`` bytes of
them, so a record stays under about 40 KiB. A replica already kept that fails again has its entry replaced by
the newer failure (its latest); the first failure never changes. Once the job has finished, replicas that fail
afterwards (peers of a failed master, left running by ``cleanPodPolicy: None``) are not added.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.types import EmitEvent, EventType, ObservedContainer, ObservedReplica, Phase
from kubetrain.frameworks.base import Framework

FIRST_FAILURE = "FirstFailure"
"""The reason of the Warning event that announces a job's first failure."""

MAX_REPLICAS = 8
"""Replicas a record keeps (the first to fail included)."""
MAX_LINES = 50
"""Last lines kept of each failure."""
MAX_LINE_BYTES = 4096
"""Bytes of last lines kept of each failure (UTF-8): 80 lines of 50 characters, or a stack trace's end."""
MESSAGE_CHARACTERS = 300
"""A pod's or a controller's message about a failure is cut past this."""
QUOTED_LINES = 5
"""Last lines the event quotes (each cut to ``QUOTED_LINE_CHARACTERS``), as a ``CrashLoop`` finding does."""
QUOTED_LINE_CHARACTERS = 200
OOM_REASON = "OOMKilled"


@dataclass(frozen=True)
class ReplicaFailure:
    """One failure of one replica."""

    replica_type: str
    index: int
    pod: str
    """The pod's name (``<job>-<type>-<i>``; locally the name it would have)."""
    at: datetime
    """When it failed: its container's ``finishedAt``, else when it was first seen failed."""
    container: str | None = None
    """The container that ended; None for a pod that failed without one ending (evicted)."""
    exit_code: int | None = None
    reason: str | None = None
    """``Error``, ``OOMKilled``, ``Evicted``, ``DeadlineExceeded``, a controller's reason."""
    message: str | None = None
    """The pod's or its controller's message about it, cut to ``MESSAGE_CHARACTERS``."""
    node: str | None = None
    restart_count: int = 0
    """Restarts of that container before this run ended: which run of it failed."""
    lines: str | None = None
    """The last lines it wrote (``MAX_LINES`` lines and ``MAX_LINE_BYTES`` at most); None until read."""
    timed: bool = True
    """``at`` is the container's own end time, not only when the failure was seen."""

    @property
    def replica(self) -> str:
        """``master-0``: what ``kubetrain logs --replica`` calls it."""
        return f"{self.replica_type.lower()}-{self.index}"

    def same_run(self, other: ReplicaFailure) -> bool:
        """Whether ``other`` is this very failure (seen again), not a later one of the same replica."""
        if (self.replica_type, self.index, self.container, self.restart_count) != (
            other.replica_type,
            other.index,
            other.container,
            other.restart_count,
        ):
            return False
        if self.timed and other.timed:
            return self.at == other.at
        return (self.exit_code, self.reason) == (other.exit_code, other.reason)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "replicaType": self.replica_type,
            "index": self.index,
            "pod": self.pod,
            "at": _wire_time(self.at),
            "restartCount": self.restart_count,
        }
        optional = {
            "container": self.container,
            "exitCode": self.exit_code,
            "reason": self.reason,
            "message": self.message,
            "node": self.node,
            "lines": self.lines,
        }
        data.update({key: value for key, value in optional.items() if value is not None})
        if not self.timed:
            data["timed"] = False
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReplicaFailure:
        exit_code = data.get("exitCode")
        return cls(
            replica_type=str(data["replicaType"]),
            index=int(data["index"]),
            pod=str(data["pod"]),
            at=datetime.fromisoformat(str(data["at"]).replace("Z", "+00:00")),
            container=_text(data.get("container")),
            exit_code=None if exit_code is None else int(exit_code),
            reason=_text(data.get("reason")),
            message=_text(data.get("message")),
            node=_text(data.get("node")),
            restart_count=int(data.get("restartCount") or 0),
            lines=_text(data.get("lines")),
            timed=bool(data.get("timed", True)),
        )


@dataclass(frozen=True)
class FailureRecord:
    """What a job keeps of its failures."""

    first: ReplicaFailure
    """The replica that failed first, as it failed then."""
    latest: tuple[ReplicaFailure, ...]
    """The latest failure of each replica kept (the first one's included), in the order they first failed."""
    others: int = 0
    """Replicas seen failed that are not kept (past ``MAX_REPLICAS``)."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"first": self.first.to_json(), "latest": [f.to_json() for f in self.latest]}
        if self.others:
            data["others"] = self.others
        return data

    @classmethod
    def from_json(cls, data: object) -> FailureRecord | None:
        """The record ``data`` holds; None when it holds none or cannot be read (another version's)."""
        if not isinstance(data, Mapping) or not isinstance(data.get("first"), Mapping):
            return None
        try:
            return cls(
                first=ReplicaFailure.from_json(data["first"]),
                latest=tuple(ReplicaFailure.from_json(f) for f in data.get("latest") or ()),
                others=int(data.get("others") or 0),
            )
        except (KeyError, TypeError, ValueError):
            return None

    def failures(self) -> tuple[ReplicaFailure, ...]:
        """The first failure, then each kept replica's latest (the first replica's too when it failed again):
        what ``kubetrain logs`` prints of replicas whose pods are gone."""
        return (self.first, *(f for f in self.latest if not f.same_run(self.first)))


# --- what failed ------------------------------------------------------------------------------------------


def observed_failures(
    job: TrainingJob, framework: Framework[Any], replicas: Iterable[ObservedReplica], now: datetime
) -> list[ReplicaFailure]:
    """The latest failure each replica shows now, earliest first (ties in the spec's order of types, then by
    index). A replica being deleted is left out: its containers end because the job or the engine stops it."""
    order = {replica_type: position for position, replica_type in enumerate(job.replica_specs)}
    found = []
    for replica in replicas:
        if replica.steady or replica.terminating:  # a steady one has no container that ended
            continue
        failure = _failure_of(job, framework, replica, now)
        if failure is not None:
            found.append(failure)

    def position(failure: ReplicaFailure) -> tuple[datetime, int, str, int]:
        return (failure.at, order.get(failure.replica_type, len(order)), failure.replica_type, failure.index)

    return sorted(found, key=position)


def _failure_of(
    job: TrainingJob, framework: Framework[Any], replica: ObservedReplica, now: datetime
) -> ReplicaFailure | None:
    if replica.phase is not Phase.FAILED and not any(map(_failed, replica.containers)):
        return None  # the common case, on every reconcile of a big job: nothing to name
    ended = [c for c in replica.containers if _failed(c)]
    pod = framework.pod_name(job, replica.replica_type, replica.index)
    if ended:
        container = max(ended, key=lambda c: (c.last_finished_at is not None, c.last_finished_at or now))
        return ReplicaFailure(
            replica_type=replica.replica_type,
            index=replica.index,
            pod=pod,
            at=container.last_finished_at or now,
            container=container.name,
            exit_code=container.last_exit_code,
            reason=container.last_reason,
            message=_cut(replica.message),
            node=replica.node,
            restart_count=_restarts_before(container),
            lines=kept_lines(container.last_lines or container.last_message or ""),
            timed=container.last_finished_at is not None,
        )
    return ReplicaFailure(
        replica_type=replica.replica_type,
        index=replica.index,
        pod=pod,
        at=now,
        exit_code=replica.exit_code,
        reason=replica.reason or "Failed",
        message=_cut(replica.message),
        node=replica.node,
        restart_count=replica.restart_count,
        timed=False,
    )


def _failed(container: ObservedContainer) -> bool:
    return container.last_exit_code not in (None, 0) or container.last_reason == OOM_REASON


def _restarts_before(container: ObservedContainer) -> int:
    """Which run of the container ended: its restart count then. A container that runs or waits again after it
    has been restarted once more since (its ``lastState`` is the ended run)."""
    again = container.running_since is not None or container.waiting_reason is not None
    return max(container.restart_count - 1, 0) if again else container.restart_count


# --- the record -------------------------------------------------------------------------------------------


def record_failures(
    job: TrainingJob,
    framework: Framework[Any],
    replicas: Iterable[ObservedReplica],
    recorded: FailureRecord | None,
    now: datetime,
) -> FailureRecord | None:
    """What the job's record should be now: ``recorded`` itself when nothing new failed (so a substrate writes
    only on change), None while nothing ever did. ``job`` carries its status as stored before this reconcile:
    once it has finished, no new replica is added (an entry kept may still get its lines)."""
    failures = observed_failures(job, framework, replicas, now)
    if not failures:
        return recorded
    if recorded is None:
        first = failures[0]
        latest = failures[:MAX_REPLICAS]
        return FailureRecord(first, tuple(latest), len(failures) - len(latest))
    finished = job.status.is_finished
    latest = list(recorded.latest)
    first = recorded.first
    others = recorded.others
    unkept = 0
    for failure in failures:
        position = next((i for i, f in enumerate(latest) if f.replica == failure.replica), None)
        if position is not None:
            kept = latest[position]
            if kept.same_run(failure):
                if kept.lines is None and failure.lines is not None:
                    latest[position] = replace(kept, lines=failure.lines)
            elif not finished:
                latest[position] = failure
        elif finished:
            continue
        elif len(latest) < MAX_REPLICAS:
            latest.append(failure)
        else:
            unkept += 1
        if first.same_run(failure) and first.lines is None and failure.lines is not None:
            first = replace(first, lines=failure.lines)
    updated = FailureRecord(first, tuple(latest), max(others, unkept))
    return recorded if updated == recorded else updated


@dataclass(frozen=True)
class LinesWanted:
    """A failure whose last lines the record lacks while its container's log can still be read."""

    failure: ReplicaFailure
    previous: bool
    """The failed run is the container's previous one (it runs or waits again): read its previous log."""


def lines_wanted(record: FailureRecord | None, replicas: Iterable[ObservedReplica]) -> list[LinesWanted]:
    """The record's failures without last lines whose container is still observed in that run (at most
    ``MAX_REPLICAS`` + 1): what the kube substrate reads through ``pods/log`` before it deletes anything."""
    if record is None:
        return []
    missing = [f for f in (record.first, *record.latest) if f.lines is None and f.container is not None]
    if not missing:
        return []
    by_key = {(r.replica_type, r.index): r for r in replicas if not r.terminating}
    wanted: list[LinesWanted] = []
    for failure in missing:
        replica = by_key.get((failure.replica_type, failure.index))
        container = (
            next((c for c in replica.containers if c.name == failure.container), None) if replica else None
        )
        if (
            container is None
            or not _failed(container)
            or _restarts_before(container) != failure.restart_count
        ):
            continue  # gone, or failed again since: that run's log is no longer the one to read
        entry = LinesWanted(
            failure, container.running_since is not None or container.waiting_reason is not None
        )
        if entry not in wanted:
            wanted.append(entry)
    return wanted


def with_lines(record: FailureRecord, lines: Mapping[ReplicaFailure, str]) -> FailureRecord:
    """``record`` with the last lines read for some of its failures (cut to the bounds)."""
    if not lines:
        return record

    def filled(failure: ReplicaFailure) -> ReplicaFailure:
        text = next((t for f, t in lines.items() if f.same_run(failure)), None)
        if failure.lines is not None or text is None:
            return failure
        return replace(failure, lines=kept_lines(text))

    return replace(record, first=filled(record.first), latest=tuple(filled(f) for f in record.latest))


def kept_lines(text: str) -> str | None:
    """The end of ``text`` within the bounds: its last ``MAX_LINES`` lines, and of them no more than
    ``MAX_LINE_BYTES`` bytes, whole lines first (a single longer line keeps its end). None when blank."""
    lines = text.rstrip("\n").split("\n")[-MAX_LINES:]
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        encoded = line.encode("utf-8")
        if size + len(encoded) + 1 > MAX_LINE_BYTES:
            if not kept:
                kept.append(encoded[-(MAX_LINE_BYTES - 1) :].decode("utf-8", errors="ignore"))
            break
        kept.append(line)
        size += len(encoded) + 1
    result = "\n".join(reversed(kept))
    return result if result.strip() else None


# --- words ------------------------------------------------------------------------------------------------


def describe_failure(failure: ReplicaFailure) -> str:
    """``container pytorch exited with code 1 (Error)``, ``evicted (Evicted: the node was low on memory)``."""
    if failure.container is not None:
        said = f"container {failure.container} "
        said += "was killed" if failure.exit_code is None else f"exited with code {failure.exit_code}"
    else:
        said = "failed" if failure.exit_code is None else f"failed with exit code {failure.exit_code}"
    details = ": ".join(part for part in (failure.reason, failure.message) if part)
    return f"{said} ({details})" if details else said


def first_failure_event(job: TrainingJob, record: FailureRecord) -> EmitEvent:
    """The Warning event that announces the job's first failure: the replica, its pod and node, how it ended,
    its last lines (the last few, each cut)."""
    first = record.first
    where = f"pod {first.pod}" + (f" on node {first.node}" if first.node else "")
    quoted = _quoted(first.lines)
    tail = f'; its last lines: "{quoted}"' if quoted else ""
    return EmitEvent(
        EventType.WARNING,
        FIRST_FAILURE,
        f"{job.KIND} {job.name}: replica {first.replica_type} {first.index} failed first ({where}): "
        f"{describe_failure(first)}{tail}. kubetrain describe shows it after the pods are gone",
    )


def _quoted(lines: str | None) -> str:
    shown = [line.strip() for line in (lines or "").splitlines() if line.strip()][-QUOTED_LINES:]
    return " | ".join(_cut(line, QUOTED_LINE_CHARACTERS) or "" for line in shown)


def _cut(text: str | None, limit: int = MESSAGE_CHARACTERS) -> str | None:
    if not text:
        return None
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _wire_time(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")
