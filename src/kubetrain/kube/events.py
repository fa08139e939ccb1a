"""Kubernetes Events about jobs, sent in the background like client-go's recorder.

A reconcile never waits for its events: they are queued and a few sender tasks post them, stamped with
the time they were recorded. Senders hold back while the controllers are busy, so a burst of events never
delays the pods and status writes users wait on, but no event waits longer than ``MAX_HOLD_SECONDS``:
a controller that is never idle does not starve them. An event that cannot be posted is logged and
dropped (events are best-effort on every Kubernetes controller).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubetrain.kube.runtime.client import raise_for_status
from kubetrain.kube.runtime.http import HttpApi

log = logging.getLogger(__name__)

SENDERS = 4
MAX_QUEUED = 10_000
BUSY_POLL_SECONDS = 0.05
MAX_HOLD_SECONDS = 10.0


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


def event_manifest(record: EventRecord) -> dict[str, Any]:
    metadata = record.involved.get("metadata") or {}
    namespace = metadata.get("namespace") or "default"
    stamp = record.at.strftime("%Y-%m-%dT%H:%M:%SZ")
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


class EventRecorder:
    def __init__(self, http: HttpApi, busy: Callable[[], bool] = lambda: False) -> None:
        self._http = http
        self._busy = busy
        self._queue: asyncio.Queue[EventRecord] = asyncio.Queue(MAX_QUEUED)
        self._senders: list[asyncio.Task[None]] = []
        self._sending = 0
        self.sent = 0

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
            record = await self._queue.get()
            self._sending += 1
            while self._busy() and (datetime.now(UTC) - record.at).total_seconds() < MAX_HOLD_SECONDS:
                await asyncio.sleep(BUSY_POLL_SECONDS)
            try:
                manifest = event_manifest(record)
                path = f"/api/v1/namespaces/{manifest['metadata']['namespace']}/events"
                response = await self._http.post(path, json=manifest)
                raise_for_status(response, response.content)
                self.sent += 1
            except Exception as error:
                log.warning("could not post event %s: %s", record.reason, error)
            finally:
                self._sending -= 1
                self._queue.task_done()
