"""Keeps a Store in step with the API server: list, then watch, and re-list when the watch can't be trusted.

client-go's reflector semantics, with the three safety nets every Python client lacks (ecosystem.md §1.2):

- the server closes each watch after ``timeoutSeconds`` (jittered, 5 to 10 min) and the reflector re-watches
  from the last resourceVersion it saw (bookmarks keep that fresh on quiet, filtered watches);
- 410 Gone (the version was compacted away), as an HTTP status or an ERROR event, makes it re-list and
  replace the cache atomically; objects that vanished meanwhile are reported as deleted;
- a watch that delivers nothing, not even a bookmark, for ``inactivity_timeout`` (3 min) is presumed dead
  and re-listed (the API server sends bookmarks about once a minute to watchers that allow them).

Transport errors back off (0.8 s doubling to 30 s, jittered) and then re-watch from the last version. The
third net, a periodic resync of every key, is the controller's (``resync_periodically``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import random
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kubetrain.kube.runtime import collector
from kubetrain.kube.runtime.clock import Clock, LoopClock
from kubetrain.kube.runtime.store import ChangeType, KubeObject, ObjectChange, Store

log = logging.getLogger(__name__)

ChangeHandler = Callable[[ObjectChange], None]


@dataclass(frozen=True)
class ListPage:
    items: list[dict[str, Any]]
    resource_version: str
    continue_token: str | None


@dataclass(frozen=True)
class WatchEvent:
    type: str
    """ADDED, MODIFIED, DELETED, BOOKMARK or ERROR (then ``object`` is a meta/v1 Status)."""
    object: dict[str, Any]


class ResourceExpiredError(Exception):
    """410 Gone: the resourceVersion (or continue token) asked for is older than the server keeps."""


class WatchEventError(Exception):
    """The watch stream sent an ERROR event other than 410."""


class ListWatch(Protocol):
    """Where a reflector reads one kind (already narrowed to a namespace and selectors) from."""

    async def list_page(self, *, limit: int, continue_token: str | None) -> ListPage: ...

    def watch(self, *, resource_version: str, timeout_seconds: int) -> AsyncGenerator[WatchEvent, None]:
        """Events after ``resource_version``, with bookmarks, until the server ends the stream.

        Raises ResourceExpiredError on HTTP 410."""
        ...


@dataclass(frozen=True)
class ReflectorSettings:
    page_size: int = 500
    watch_timeout_min: float = 300.0
    watch_timeout_max: float = 600.0
    inactivity_timeout: float = 180.0
    """Three bookmark intervals: kube-apiserver 1.34 sent bookmarks on a quiet filtered watch every ~60 s,
    but once the first came only after 121 s (measured on envtest)."""
    backoff_initial: float = 0.8
    backoff_max: float = 30.0


class InactiveWatchError(Exception):
    """Nothing arrived on the watch for longer than the inactivity timeout."""


def strip_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """Drop ``metadata.managedFields``, often the biggest part of an object and never read by a controller."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)
    return obj


class Reflector:
    def __init__(
        self,
        source: ListWatch,
        store: Store,
        *,
        name: str,
        settings: ReflectorSettings | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        transform: Callable[[dict[str, Any]], dict[str, Any]] = strip_managed_fields,
    ) -> None:
        self.name = name
        self.store = store
        self.has_synced = asyncio.Event()
        """Set once the first list has filled the store."""
        self.restarts: collections.Counter[str] = collections.Counter()
        """Watch restarts by reason: ``timeout`` (server closed), ``gone`` (410), ``inactive``, ``error``."""
        self.lists = 0
        self._source = source
        self._settings = settings or ReflectorSettings()
        self._clock = clock or LoopClock()
        self._rng = rng or random.Random()
        self._transform = transform
        self._handlers: list[ChangeHandler] = []
        self._last_activity = 0.0
        self._events_seen = 0
        self._version: str | None = None

    def add_handler(self, handler: ChangeHandler) -> None:
        """Call ``handler`` with every change to the store (including those a re-list finds)."""
        self._handlers.append(handler)

    async def run(self) -> None:
        """List and watch until cancelled."""
        backoff = _Backoff(self._settings, self._rng)
        self._version = None
        while True:
            try:
                if self._version is None:
                    await self._list()
                if await self._watch():
                    self.restarts["timeout"] += 1
                    backoff.reset()
                    continue
                # A stream that ends at once with nothing in it is a failing server, not a timeout.
                raise WatchEventError("watch closed immediately without events")
            except ResourceExpiredError:
                self.restarts["gone"] += 1
                log.info("%s: resourceVersion expired (410), re-listing", self.name)
                self._version = None
            except InactiveWatchError:
                self.restarts["inactive"] += 1
                log.warning("%s: watch silent too long, re-listing", self.name)
                self._version = None
            except Exception as error:  # transport or server trouble: back off, re-watch from the version
                self.restarts["error"] += 1
                delay = backoff.next()
                log.warning("%s: list/watch failed (%s), retrying in %.1fs", self.name, error, delay)
                await self._clock.sleep(delay)

    async def _list(self) -> None:
        objects: list[KubeObject] = []
        continue_token: str | None = None
        # Every page's objects are new JSON (no cycles), and the page is dropped once transformed: collecting
        # while they pile up would walk them for nothing (collector.paused says what that cost).
        with collector.paused():
            while True:
                page = await self._source.list_page(
                    limit=self._settings.page_size, continue_token=continue_token
                )
                objects.extend(self._transform(item) for item in page.items)
                continue_token = page.continue_token
                if not continue_token:
                    break
        self.lists += 1
        changes = self.store.replace(objects, page.resource_version)
        self._version = page.resource_version
        self.has_synced.set()
        for change in changes:
            self._emit(change)

    async def _watch(self) -> bool:
        """Watch from the current version until the server ends the stream (True) or ends it at once, empty
        and within a second (False); errors, 410 and inactivity raise."""
        assert self._version is not None
        timeout = self._rng.uniform(self._settings.watch_timeout_min, self._settings.watch_timeout_max)
        started = self._last_activity = self._clock.monotonic()
        self._events_seen = 0
        consumer = asyncio.ensure_future(self._consume(self._version, int(timeout)))
        watchdog = asyncio.ensure_future(self._watchdog())
        try:
            await asyncio.wait({consumer, watchdog}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (consumer, watchdog):
                task.cancel()
            await asyncio.gather(consumer, watchdog, return_exceptions=True)
        error = _failure(consumer) or _failure(watchdog)
        if error is not None:
            raise error
        return self._events_seen > 0 or self._clock.monotonic() - started >= 1.0

    async def _consume(self, version: str, timeout_seconds: int) -> None:
        events = self._source.watch(resource_version=version, timeout_seconds=timeout_seconds)
        async with contextlib.aclosing(events):
            async for event in events:
                self._last_activity = self._clock.monotonic()
                self._events_seen += 1
                if event.type == "ERROR":
                    _raise_for_error_event(event.object)
                event_version = _version_of(event.object)
                if event.type == "BOOKMARK":
                    if event_version:
                        self.store.resource_version = self._version = event_version
                    continue
                change = self.store.apply(ChangeType(event.type), self._transform(event.object))
                if event_version:
                    self._version = event_version
                if change is not None:
                    self._emit(change)

    async def _watchdog(self) -> None:
        limit = self._settings.inactivity_timeout
        while True:
            remaining = self._last_activity + limit - self._clock.monotonic()
            if remaining <= 0:
                raise InactiveWatchError
            await self._clock.sleep(remaining)

    def _emit(self, change: ObjectChange) -> None:
        for handler in self._handlers:
            try:
                handler(change)
            except Exception:
                # One broken handler must not stop the cache from following the cluster.
                log.exception("%s: change handler failed", self.name)


def _failure(task: asyncio.Future[None]) -> BaseException | None:
    if not task.done() or task.cancelled():
        return None
    return task.exception()


def _version_of(obj: Mapping[str, Any]) -> str | None:
    version = (obj.get("metadata") or {}).get("resourceVersion")
    return str(version) if version else None


def _raise_for_error_event(status: Mapping[str, Any]) -> None:
    if status.get("code") == 410:
        raise ResourceExpiredError(status.get("message", "410 Gone"))
    raise WatchEventError(f"watch ERROR event: {status.get('code')} {status.get('message', '')}".strip())


class _Backoff:
    def __init__(self, settings: ReflectorSettings, rng: random.Random) -> None:
        self._settings = settings
        self._rng = rng
        self._failures = 0

    def next(self) -> float:
        delay = min(self._settings.backoff_initial * 2 ** min(self._failures, 30), self._settings.backoff_max)
        self._failures += 1
        return float(delay * self._rng.uniform(1.0, 1.2))

    def reset(self) -> None:
        self._failures = 0


async def resync_periodically(
    interval: float, resync: Callable[[], Awaitable[None] | None], *, clock: Clock | None = None
) -> None:
    """Call ``resync`` (e.g. re-enqueue every job key) every ``interval`` seconds until cancelled.

    The level-triggered safety net: whatever events were lost, every object is looked at again."""
    clock = clock or LoopClock()
    while True:
        await clock.sleep(interval)
        try:
            result = resync()
            if result is not None:
                await result
        except Exception:
            log.exception("periodic resync failed")
