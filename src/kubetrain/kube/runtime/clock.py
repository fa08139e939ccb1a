"""The monotonic clock the runtime waits on, injectable so tests advance time instead of sleeping."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    """Monotonic seconds and a sleep measured on the same scale."""

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class LoopClock:
    """Real time: the monotonic clock and ``asyncio.sleep``."""

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


async def sleep_or_wake(clock: Clock, seconds: float | None, wake: asyncio.Event) -> None:
    """Wait until ``seconds`` pass on ``clock`` (forever when None) or ``wake`` is set, whichever is first."""
    waiters: set[asyncio.Task[object]] = {asyncio.ensure_future(wake.wait())}
    if seconds is not None:
        waiters.add(asyncio.ensure_future(clock.sleep(seconds)))
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


async def within(clock: Clock, seconds: float, awaitable: Awaitable[T]) -> T:
    """Await ``awaitable``, cancelling it and raising TimeoutError if ``seconds`` pass on ``clock`` first."""
    work = asyncio.ensure_future(awaitable)
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
        if not work.done():
            work.cancel()
            await asyncio.gather(work, return_exceptions=True)
    if work.cancelled():
        raise TimeoutError(f"no answer within {seconds:g}s")
    return work.result()
