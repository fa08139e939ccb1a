"""Only the leader works: work starts on election, stops at once on loss, and shutdown releases the Lease."""

from __future__ import annotations

import asyncio
import os
import random
import signal
from datetime import UTC, datetime, timedelta

import pytest

from kubetrain.kube.runtime.leader import LeaderElector, LeaseRecord
from kubetrain.kube.runtime.lifecycle import Outcome, run_while_leading, termination_event

from .fakes import FakeClock, MemoryLease, settle

EPOCH = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class Work:
    """Controller work that records when it starts and when it is cancelled."""

    def __init__(self, log: list[str], *, fail: bool = False) -> None:
        self.log = log
        self.fail = fail

    async def __call__(self) -> None:
        self.log.append("work started")
        try:
            if self.fail:
                raise RuntimeError("reconciler crashed")
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.log.append("work cancelled")
            raise


class LoggedLease(MemoryLease):
    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        written = await super().update(record)
        if not record.holder:
            self.log.append("lease released")
        return written


def elector(lease: MemoryLease, clock: FakeClock, identity: str = "me") -> LeaderElector:
    return LeaderElector(
        lease,
        identity,
        clock=clock,
        wall_clock=lambda: EPOCH + timedelta(seconds=clock.now),
        rng=random.Random(0),
    )


async def elapse(clock: FakeClock, seconds: float, step: float = 0.5) -> None:
    for _ in range(round(seconds / step)):
        await clock.advance(step)


async def test_work_waits_until_the_lease_is_won() -> None:
    log: list[str] = []
    lease, clock = MemoryLease(), FakeClock()
    lease.record = LeaseRecord("someone-else", 15, EPOCH, EPOCH, transitions=0, resource_version="1")
    running = asyncio.ensure_future(run_while_leading(elector(lease, clock), Work(log), asyncio.Event()))
    await elapse(clock, 14)
    assert log == []
    await elapse(clock, 4)
    assert log == ["work started"]
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)


async def test_losing_the_lease_cancels_the_work() -> None:
    log: list[str] = []
    lease, clock = MemoryLease(), FakeClock()
    running = asyncio.ensure_future(run_while_leading(elector(lease, clock), Work(log), asyncio.Event()))
    await settle()
    lease.broken = True
    await elapse(clock, 10.5)
    assert log == ["work started", "work cancelled"]
    assert await running is Outcome.LOST_LEADERSHIP


async def test_stopping_cancels_the_work_before_releasing_the_lease() -> None:
    log: list[str] = []
    lease, clock, stop = LoggedLease(log), FakeClock(), asyncio.Event()
    running = asyncio.ensure_future(run_while_leading(elector(lease, clock), Work(log), stop))
    await settle()
    stop.set()
    assert await running is Outcome.STOPPED
    assert log == ["work started", "work cancelled", "lease released"]


async def test_stopping_before_election_starts_no_work() -> None:
    log: list[str] = []
    lease, clock, stop = MemoryLease(), FakeClock(), asyncio.Event()
    lease.record = LeaseRecord("someone-else", 15, EPOCH, EPOCH, transitions=0, resource_version="1")
    running = asyncio.ensure_future(run_while_leading(elector(lease, clock), Work(log), stop))
    await settle()
    stop.set()
    assert await running is Outcome.STOPPED
    assert log == []
    assert lease.record.holder == "someone-else"


async def test_failing_work_releases_the_lease_and_raises() -> None:
    log: list[str] = []
    lease, clock = LoggedLease(log), FakeClock()
    with pytest.raises(RuntimeError, match="reconciler crashed"):
        await run_while_leading(elector(lease, clock), Work(log, fail=True), asyncio.Event())
    assert log == ["work started", "lease released"]


async def test_sigterm_sets_the_termination_event() -> None:
    event = termination_event([signal.SIGTERM])
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(event.wait(), 5)
    finally:
        asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)
    assert event.is_set()
