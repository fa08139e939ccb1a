"""Lease leader election: acquire, renew, lose on a missed deadline, release, take over after expiry."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta

import pytest

from kubetrain.kube.runtime.leader import (
    ElectionSettings,
    LeaderElector,
    LeaseConflictError,
    LeaseLock,
    LeaseRecord,
    format_micro_time,
    parse_micro_time,
)

from .fakes import FakeClock, MemoryLease, settle

EPOCH = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class Candidate:
    def __init__(self, lease: LeaseLock, clock: FakeClock, identity: str) -> None:
        self.events: list[str] = []
        self.elector = LeaderElector(
            lease,
            identity,
            clock=clock,
            wall_clock=lambda: EPOCH + timedelta(seconds=clock.now),
            rng=random.Random(identity),
            on_started_leading=lambda: self.events.append("started"),
            on_stopped_leading=lambda: self.events.append("stopped"),
        )
        self.task = asyncio.ensure_future(self.elector.run())

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


async def elapse(clock: FakeClock, seconds: float, step: float = 0.5) -> None:
    for _ in range(round(seconds / step)):
        await clock.advance(step)


async def test_a_lone_candidate_creates_the_lease_and_leads() -> None:
    lease, clock = MemoryLease(), FakeClock()
    candidate = Candidate(lease, clock, "a")
    await settle()
    assert candidate.elector.is_leader
    assert candidate.events == ["started"]
    assert lease.record is not None
    assert (lease.record.holder, lease.record.transitions) == ("a", 0)
    assert lease.record.lease_duration_seconds == 15
    assert lease.record.acquire_time == lease.record.renew_time
    await candidate.stop()


async def test_the_leader_renews_every_retry_period() -> None:
    lease, clock = MemoryLease(), FakeClock()
    candidate = Candidate(lease, clock, "a")
    await settle()
    await elapse(clock, 6)
    assert lease.record is not None and lease.record.renew_time == EPOCH + timedelta(seconds=clock.now)
    assert lease.record.acquire_time == EPOCH + timedelta(seconds=clock.now - 6)
    await candidate.stop()


async def test_only_one_of_two_candidates_leads_while_the_leader_renews() -> None:
    lease, clock = MemoryLease(), FakeClock()
    first = Candidate(lease, clock, "a")
    await settle()
    second = Candidate(lease, clock, "b")
    await elapse(clock, 60)
    assert first.elector.is_leader
    assert not second.elector.is_leader
    await first.stop()
    await second.stop()


async def test_a_released_lease_is_taken_over_at_the_next_retry() -> None:
    lease, clock = MemoryLease(), FakeClock()
    first = Candidate(lease, clock, "a")
    await settle()
    second = Candidate(lease, clock, "b")
    await elapse(clock, 4)
    await first.stop()
    assert await first.elector.release()
    assert lease.record is not None
    assert (lease.record.holder, lease.record.lease_duration_seconds) == ("", 1)
    await elapse(clock, 2.5)
    assert second.elector.is_leader
    assert lease.record.holder == "b"
    assert lease.record.transitions == 1
    await second.stop()


async def test_a_leader_that_dies_without_releasing_is_replaced_after_the_lease_duration() -> None:
    lease, clock = MemoryLease(), FakeClock()
    first = Candidate(lease, clock, "a")
    await settle()
    second = Candidate(lease, clock, "b")
    await elapse(clock, 4)
    first.task.cancel()  # killed: no release
    await settle()
    await elapse(clock, 12)
    assert not second.elector.is_leader
    await elapse(clock, 6)
    assert second.elector.is_leader
    await second.stop()


async def test_a_leader_that_cannot_renew_stops_leading_at_the_renew_deadline() -> None:
    lease, clock = MemoryLease(), FakeClock()
    candidate = Candidate(lease, clock, "a")
    await settle()
    await elapse(clock, 2)
    lease.broken = True
    await elapse(clock, 9.5)
    assert candidate.elector.is_leader
    await elapse(clock, 0.5)
    assert not candidate.elector.is_leader
    assert candidate.events == ["started", "stopped"]
    assert candidate.task.done()


async def test_a_renewal_that_hangs_counts_against_the_deadline() -> None:
    lease, clock = MemoryLease(), FakeClock()
    candidate = Candidate(lease, clock, "a")
    await settle()
    hang = asyncio.Event()

    async def hanging_get() -> LeaseRecord | None:
        await hang.wait()
        return None

    lease.get = hanging_get  # type: ignore[method-assign]
    await elapse(clock, 10)
    assert not candidate.elector.is_leader


async def test_a_conflicting_write_is_not_leadership() -> None:
    clock = FakeClock()

    class RacingLease(MemoryLease):
        async def create(self, record: LeaseRecord) -> LeaseRecord:
            raise LeaseConflictError("another candidate created it first")

    candidate = Candidate(RacingLease(), clock, "a")
    await settle()
    assert not candidate.elector.is_leader
    await candidate.stop()


async def test_stopping_a_leader_calls_on_stopped_leading() -> None:
    lease, clock = MemoryLease(), FakeClock()
    candidate = Candidate(lease, clock, "a")
    await settle()
    await candidate.stop()
    assert candidate.events == ["started", "stopped"]
    assert not candidate.elector.is_leader


async def test_release_leaves_someone_elses_lease_alone() -> None:
    lease, clock = MemoryLease(), FakeClock()
    leader = Candidate(lease, clock, "a")
    await settle()
    other = Candidate(lease, clock, "b")
    await settle()
    await other.stop()
    assert not await other.elector.release()
    assert lease.record is not None and lease.record.holder == "a"
    await leader.stop()


def test_the_renew_deadline_must_be_shorter_than_the_lease() -> None:
    with pytest.raises(ValueError, match="renew deadline"):
        ElectionSettings(lease_duration=10, renew_deadline=10)


def test_the_retry_period_must_fit_in_the_renew_deadline() -> None:
    with pytest.raises(ValueError, match="retry period"):
        ElectionSettings(lease_duration=15, renew_deadline=4, retry_period=4)


def test_lease_times_are_written_as_micro_time() -> None:
    moment = datetime(2026, 3, 1, 12, 0, 5, 123456, tzinfo=UTC)
    assert format_micro_time(moment) == "2026-03-01T12:00:05.123456Z"
    assert parse_micro_time("2026-03-01T12:00:05.123456Z") == moment


async def test_releasing_while_still_campaigning_is_refused() -> None:
    lease, clock = MemoryLease(), FakeClock()
    candidate = Candidate(lease, clock, "a")
    await settle()
    with pytest.raises(RuntimeError, match="before releasing"):
        await candidate.elector.release()
    assert candidate.elector.is_leader
    await candidate.stop()


async def test_the_lease_is_held_from_its_acquisition_until_the_renew_deadline_after_the_last_renewal() -> (
    None
):
    lease, clock = MemoryLease(), FakeClock()
    candidate = Candidate(lease, clock, "a")
    await settle()
    assert candidate.elector.holds_lease()
    await elapse(clock, 2)  # renewed at +2
    lease.broken = True
    await elapse(clock, 9.5)
    assert candidate.elector.holds_lease()
    await elapse(clock, 0.5)
    assert not candidate.elector.holds_lease()
    await candidate.stop()


async def test_a_candidate_that_does_not_lead_holds_no_lease() -> None:
    lease, clock = MemoryLease(), FakeClock()
    leader = Candidate(lease, clock, "a")
    await settle()
    other = Candidate(lease, clock, "b")
    await elapse(clock, 4)
    assert not other.elector.holds_lease()
    await other.stop()
    await leader.stop()
    assert not leader.elector.holds_lease()


async def test_a_renewal_answered_after_a_pause_counts_from_when_it_was_sent() -> None:
    # The process is frozen (SIGSTOP) while its renewal is in flight: the API server applied the renewal
    # before the pause, and the answer is read 20 s later. Counted from the answer, the replica would
    # believe it had just renewed while another may already lead.
    lease, clock = MemoryLease(), FakeClock()
    candidate = Candidate(lease, clock, "a")
    await settle()
    answer = asyncio.Event()
    read = lease.get

    async def delayed_get() -> LeaseRecord | None:
        record = await read()
        await answer.wait()
        return record

    lease.get = delayed_get  # type: ignore[method-assign]
    await elapse(clock, 2)  # the renewal is sent, its answer held back
    clock.now += 20  # paused: nothing ran, no timer fired
    answer.set()
    await settle()
    assert not candidate.elector.holds_lease()
    lease.get = read  # type: ignore[method-assign]
    await elapse(clock, 2)
    assert not candidate.elector.is_leader, "it steps down at its next look at the deadline"
