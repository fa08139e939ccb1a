"""Test doubles: a clock tests advance by hand (no real sleeping) and an in-memory Lease."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from kubetrain.kube.runtime.leader import LeaseConflictError, LeaseRecord


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        wakeup: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((self.now + seconds, wakeup))
        await wakeup

    async def advance(self, seconds: float) -> None:
        """Move time forward and let every task woken by it run until it waits again."""
        self.now += seconds
        due = [wakeup for deadline, wakeup in self._sleepers if deadline <= self.now]
        self._sleepers = [(d, w) for d, w in self._sleepers if d > self.now and not w.done()]
        for wakeup in due:
            if not wakeup.done():
                wakeup.set_result(None)
        await settle()


async def settle(rounds: int = 50) -> None:
    """Give every ready task a chance to run (a handful of loop iterations)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


class MemoryLease:
    """One Lease with the API server's optimistic concurrency: a write must name the current version."""

    def __init__(self) -> None:
        self.record: LeaseRecord | None = None
        self.version = 0
        self.broken = False
        """When True every request fails, as if the API server were unreachable."""

    async def get(self) -> LeaseRecord | None:
        self._check()
        return self.record

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        self._check()
        if self.record is not None:
            raise LeaseConflictError("exists")
        return self._store(record)

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        self._check()
        if self.record is None or record.resource_version != self.record.resource_version:
            raise LeaseConflictError("changed")
        return self._store(record)

    def _check(self) -> None:
        if self.broken:
            raise ConnectionError("API server unreachable")

    def _store(self, record: LeaseRecord) -> LeaseRecord:
        self.version += 1
        self.record = replace(record, resource_version=str(self.version))
        return self.record
