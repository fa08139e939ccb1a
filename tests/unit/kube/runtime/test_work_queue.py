"""The work queue: dedup, one worker per key, re-add while processing, delays, backoff and shutdown."""

from __future__ import annotations

import asyncio

import pytest

from kubetrain.kube.runtime.queue import QueueShutDownError, WorkQueue

from .fakes import FakeClock, settle


async def take_all(queue: WorkQueue[str]) -> list[str]:
    """Every key ready right now, in order, each taken and marked done."""
    keys = []
    while len(queue):
        key = await queue.get()
        keys.append(key)
        queue.done(key)
    return keys


async def test_a_key_added_twice_while_waiting_is_queued_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("ns/a")
    queue.add("ns/b")
    queue.add("ns/a")
    assert len(queue) == 2
    assert await take_all(queue) == ["ns/a", "ns/b"]


async def test_a_key_held_by_a_worker_is_not_handed_to_a_second_worker() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("ns/a")
    first = await queue.get()
    queue.add("ns/a")
    second_worker = asyncio.ensure_future(queue.get())
    await settle()
    assert first == "ns/a"
    assert not second_worker.done()
    assert len(queue) == 0
    second_worker.cancel()


async def test_a_key_added_while_processing_is_queued_again_once_after_done() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("ns/a")
    key = await queue.get()
    queue.add("ns/a")
    queue.add("ns/a")
    assert len(queue) == 0
    queue.done(key)
    assert len(queue) == 1
    assert await take_all(queue) == ["ns/a"]


async def test_done_without_a_re_add_leaves_the_key_out_of_the_queue() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("ns/a")
    queue.done(await queue.get())
    assert len(queue) == 0
    assert not queue.is_processing("ns/a")


async def test_a_waiting_worker_gets_a_key_added_later() -> None:
    queue: WorkQueue[str] = WorkQueue()
    worker = asyncio.ensure_future(queue.get())
    await settle()
    queue.add("ns/a")
    assert await worker == "ns/a"


async def test_each_of_two_waiting_workers_gets_a_different_key() -> None:
    queue: WorkQueue[str] = WorkQueue()
    workers = [asyncio.ensure_future(queue.get()) for _ in range(2)]
    await settle()
    queue.add("ns/a")
    queue.add("ns/b")
    assert sorted(await asyncio.gather(*workers)) == ["ns/a", "ns/b"]


async def test_a_cancelled_worker_passes_its_wakeup_to_another() -> None:
    queue: WorkQueue[str] = WorkQueue()
    cancelled = asyncio.ensure_future(queue.get())
    other = asyncio.ensure_future(queue.get())
    await settle()
    queue.add("ns/a")
    cancelled.cancel()
    assert await other == "ns/a"


async def test_add_after_releases_the_key_only_when_its_time_has_come() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("ns/a", 10)
    await clock.advance(9.9)
    assert len(queue) == 0
    await clock.advance(0.1)
    assert await take_all(queue) == ["ns/a"]
    queue.shutdown()


async def test_delayed_keys_are_released_in_deadline_order() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("ns/late", 30)
    queue.add_after("ns/early", 5)
    queue.add_after("ns/middle", 20)
    await clock.advance(30)
    assert await take_all(queue) == ["ns/early", "ns/middle", "ns/late"]
    queue.shutdown()


async def test_add_after_moves_a_delayed_key_earlier_but_never_later() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("ns/a", 60)
    queue.add_after("ns/a", 10)
    queue.add_after("ns/a", 30)
    await clock.advance(10)
    assert await take_all(queue) == ["ns/a"]
    await clock.advance(60)
    assert len(queue) == 0
    queue.shutdown()


async def test_add_after_with_no_delay_adds_at_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("ns/a", 0)
    assert len(queue) == 1


async def test_rate_limited_delays_double_per_failure_from_5_ms() -> None:
    queue: WorkQueue[str] = WorkQueue()
    delays = [queue.next_backoff("ns/a") for _ in range(5)]
    assert delays == [0.005, 0.01, 0.02, 0.04, 0.08]
    assert queue.num_requeues("ns/a") == 5


async def test_rate_limited_delay_is_capped_at_1000_seconds() -> None:
    queue: WorkQueue[str] = WorkQueue()
    delays = [queue.next_backoff("ns/a") for _ in range(100)]
    assert max(delays) == 1000.0
    assert delays[-1] == 1000.0


async def test_backoff_is_counted_per_key() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.next_backoff("ns/a")
    queue.next_backoff("ns/a")
    assert queue.next_backoff("ns/b") == 0.005


async def test_forget_resets_the_backoff_of_a_key() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.next_backoff("ns/a")
    queue.next_backoff("ns/a")
    queue.forget("ns/a")
    assert queue.num_requeues("ns/a") == 0
    assert queue.next_backoff("ns/a") == 0.005


async def test_add_rate_limited_queues_the_key_after_its_backoff() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock, base_delay=1.0)
    queue.add_rate_limited("ns/a")
    queue.add_rate_limited("ns/a")  # second failure: 2 s, but the key already waits for 1 s
    await clock.advance(0.5)
    assert len(queue) == 0
    await clock.advance(0.5)
    assert await take_all(queue) == ["ns/a"]
    queue.shutdown()


async def test_shutdown_hands_out_ready_keys_then_stops_workers() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("ns/a")
    queue.shutdown()
    assert await queue.get() == "ns/a"
    with pytest.raises(QueueShutDownError):
        await queue.get()


async def test_shutdown_without_drain_stops_workers_at_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("ns/a")
    queue.shutdown(drain=False)
    with pytest.raises(QueueShutDownError):
        await queue.get()


async def test_shutdown_wakes_a_waiting_worker() -> None:
    queue: WorkQueue[str] = WorkQueue()
    worker = asyncio.ensure_future(queue.get())
    await settle()
    queue.shutdown()
    with pytest.raises(QueueShutDownError):
        await worker


async def test_a_shut_down_queue_ignores_new_and_delayed_keys() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("ns/delayed", 1)
    queue.shutdown()
    queue.add("ns/new")
    await clock.advance(5)
    assert len(queue) == 0


def test_backoff_bounds_must_be_positive_and_ordered() -> None:
    with pytest.raises(ValueError, match="base_delay"):
        WorkQueue[str](base_delay=2.0, max_delay=1.0)


async def test_retries_of_many_keys_are_paced_at_10_per_second_after_a_burst_of_100() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    burst = [queue.next_backoff(f"ns/job-{index}") for index in range(100)]
    assert set(burst) == {0.005}
    assert queue.next_backoff("ns/job-100") == pytest.approx(0.1)
    assert queue.next_backoff("ns/job-101") == pytest.approx(0.2)


async def test_the_retry_bucket_refills_over_time() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock, retry_qps=1, retry_burst=1)
    queue.next_backoff("ns/a")
    await clock.advance(1)
    assert queue.next_backoff("ns/b") == 0.005
