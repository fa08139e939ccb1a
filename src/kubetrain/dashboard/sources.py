"""Where the jobs come from: one ``Source`` per backend (the cluster, the local runs), each holding one watch
for the whole server and fanning its changes out to every open page.

The watch runs on a thread (the backends are synchronous) and hands each event to the event loop, where the
source keeps the current jobs (wire form, restarts, the row the page shows) and puts the change on every
subscriber's queue. A subscriber that falls more than ``QUEUE_LIMIT`` changes behind is dropped rather than
buffered without bound; its page reconnects and starts from a fresh snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kubetrain.api.summary import NodeTally
from kubetrain.dashboard import views
from kubetrain.sdk.backends.base import JobWatchEvent, WatchEventType
from kubetrain.sdk.errors import TrainingApiError

if TYPE_CHECKING:
    from kubetrain.sdk.client import TrainingClient

log = logging.getLogger(__name__)

QUEUE_LIMIT = 5000
RETRY_SECONDS = 10.0
"""After the watch failed for good (403, say), how long before a fresh one is tried."""


@dataclass
class Entry:
    """One job as the server holds it."""

    id: str
    wire: Mapping[str, Any]
    restarts: int | None
    row: dict[str, Any]
    nodes: NodeTally | None = None
    """A TrainJob's training nodes, as the watch last told them."""


@dataclass(frozen=True)
class Change:
    """What a subscriber is told: a job's new row (``entry``), or that it went (``deleted``)."""

    entry: Entry
    deleted: bool = False


@dataclass(eq=False)  # each is its own: kept in sets by identity
class Subscription:
    queue: asyncio.Queue[Change | None] = field(default_factory=lambda: asyncio.Queue(QUEUE_LIMIT))
    dropped: bool = False
    """It fell too far behind: its stream ends and the page starts over."""


@dataclass(frozen=True)
class SourceState:
    name: str
    ready: bool
    """The watch has listed every job once (SYNCED)."""
    reachable: bool
    message: str
    """Why the source shows nothing or may be stale; empty when all is well."""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "ready": self.ready, "reachable": self.reachable, "message": self.message}


class Source:
    """One backend's jobs, watched once, for every page."""

    def __init__(
        self,
        name: str,
        client: TrainingClient,
        namespace: str | None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.name = name
        self.client = client
        self.namespace = namespace
        """The namespace watched; None for every namespace."""
        self.clock = clock
        self.entries: dict[str, Entry] = {}
        self.state = SourceState(name, ready=False, reachable=True, message="listing jobs")
        self._subscriptions: set[Subscription] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: Any = None
        self.synced = asyncio.Event()

    # --- the watch ----------------------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._thread = threading.Thread(target=self._run, name=f"dashboard-watch-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        watch = self._watch
        if watch is not None:
            watch.close()

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._watch = self.client.backend.watch(None, self.namespace)
            try:
                for event in self._watch:
                    if self._stopping.is_set():
                        return
                    self._hand_over(event)
                return
            except TrainingApiError as error:
                self._hand_over(JobWatchEvent(WatchEventType.UNAVAILABLE, message=str(error)))
            except Exception as error:  # the page says so; the server keeps serving the other source
                log.exception("the %s watch failed", self.name)
                self._hand_over(
                    JobWatchEvent(WatchEventType.UNAVAILABLE, message=f"{type(error).__name__}: {error}")
                )
            self._stopping.wait(RETRY_SECONDS)

    def _hand_over(self, event: JobWatchEvent) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: the server is stopping
                loop.call_soon_threadsafe(self.apply, event)

    # --- on the event loop --------------------------------------------------------------------

    def apply(self, event: JobWatchEvent) -> None:
        """Fold one watch event into the jobs held and tell every subscriber."""
        if event.type is WatchEventType.SYNCED:
            self.state = SourceState(self.name, ready=True, reachable=True, message="")
            self.synced.set()
            self._publish_state()
            return
        if event.type is WatchEventType.UNAVAILABLE:
            self.state = SourceState(self.name, self.state.ready, reachable=False, message=event.message)
            self._publish_state()
            return
        if event.job is None:
            return
        kind = views.kind_of_wire(event.job)
        if kind is None:
            return
        metadata = event.job.get("metadata") or {}
        identity = views.job_id(
            self.name, str(metadata.get("namespace") or "default"), kind, metadata.get("name", "")
        )
        if event.type is WatchEventType.DELETED:
            entry = self.entries.pop(identity, None)
            if entry is not None:
                self._publish(Change(entry, deleted=True))
            return
        if not self.state.reachable and self.state.ready:
            self.state = SourceState(self.name, ready=True, reachable=True, message="")
            self._publish_state()
        row = views.job_row(self.name, event.job, event.restarts, self.clock(), event.nodes)
        entry = Entry(identity, event.job, event.restarts, row, event.nodes)
        self.entries[identity] = entry
        self._publish(Change(entry))

    def subscribe_with(self, subscription: Subscription) -> None:
        """Put this source's changes on ``subscription`` too (a page's stream may follow several sources)."""
        self._subscriptions.add(subscription)

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscriptions.discard(subscription)

    def _publish(self, change: Change | None) -> None:
        for subscription in list(self._subscriptions):
            try:
                subscription.queue.put_nowait(change)
            except asyncio.QueueFull:
                subscription.dropped = True
                self._subscriptions.discard(subscription)

    def _publish_state(self) -> None:
        self._publish(None)  # None: the source's state changed; subscribers read ``state``
