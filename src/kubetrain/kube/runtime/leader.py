"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's rules and timings.

Only the leader reconciles. Candidates try to take the Lease every ``retry_period`` (jittered); a Lease is
taken when it is absent, released (empty holder), or not renewed for ``leaseDurationSeconds`` as measured on
*our* clock since we last saw it change (so clock skew between replicas cannot steal a live lease). The
leader renews every ``retry_period``; if it cannot renew within ``renew_deadline`` it stops leading at once,
before the Lease can expire and another replica start reconciling beside it. Writes carry the Lease's
resourceVersion, so of two candidates racing for it exactly one wins (the other gets 409 Conflict).
On shutdown ``release()`` empties the holder and shortens the duration to 1 s, so a successor takes over at
its next retry instead of after the full lease duration.

``holds_lease()`` is the fence the operator checks before each of its writes: true only until the renew
deadline after the *start* of the last successful acquire or renew. The start, not the answer: a renewal
whose answer arrives after the process was paused (SIGSTOP, a stalled VM, a long GC) was applied by the API
server before the pause, so counting from its answer would let a replica that slept through its lease
believe it had just renewed. No other replica can take the Lease until ``lease_duration`` after it last saw
it change, which is after that start; so a write sent before the renew deadline lands with
``lease_duration - renew_deadline`` (5 s) to spare, and one checked after a pause is not sent.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from kubetrain.kube.runtime.client import raise_for_status
from kubetrain.kube.runtime.clock import Clock, LoopClock, within
from kubetrain.kube.runtime.http import HttpApi, HttpResponse

log = logging.getLogger(__name__)

MICRO_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
JITTER_FACTOR = 1.2


class LeaseConflictError(Exception):
    """Another writer changed (or created) the Lease first: 409 Conflict."""


@dataclass(frozen=True)
class LeaseRecord:
    holder: str
    """``spec.holderIdentity``; empty when released."""
    lease_duration_seconds: int
    acquire_time: datetime | None
    renew_time: datetime | None
    transitions: int
    resource_version: str | None = None


class LeaseLock(Protocol):
    async def get(self) -> LeaseRecord | None:
        """The Lease, or None when it does not exist."""
        ...

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        """Raises LeaseConflictError when it already exists."""
        ...

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        """Replace it if still at ``record.resource_version``; raises LeaseConflictError otherwise."""
        ...


@dataclass(frozen=True)
class ElectionSettings:
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("lease duration must be longer than the renew deadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError(f"renew deadline must be longer than {JITTER_FACTOR} x the retry period")


def default_identity() -> str:
    """``<hostname>_<uuid>``, unique per process (client-go's convention)."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def utc_now() -> datetime:
    return datetime.now(UTC)


class LeaderElector:
    def __init__(
        self,
        lock: LeaseLock,
        identity: str,
        *,
        settings: ElectionSettings | None = None,
        on_started_leading: Callable[[], None] = lambda: None,
        on_stopped_leading: Callable[[], None] = lambda: None,
        on_new_leader: Callable[[str], None] = lambda identity: None,
        clock: Clock | None = None,
        wall_clock: Callable[[], datetime] = utc_now,
        rng: random.Random | None = None,
    ) -> None:
        if not identity:
            raise ValueError("the leader election identity must not be empty")
        self.identity = identity
        self.leading = asyncio.Event()
        """Set while this process holds the Lease."""
        self._lock = lock
        self._settings = settings or ElectionSettings()
        self._on_started_leading = on_started_leading
        self._on_stopped_leading = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._clock = clock or LoopClock()
        self._wall_clock = wall_clock
        self._rng = rng or random.Random()
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._reported_leader: str | None = None
        self._running = False
        self._valid_until = 0.0
        """Our monotonic clock's reading past which this process may no longer act as the leader."""

    @property
    def is_leader(self) -> bool:
        return self.leading.is_set()

    def holds_lease(self) -> bool:
        """Whether this process leads and its last renewal is recent enough to act on, now: the check before
        each write the leader makes. It can turn false before ``is_leader`` does (a process resumed after a
        pause has not run its renew loop yet), never later."""
        return self.leading.is_set() and self._clock.monotonic() < self._valid_until

    async def run(self) -> None:
        """Campaign until elected, lead until the Lease is lost, then return (the caller decides what next).

        Cancelling it (shutdown) stops leading; call ``release()`` afterwards to hand the Lease over fast."""
        self._running = True
        try:
            await self._acquire()
            self.leading.set()
            log.info("%s: became leader", self.identity)
            self._on_started_leading()
            await self._renew_until_lost()
        finally:
            self._running = False
            if self.leading.is_set():
                self.leading.clear()
                log.info("%s: stopped leading", self.identity)
                self._on_stopped_leading()

    async def release(self) -> bool:
        """Give the Lease up if we hold it (empty holder, 1 s duration); True when released.

        Only after ``run()`` has ended: while it runs, its next renewal would simply take the Lease back."""
        if self._running:
            raise RuntimeError("stop LeaderElector.run() (cancel it) before releasing the lease")
        try:
            current = await within(self._clock, self._settings.renew_deadline, self._lock.get())
            if current is None or current.holder != self.identity:
                return False
            now = self._wall_clock()
            released = replace(current, holder="", lease_duration_seconds=1, acquire_time=now, renew_time=now)
            written = await within(self._clock, self._settings.renew_deadline, self._lock.update(released))
            self._remember(written)
            return True
        except Exception as error:
            log.warning("%s: could not release the lease: %s", self.identity, error)
            return False

    async def _acquire(self) -> None:
        while True:
            started = self._clock.monotonic()
            if await self._try_acquire_or_renew():
                self._valid_until = started + self._settings.renew_deadline
                return
            await self._clock.sleep(self._jittered(self._settings.retry_period))

    async def _renew_until_lost(self) -> None:
        while True:
            await self._clock.sleep(self._settings.retry_period)
            started = self._clock.monotonic()
            remaining = self._valid_until - started
            try:
                renewed = remaining > 0 and await within(self._clock, remaining, self._try_acquire_or_renew())
            except TimeoutError:
                renewed = False
            if renewed:
                self._valid_until = started + self._settings.renew_deadline
            elif self._clock.monotonic() >= self._valid_until:
                log.warning("%s: lease not renewed within the deadline, stepping down", self.identity)
                return

    async def _try_acquire_or_renew(self) -> bool:
        try:
            return await self._attempt()
        except LeaseConflictError:
            return False
        except Exception as error:
            log.warning("%s: lease request failed: %s", self.identity, error)
            return False

    async def _attempt(self) -> bool:
        now = self._wall_clock()
        duration = round(self._settings.lease_duration)
        current = await self._lock.get()
        if current is None:
            created = LeaseRecord(self.identity, duration, now, now, transitions=0)
            self._remember(await self._lock.create(created))
            return True
        self._remember(current)
        if current.holder and current.holder != self.identity and not self._expired(current):
            return False
        if current.holder == self.identity:
            desired = replace(current, lease_duration_seconds=duration, renew_time=now)
        else:
            desired = replace(
                current,
                holder=self.identity,
                lease_duration_seconds=duration,
                acquire_time=now,
                renew_time=now,
                transitions=current.transitions + 1,
            )
        self._remember(await self._lock.update(desired))
        return True

    def _expired(self, record: LeaseRecord) -> bool:
        return self._clock.monotonic() >= self._observed_at + record.lease_duration_seconds

    def _remember(self, record: LeaseRecord) -> None:
        """Note when the Lease last changed, by our clock: expiry counts from there."""
        if self._observed is None or _content(self._observed) != _content(record):
            self._observed_at = self._clock.monotonic()
        self._observed = record
        if record.holder and record.holder != self._reported_leader:
            self._reported_leader = record.holder
            self._on_new_leader(record.holder)

    def _jittered(self, seconds: float) -> float:
        return seconds * self._rng.uniform(1.0, JITTER_FACTOR)


def _content(record: LeaseRecord) -> LeaseRecord:
    return replace(record, resource_version=None)


def format_micro_time(moment: datetime) -> str:
    """Kubernetes MicroTime: ``2006-01-02T15:04:05.000000Z``, always UTC."""
    return moment.astimezone(UTC).strftime(MICRO_TIME_FORMAT)


def parse_micro_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class ApiLeaseLock:
    """A Lease read and written through the API server as raw JSON."""

    def __init__(self, http: HttpApi, namespace: str, name: str) -> None:
        self._http = http
        self.namespace = namespace
        self.name = name
        self._collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"

    async def get(self) -> LeaseRecord | None:
        response = await self._http.get(f"{self._collection}/{self.name}")
        if response.status_code == 404:
            return None
        raise_for_status(response, response.content)
        return _record_from(response.json())

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        response = await self._http.post(self._collection, json=self._to_wire(record))
        return await self._written(response)

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        response = await self._http.put(f"{self._collection}/{self.name}", json=self._to_wire(record))
        return await self._written(response)

    async def _written(self, response: HttpResponse) -> LeaseRecord:
        if response.status_code == 409:
            raise LeaseConflictError(f"lease {self.namespace}/{self.name} changed meanwhile")
        raise_for_status(response, response.content)
        return _record_from(response.json())

    def _to_wire(self, record: LeaseRecord) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if record.resource_version:
            metadata["resourceVersion"] = record.resource_version
        spec: dict[str, Any] = {
            "holderIdentity": record.holder,
            "leaseDurationSeconds": record.lease_duration_seconds,
            "leaseTransitions": record.transitions,
        }
        if record.acquire_time is not None:
            spec["acquireTime"] = format_micro_time(record.acquire_time)
        if record.renew_time is not None:
            spec["renewTime"] = format_micro_time(record.renew_time)
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}


def _record_from(lease: dict[str, Any]) -> LeaseRecord:
    spec = lease.get("spec") or {}
    return LeaseRecord(
        holder=str(spec.get("holderIdentity") or ""),
        lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
        acquire_time=parse_micro_time(spec.get("acquireTime")),
        renew_time=parse_micro_time(spec.get("renewTime")),
        transitions=int(spec.get("leaseTransitions") or 0),
        resource_version=(lease.get("metadata") or {}).get("resourceVersion"),
    )
