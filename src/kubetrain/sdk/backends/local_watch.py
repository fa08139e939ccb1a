"""The local backend's watch: the state directory, looked at every ``POLL`` seconds.

A run's ``status.json`` is replaced atomically on every change, so a changed size or modification time is a
changed job, and only those files are read again. A run whose runner died without finishing changes without
its file changing (it reads as Failed, ``LocalRunnerGone``), so unfinished runs' runners are checked on every
look too. One look at a directory of a few runs costs well under a millisecond; the poll is the watch's only
cost, and a server holds one watch for all its pages.

A run is deleted when its directory goes. Its ``status.json`` alone is missing for a moment whenever the run
is started again in its directory (suspend, resume and every other change of a local run stop it and start a
new runner, which clears the previous run's files before writing its own): the job has not gone, so it is
shown as it was until the new runner writes, for ``RESTART_GRACE`` seconds at most. Told as deleted, it made
every open page of it stop following it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubetrain.local.state import STATUS_FILE, RunDirectory, RunRecord
from kubetrain.sdk.backends.base import JobWatchEvent, WatchEventType
from kubetrain.sdk.backends.watching import Listed, WatchLedger
from kubetrain.sdk.kinds import JobKind

POLL = 0.2
RESTART_GRACE = 30.0
"""How long a run's directory without ``status.json`` is still the run as last seen: as long as the backend
waits for a new runner to write it (``local.RUNNER_START_TIMEOUT``)."""


@dataclass
class _Seen:
    stamp: tuple[int, int]
    """``status.json``'s (modification time in ns, size) when last read."""
    record: RunRecord
    stale: bool
    wire: dict[str, Any]
    version: int
    """Counts the changes of what the run shows: the runner rewrites its file unchanged every second."""
    missing_since: float | None = None
    """When its ``status.json`` was first found missing, the directory still there (a run starting again)."""


class LocalJobWatch:
    def __init__(
        self,
        state_dir: Path,
        kind: JobKind | None,
        poll: float = POLL,
        restart_grace: float = RESTART_GRACE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.state_dir = state_dir
        self.kind = kind
        self.poll = poll
        self.restart_grace = restart_grace
        self.clock = clock
        self._stop = threading.Event()
        self._seen: dict[str, _Seen] = {}
        self._versions = 0

    def close(self) -> None:
        self._stop.set()

    def __iter__(self) -> Iterator[JobWatchEvent]:
        ledger = WatchLedger()
        synced = False
        while not self._stop.is_set():
            yield from ledger.resync(self._look())
            if not synced:
                synced = True
                yield JobWatchEvent(WatchEventType.SYNCED)
            self._stop.wait(self.poll)

    def _look(self) -> list[Listed]:
        listed: list[Listed] = []
        present: set[str] = set()
        try:
            entries = list(os.scandir(self.state_dir))
        except FileNotFoundError:
            entries = []
        for entry in entries:
            if not entry.is_dir():
                continue
            seen = self._read(entry.name) or self._starting_again(entry.name)
            if seen is None:
                continue
            present.add(entry.name)
            wire = seen.wire
            if self.kind is not None and (wire.get("kind"), wire.get("apiVersion")) != (
                self.kind.kind,
                self.kind.api_version,
            ):
                continue
            listed.append(Listed(wire, str(seen.version), seen.record.restarts, seen.record.nodes))
        for gone in set(self._seen) - present:
            del self._seen[gone]
        return listed

    def _next_version(self) -> int:
        self._versions += 1
        return self._versions

    def _starting_again(self, name: str) -> _Seen | None:
        """The run as last seen, while its directory is there without a ``status.json`` (a new runner has
        cleared it and not yet written its own), for ``restart_grace`` seconds; None once that is over."""
        seen = self._seen.get(name)
        if seen is None:
            return None
        now = self.clock()
        if seen.missing_since is None:
            seen.missing_since = now
        return seen if now - seen.missing_since <= self.restart_grace else None

    def _read(self, name: str) -> _Seen | None:
        directory = RunDirectory(self.state_dir, name)
        try:
            stat = (directory.root / STATUS_FILE).stat()
        except FileNotFoundError:
            return None
        stamp = (stat.st_mtime_ns, stat.st_size)
        seen = self._seen.get(name)
        if seen is None or seen.stamp != stamp:
            try:
                record = directory.read()
            except (ValueError, KeyError):  # damaged, or written by another version: not a run to show
                return None
            if record is None:
                return None
            wire, stale = record.job_wire(), record.stale
            unchanged = seen is not None and (
                seen.wire,
                seen.stale,
                seen.record.restarts,
                seen.record.nodes,
            ) == (wire, stale, record.restarts, record.nodes)
            version = seen.version if seen is not None and unchanged else self._next_version()
            seen = _Seen(stamp, record, stale, wire, version)
            self._seen[name] = seen
        elif not seen.record.finished and seen.record.stale != seen.stale:
            seen = _Seen(stamp, seen.record, True, seen.record.job_wire(), self._next_version())
            self._seen[name] = seen
        return seen
