"""Kubernetes Events about jobs, sent in the background like client-go's recorder.

A reconcile never waits for its events: they are queued and a few sender tasks post them, stamped with
the time they were recorded. Senders hold back while the controllers are busy, so a burst of events never
delays the pods and status writes users wait on, but no event waits longer than ``MAX_HOLD_SECONDS``:
a controller that is never idle does not starve them. An event that cannot be posted is logged and
dropped (events are best-effort on every Kubernetes controller).

Similar events are combined as client-go's EventAggregator combines them: from the tenth distinct message
with the same reason about the same object within ``REPEAT_WINDOW_SECONDS``, the events go into one Event
whose message is the latest one prefixed with ``AGGREGATED_PREFIX``, as upstream's do (a 5,000-worker job
makes a dozen ``SuccessfulCreatePod`` Events, not 5,000 POSTs competing with its pods' writes).

Repeats are folded as client-go's EventCorrelator folds them: an event identical to one sent within
``REPEAT_WINDOW_SECONDS`` (same object, type, reason, message and component) PATCHes that Event's
``count`` and ``lastTimestamp`` instead of creating another. Upstream warns about an abnormal pod on
every reconcile; without this the API server would store one Event per reconcile. Like client-go's spam
filter, the repeats about one object have a budget of ``REPEAT_BURST`` PATCHes sent at once (so a few
repeats show as soon as they happen, as upstream's do), refilled by one every ``BUMP_INTERVAL_SECONDS``.
Past it an Event is PATCHed at most once per ``BUMP_INTERVAL_SECONDS``: repeats in between are counted
and go out together when the interval is over (client-go's filter drops them instead), so a thousand
pending pods warned about on every reconcile cost the API server a bounded number of requests, and the
counts stay exact.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from kubetrain.kube.runtime.client import ApiStatusError, raise_for_status
from kubetrain.kube.runtime.http import HttpApi, NotLeadingError

log = logging.getLogger(__name__)

SENDERS = 4
MAX_QUEUED = 10_000
BUSY_POLL_SECONDS = 0.05
MAX_HOLD_SECONDS = 10.0
REMEMBERED_EVENTS = 4096
"""How many distinct recent events are remembered for folding repeats (client-go's LRU size)."""
REPEAT_WINDOW_SECONDS = 600.0
"""A repeat within this long of the last sending bumps the existing Event (client-go's 10 minutes)."""
BUMP_INTERVAL_SECONDS = 15.0
"""The least time between two PATCHes of one Event, once its object's repeat budget is spent."""
REPEAT_BURST = 25
"""PATCHes of repeats about one object sent at once (client-go's spam filter's burst)."""
SIMILAR_BEFORE_COMBINING = 10
"""Distinct messages of one reason about one object before they are combined (client-go's maxEvents)."""
AGGREGATED_PREFIX = "(combined from similar events): "

EventKey = tuple[Any, ...]


@dataclass(frozen=True)
class EventRecord:
    involved: Mapping[str, Any]
    """The object the event is about (a job), as stored."""
    type: str
    reason: str
    message: str
    component: str
    """``source.component``: the controller name, as upstream."""
    at: datetime = field(default_factory=lambda: datetime.now(UTC))


def event_key(record: EventRecord) -> EventKey:
    """What makes two events the same Event (client-go's ``getEventKey``, less the unset fields)."""
    metadata = record.involved.get("metadata") or {}
    return (
        metadata.get("uid"),
        record.involved.get("kind"),
        metadata.get("namespace"),
        metadata.get("name"),
        record.type,
        record.reason,
        record.message,
        record.component,
    )


def similar_key(record: EventRecord) -> EventKey:
    """What makes events similar (client-go's ``EventAggregatorByReasonFunc``): all but the message."""
    return (*event_key(record)[:6], None, record.component)


class SimilarEvents:
    """Per object and reason, the distinct messages recently seen: once there are
    ``SIMILAR_BEFORE_COMBINING``, each further new message is combined into one Event."""

    def __init__(
        self, capacity: int = REMEMBERED_EVENTS, window_seconds: float = REPEAT_WINDOW_SECONDS
    ) -> None:
        self._capacity = capacity
        self._window = window_seconds
        self._seen: OrderedDict[EventKey, tuple[set[str], datetime]] = OrderedDict()

    def combine(self, record: EventRecord) -> tuple[EventRecord, EventKey]:
        """The record to send and the key of the Event it goes to: itself, or the combined one."""
        key = similar_key(record)
        messages, last_at = self._seen.pop(key, (set(), record.at))
        if (record.at - last_at).total_seconds() > self._window:
            messages = set()
        messages.add(record.message)
        self._seen[key] = (messages, max(last_at, record.at))
        while len(self._seen) > self._capacity:
            self._seen.popitem(last=False)
        if len(messages) < SIMILAR_BEFORE_COMBINING:
            return record, event_key(record)
        messages.pop()  # as client-go: the set never grows past the threshold
        return replace(record, message=AGGREGATED_PREFIX + record.message), key


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class SentEvent:
    """An Event the recorder created, and how often it was seen since."""

    namespace: str
    name: str
    count: int
    """As the API server has it."""
    last_at: datetime
    message: str
    """As the API server has it; a combined Event's changes with each message combined into it."""
    latest_message: str = ""
    """The message of the latest repeat, to report with the count."""
    unreported: int = 0
    """Repeats seen since the last PATCH, waiting for the bump interval to pass."""
    reported_at: float = 0.0
    """When the Event was last written (monotonic seconds)."""


class RepeatBudget:
    """Per involved object, how many repeats may still be PATCHed at once: ``burst``, plus one more every
    ``refill_seconds``; the least recently used objects are forgotten past ``capacity``."""

    def __init__(self, burst: int, refill_seconds: float, capacity: int = REMEMBERED_EVENTS) -> None:
        self._burst = burst
        self._refill = refill_seconds
        self._capacity = capacity
        self._objects: OrderedDict[Any, tuple[float, float]] = OrderedDict()
        """Object → (tokens, when they were counted, monotonic seconds)."""

    def take(self, involved: Any, now: float) -> bool:
        tokens, counted = self._objects.pop(involved, (float(self._burst), now))
        if self._refill > 0:
            tokens = min(float(self._burst), tokens + (now - counted) / self._refill)
        spent = tokens >= 1
        self._objects[involved] = (tokens - 1 if spent else tokens, now)
        while len(self._objects) > self._capacity:
            self._objects.popitem(last=False)
        return spent


class RecentEvents:
    """The last ``capacity`` distinct events sent, least recently seen forgotten first."""

    def __init__(
        self, capacity: int = REMEMBERED_EVENTS, window_seconds: float = REPEAT_WINDOW_SECONDS
    ) -> None:
        self._capacity = capacity
        self._window = window_seconds
        self._sent: OrderedDict[EventKey, SentEvent] = OrderedDict()

    def repeat_of(self, key: EventKey, at: datetime) -> SentEvent | None:
        """The Event a record at ``at`` repeats, if one was sent within the window (now seen last)."""
        sent = self._sent.get(key)
        if sent is None or (at - sent.last_at).total_seconds() > self._window:
            return None
        self._sent.move_to_end(key)
        return sent

    def get(self, key: EventKey) -> SentEvent | None:
        return self._sent.get(key)

    def remember(self, key: EventKey, sent: SentEvent) -> None:
        self._sent[key] = sent
        self._sent.move_to_end(key)
        while len(self._sent) > self._capacity:
            self._sent.popitem(last=False)

    def __len__(self) -> int:
        return len(self._sent)


def event_manifest(record: EventRecord) -> dict[str, Any]:
    metadata = record.involved.get("metadata") or {}
    namespace = metadata.get("namespace") or "default"
    stamp = _stamp(record.at)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        # client-go names events <object>.<unix nanoseconds in hex>.
        "metadata": {"name": f"{metadata.get('name')}.{time.time_ns():x}", "namespace": namespace},
        "involvedObject": {
            "apiVersion": record.involved.get("apiVersion"),
            "kind": record.involved.get("kind"),
            "name": metadata.get("name"),
            "namespace": namespace,
            "uid": metadata.get("uid"),
            "resourceVersion": metadata.get("resourceVersion"),
        },
        "reason": record.reason,
        "message": record.message,
        "type": record.type,
        "source": {"component": record.component},
        "reportingComponent": record.component,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


@dataclass(frozen=True)
class _Flush:
    """Time to report the repeats an Event collected during its bump interval."""

    key: EventKey


class EventRecorder:
    def __init__(
        self,
        http: HttpApi,
        busy: Callable[[], bool] = lambda: False,
        *,
        bump_interval: float = BUMP_INTERVAL_SECONDS,
        repeat_burst: int = REPEAT_BURST,
    ) -> None:
        self._http = http
        self._busy = busy
        self._bump_interval = bump_interval
        self._budget = RepeatBudget(repeat_burst, bump_interval)
        self._queue: asyncio.Queue[EventRecord | _Flush] = asyncio.Queue(MAX_QUEUED)
        self._senders: list[asyncio.Task[None]] = []
        self._sending = 0
        self._recent = RecentEvents()
        self._similar = SimilarEvents()
        # Sends of the same event are serialised (so a repeat never races the Event it bumps, and
        # counts arrive in order); sends of different events share SENDERS locks by key hash.
        self._key_locks = [asyncio.Lock() for _ in range(SENDERS)]
        self.sent = 0
        """Events delivered: created, or folded into an existing Event."""
        self.folded = 0
        """Of those, repeats that bumped an existing Event's count."""

    def record(self, record: EventRecord) -> None:
        try:
            self._queue.put_nowait(record)
        except asyncio.QueueFull:
            log.warning("event queue full, dropping event %s: %s", record.reason, record.message)

    @property
    def queued(self) -> int:
        """Recorded and not yet posted (or dropped)."""
        return self._queue.qsize() + self._sending

    def start(self) -> None:
        self._senders = [asyncio.create_task(self._send_forever()) for _ in range(SENDERS)]

    async def flush(self, timeout: float = 5.0) -> None:
        """Wait (a bounded time) until every queued event was sent; used on shutdown."""
        try:
            await asyncio.wait_for(self._queue.join(), timeout)
        except TimeoutError:
            log.warning("shutting down with %d events unsent", self._queue.qsize())

    async def stop(self) -> None:
        for sender in self._senders:
            sender.cancel()
        await asyncio.gather(*self._senders, return_exceptions=True)

    async def _send_forever(self) -> None:
        while True:
            item = await self._queue.get()
            self._sending += 1
            try:
                if isinstance(item, _Flush):
                    async with self._key_locks[hash(item.key) % SENDERS]:
                        await self._flush_repeats(item.key)
                else:
                    await self._deliver(item)
            except ApiStatusError as error:
                if error.namespace_terminating:
                    log.debug("event dropped, its namespace is being deleted: %s", error)
                else:
                    log.warning("could not post event: %s", error)
            except NotLeadingError as error:
                # The Lease was lost: what is still queued is the old leader's to drop, not to post.
                log.debug("event dropped: %s", error)
            except Exception as error:
                log.warning("could not post event: %s", error)
            finally:
                self._sending -= 1
                self._queue.task_done()

    async def _deliver(self, record: EventRecord) -> None:
        while self._busy() and (datetime.now(UTC) - record.at).total_seconds() < MAX_HOLD_SECONDS:
            await asyncio.sleep(BUSY_POLL_SECONDS)
        record, key = self._similar.combine(record)
        async with self._key_locks[hash(key) % SENDERS]:
            await self._send(key, record)
        self.sent += 1

    async def _send(self, key: EventKey, record: EventRecord) -> None:
        repeated = self._recent.repeat_of(key, record.at)
        if repeated is not None:
            # A record held back longer than a later repeat must not move lastTimestamp back.
            if record.at >= repeated.last_at:
                repeated.last_at, repeated.latest_message = record.at, record.message
            repeated.unreported += 1
            now = time.monotonic()
            wait = repeated.reported_at + self._bump_interval - now
            if repeated.unreported > 1:
                self.folded += 1  # a flush is already due; this repeat goes out with it
                return
            if wait > 0 and not self._budget.take(key[0], now):
                self.folded += 1
                asyncio.get_running_loop().call_later(wait, self._queue_flush, key)
                return
            if await self._bump(repeated):
                self.folded += 1
                return
        manifest = event_manifest(record)
        namespace = manifest["metadata"]["namespace"]
        response = await self._http.post(f"/api/v1/namespaces/{namespace}/events", json=manifest)
        raise_for_status(response, response.content)
        name = manifest["metadata"]["name"]
        sent = SentEvent(namespace, name, 1, record.at, record.message, reported_at=time.monotonic())
        self._recent.remember(key, sent)

    def _queue_flush(self, key: EventKey) -> None:
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(_Flush(key))

    async def _flush_repeats(self, key: EventKey) -> None:
        sent = self._recent.get(key)
        if sent is not None and sent.unreported:
            await self._bump(sent)

    async def _bump(self, sent: SentEvent) -> bool:
        """Report the unreported repeats on the Event; False when it is gone (expired), so a new one is
        made."""
        count = sent.count + sent.unreported
        patch: dict[str, Any] = {"count": count, "lastTimestamp": _stamp(sent.last_at)}
        message = sent.latest_message or sent.message
        if message != sent.message:
            patch["message"] = message
        response = await self._http.patch(
            f"/api/v1/namespaces/{sent.namespace}/events/{sent.name}",
            json=patch,
            headers={"Content-Type": "application/merge-patch+json"},
        )
        sent.unreported = 0
        if response.status_code == 404:
            return False
        raise_for_status(response, response.content)
        sent.count, sent.message, sent.reported_at = count, message, time.monotonic()
        return True
