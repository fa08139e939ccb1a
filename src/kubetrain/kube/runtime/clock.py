"""The monotonic clock the runtime waits on, injectable so tests advance time instead of sleeping."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


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
