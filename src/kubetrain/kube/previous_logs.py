"""The last lines a crash-looping container's previous run wrote, read through the API for its diagnosis.

A container's ``terminated.message`` is empty unless it wrote a termination message, and the operator does not
change the pods it creates to make one. So for a container a ``CrashLoop`` finding quotes
(``engine.diagnosis.quoted_crash_loops``: at most one per replica type) the operator reads the tail of its
previous run's log (``GET pods/<name>/log?previous=true&tailLines=N``, RBAC ``pods/log get``) in the
background, once per (pod, container, restart): the reconcile never waits for it, and the job is reconciled
again when the lines are in. What was read, or that nothing could be, is remembered in a bounded cache, so a
container that keeps crashing costs one read per restart and a log that cannot be read (its node is gone) is
not asked for again until the next restart.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from kubetrain.kube.runtime.http import HttpApi

log = logging.getLogger(__name__)

TAIL_LINES = 20
"""Lines asked for: the diagnosis quotes the last five that are not blank."""
LIMIT_BYTES = 8192
"""At most this much of a log is read (a line may be megabytes long)."""
KEPT_CHARACTERS = 2048
"""What is kept of each tail, from its end."""
REMEMBERED = 1024
"""Tails remembered, least recently used forgotten first: about 2 MiB at most."""
CONCURRENT_READS = 2
MAX_PENDING_READS = 256
"""Reads queued or running at once; more are left for a later reconcile."""

LogKey = tuple[str, str, str, str, int]
"""``(namespace, pod name, pod uid, container, restart count)``."""


class PreviousLogs:
    def __init__(
        self,
        http: HttpApi,
        *,
        capacity: int = REMEMBERED,
        concurrency: int = CONCURRENT_READS,
        max_pending: int = MAX_PENDING_READS,
    ) -> None:
        self._http = http
        self._capacity = capacity
        self._max_pending = max_pending
        self._tails: OrderedDict[LogKey, str] = OrderedDict()
        self._pending: dict[LogKey, asyncio.Task[None]] = {}
        self._slots = asyncio.Semaphore(concurrency)
        self.reads = 0
        """Log reads sent."""

    @staticmethod
    def key(pod: Mapping[str, Any], container: str, restart_count: int) -> LogKey:
        metadata = pod.get("metadata") or {}
        return (
            str(metadata.get("namespace") or ""),
            str(metadata.get("name") or ""),
            str(metadata.get("uid") or ""),
            container,
            restart_count,
        )

    def tail(self, key: LogKey, on_read: Callable[[], None]) -> str | None:
        """The tail of the container's previous run, or None while it is being read (``on_read`` is called
        once it is in). An empty string: it could not be read."""
        if key in self._tails:
            self._tails.move_to_end(key)
            return self._tails[key]
        if key not in self._pending and len(self._pending) < self._max_pending:
            self._pending[key] = asyncio.create_task(self._read(key, on_read), name=f"previous log {key[1]}")
        return None

    def __len__(self) -> int:
        return len(self._tails)

    async def close(self) -> None:
        for task in self._pending.values():
            task.cancel()
        await asyncio.gather(*self._pending.values(), return_exceptions=True)
        self._pending.clear()

    async def _read(self, key: LogKey, on_read: Callable[[], None]) -> None:
        namespace, name, _, container, _ = key
        text = ""
        try:
            async with self._slots:
                self.reads += 1
                response = await self._http.get(
                    f"/api/v1/namespaces/{namespace}/pods/{name}/log",
                    params={
                        "container": container,
                        "previous": "true",
                        "tailLines": str(TAIL_LINES),
                        "limitBytes": str(LIMIT_BYTES),
                    },
                )
            if response.status_code == 200:
                text = response.content.decode("utf-8", errors="replace")[-KEPT_CHARACTERS:]
            else:
                log.debug(
                    "previous log of %s/%s %s: HTTP %s", namespace, name, container, response.status_code
                )
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the node may be gone: the finding goes out without the lines
            log.debug("previous log of %s/%s %s: %s", namespace, name, container, error)
        finally:
            self._pending.pop(key, None)
        self._remember(key, text)
        on_read()

    def _remember(self, key: LogKey, text: str) -> None:
        self._tails[key] = text
        self._tails.move_to_end(key)
        while len(self._tails) > self._capacity:
            self._tails.popitem(last=False)
