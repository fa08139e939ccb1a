"""What both backends' watches share: the jobs a watch has told its consumer about, and the events that bring
the consumer from that to a fresh list (the initial list, and every re-list that heals a gap)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubetrain.api.summary import NodeTally
from kubetrain.sdk.backends.base import JobWatchEvent, WatchEventType

JobKey = tuple[str, str, str]
"""``(apiVersion/kind, namespace, name)``: one job, whatever backend holds it."""


def job_key(wire: Mapping[str, Any]) -> JobKey:
    metadata = wire.get("metadata") or {}
    return (
        f"{wire.get('apiVersion', '')}/{wire.get('kind', '')}",
        str(metadata.get("namespace") or "default"),
        str(metadata.get("name") or ""),
    )


@dataclass(frozen=True)
class Listed:
    """One job as a list or a change found it."""

    job: Mapping[str, Any]
    version: str
    """Changes whenever the job does (a resourceVersion; locally, the status file's size and time)."""
    restarts: int | None
    nodes: NodeTally | None = None
    """A TrainJob's training nodes (``JobWatchEvent.nodes``)."""


@dataclass(frozen=True)
class _Told:
    job: Mapping[str, Any]
    version: str
    restarts: int | None
    nodes: NodeTally | None = None


class WatchLedger:
    """The jobs as last yielded to the consumer: what a re-list is compared with."""

    def __init__(self) -> None:
        self._told: dict[JobKey, _Told] = {}

    def __len__(self) -> int:
        return len(self._told)

    def keys(self) -> list[JobKey]:
        return list(self._told)

    def restarts(self, key: JobKey) -> int | None:
        told = self._told.get(key)
        return None if told is None else told.restarts

    def resync(
        self, listed: Iterable[Listed], in_scope: Callable[[JobKey], bool] = lambda _: True
    ) -> list[JobWatchEvent]:
        """ADDED for jobs not yet told, MODIFIED for those whose version or restarts changed, DELETED for the
        jobs ``in_scope`` that the list no longer has (what a re-list of one kind covers)."""
        events: list[JobWatchEvent] = []
        found: set[JobKey] = set()
        for each in listed:
            key = job_key(each.job)
            found.add(key)
            event = self.change(each)
            if event is not None:
                events.append(event)
        for key in [k for k in self._told if k not in found and in_scope(k)]:
            events.append(self.delete(key))
        return events

    def change(self, listed: Listed) -> JobWatchEvent | None:
        """The event for a job found by a list or a watch; None when the consumer already has it."""
        key = job_key(listed.job)
        told = self._told.get(key)
        if told is not None and (told.version, told.restarts, told.nodes) == (
            listed.version,
            listed.restarts,
            listed.nodes,
        ):
            return None
        self._told[key] = _Told(listed.job, listed.version, listed.restarts, listed.nodes)
        kind = WatchEventType.ADDED if told is None else WatchEventType.MODIFIED
        return JobWatchEvent(kind, listed.job, listed.restarts, nodes=listed.nodes)

    def delete(self, key: JobKey, last_seen: Mapping[str, Any] | None = None) -> JobWatchEvent:
        told = self._told.pop(key, None)
        job = last_seen if last_seen is not None else (told.job if told is not None else {})
        if told is None:
            return JobWatchEvent(WatchEventType.DELETED, job)
        return JobWatchEvent(WatchEventType.DELETED, job, told.restarts, nodes=told.nodes)

    def knows(self, key: JobKey) -> bool:
        return key in self._told

    def with_restarts(self, key: JobKey, restarts: int | None) -> JobWatchEvent | None:
        """MODIFIED of a known job whose pods' restart count changed."""
        told = self._told.get(key)
        if told is None or told.restarts == restarts:
            return None
        return self.change(Listed(told.job, told.version, restarts, told.nodes))

    def with_pods(self, key: JobKey, restarts: int | None, nodes: NodeTally | None) -> JobWatchEvent | None:
        """MODIFIED of a known TrainJob whose pods' restarts or nodes changed."""
        told = self._told.get(key)
        if told is None or (told.restarts, told.nodes) == (restarts, nodes):
            return None
        return self.change(Listed(told.job, told.version, restarts, nodes))
