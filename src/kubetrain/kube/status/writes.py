"""Reports into ``status.trainerStatus``, coalesced: however many replicas report however often, each job's
status is written at most once per ``MIN_INTERVAL``, and all jobs together at most ``writes_per_second``.

Only the latest report per job is kept; one arriving before the previous was written replaces it (counted
as coalesced). A flusher writes the jobs that are due, oldest first, within the budget, so a 1,000-pod job
reporting every second costs the API server one write a second, and a thousand such jobs the budget.

Each write is a JSON patch of the status subresource that only adds ``trainerStatus``, after a ``test`` of
the job's UID: it never lands on a job re-created under the same name, and it never carries the other
status fields, so it cannot undo a reconcile. The reconciler's own status write is a full PUT guarded by
the resourceVersion it read; a report written in between makes that PUT fail with 409 and the reconcile is
done again from the fresher job, which carries the report through. Neither loses the other's fields.

Every operator replica writes what it receives (the Service spreads reports over all of them): making
followers forward to the leader would add a hop and a second failure mode for a write that is already
idempotent and self-correcting. Two replicas receiving reports for one job may each write one a second; a
report is skipped when the job's cached status already holds a newer one, so the status can only go back by
the few milliseconds two writes were apart, and the next report sets it right.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from kubetrain.api.progress import StatusTarget, TrainerStatus
from kubetrain.kube.runtime.http import HttpApi
from kubetrain.kube.runtime.store import KubeObject, Store
from kubetrain.kube.status.authenticator import job_uid_of
from kubetrain.progress.limits import RateLimiter
from kubetrain.progress.server import Reporter

log = logging.getLogger(__name__)

MIN_INTERVAL = 1.0
"""Seconds between two status writes of one job."""
TICK = 0.1
"""Seconds between the flusher's looks at what is due."""
CONCURRENT_WRITES = 8


@dataclass
class WriteCounts:
    accepted: int = 0
    coalesced: int = 0
    """Reports replaced by a later one before they were written."""
    written: int = 0
    skipped: int = 0
    """Reports not written: the job already held a newer one, is gone, or was re-created."""
    failed: int = 0
    """Writes the API server refused or did not answer (the report is tried again)."""
    by_result: dict[str, int] = field(default_factory=dict)


@dataclass
class _Pending:
    target: StatusTarget
    status: TrainerStatus
    job_uid: str


class StatusWriter:
    def __init__(
        self,
        http: HttpApi,
        jobs: Callable[[StatusTarget], Store | None],
        *,
        writes_per_second: float,
        min_interval: float = MIN_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._http = http
        self._jobs = jobs
        self._min_interval = min_interval
        self._clock = clock
        self._budget = RateLimiter(writes_per_second, max(1, round(writes_per_second)), clock=clock)
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        """Reports not yet written, by job path, oldest first."""
        self._written_at: dict[str, float] = {}
        self._in_flight: set[str] = set()
        self._slots = asyncio.Semaphore(CONCURRENT_WRITES)
        self._tasks: set[asyncio.Task[None]] = set()
        self.counts = WriteCounts()

    def __len__(self) -> int:
        """Jobs with a report waiting to be written."""
        return len(self._pending)

    def accept(self, target: StatusTarget, status: TrainerStatus, reporter: Reporter) -> None:
        job_uid = job_uid_of(reporter)
        self.counts.accepted += 1
        if target.path in self._pending:
            self.counts.coalesced += 1
        # A replaced report keeps its job's place in line: a job reporting often is not written later.
        self._pending[target.path] = _Pending(target, status, job_uid)

    async def run(self) -> None:
        """Flush what is due every ``TICK`` until cancelled (then the writes in flight finish)."""
        try:
            while True:
                self.flush_due()
                await asyncio.sleep(TICK)
        finally:
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def flush_due(self) -> int:
        """Start the writes that are due and within the budget; returns how many were started."""
        now = self._clock()
        started = 0
        for path in list(self._pending):
            if (
                path in self._in_flight
                or now - self._written_at.get(path, -self._min_interval) < self._min_interval
            ):
                continue
            if self._budget.allow("writes") is not None:
                break
            pending = self._pending.pop(path)
            self._in_flight.add(path)
            self._written_at[path] = now
            task = asyncio.ensure_future(self._write(pending))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            started += 1
        for path in [p for p, at in self._written_at.items() if now - at >= self._min_interval]:
            if path not in self._in_flight:
                del self._written_at[path]  # bounded: only jobs written within the last interval
        return started

    async def drain(self) -> None:
        """Wait for the writes in flight (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _write(self, pending: _Pending) -> None:
        path = pending.target.path
        try:
            async with self._slots:
                result = await self._patch(pending)
        except Exception as error:
            result = "failed"
            log.warning("status endpoint: writing %s's trainerStatus failed: %s", pending.target.key, error)
        finally:
            self._in_flight.discard(path)
        self.counts.by_result[result] = self.counts.by_result.get(result, 0) + 1
        if result == "written":
            self.counts.written += 1
        elif result in ("failed", "not_reconciled"):
            self.counts.failed += result == "failed"
            self._pending.setdefault(path, pending)  # a newer report, if one came, goes instead
        else:
            self.counts.skipped += 1

    async def _patch(self, pending: _Pending) -> str:
        target = pending.target
        jobs = self._jobs(target)
        job = jobs.get(target.key) if jobs is not None else None
        if job is None or _uid(job) != pending.job_uid:
            return "job_gone"
        status = job.get("status")
        if _newer_held(status, pending.status):
            return "older"
        if not isinstance(status, dict):
            # Not reconciled yet, as far as this cache knows: adding /status could replace a status the
            # cache has not seen. The report waits for the cache (a job's first reconcile writes status).
            return "not_reconciled"
        operations = [
            {"op": "test", "path": "/metadata/uid", "value": pending.job_uid},
            {"op": "add", "path": "/status/trainerStatus", "value": pending.status.to_wire()},
        ]
        response = await self._http.patch(
            target.path, json=operations, headers={"Content-Type": "application/json-patch+json"}
        )
        if response.status_code < 400:
            return "written"
        if response.status_code in (404, 422):
            # Gone, or the UID test failed: the job was deleted, or re-created under its name.
            return "job_gone"
        raise RuntimeError(f"{response.status_code}: {response.content[:200].decode(errors='replace')}")


def _uid(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _newer_held(status: object, report: TrainerStatus) -> bool:
    """Whether the job's status already holds a report received after ``report`` (another replica's)."""
    if not isinstance(status, dict) or report.last_updated_time is None:
        return False
    held = (status.get("trainerStatus") or {}).get("lastUpdatedTime")
    if not isinstance(held, str):
        return False
    with contextlib.suppress(ValueError):
        return datetime.fromisoformat(held) > report.last_updated_time
    return False
