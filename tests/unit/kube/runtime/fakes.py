"""A clock tests advance by hand, so the runtime's waits finish without real sleeping."""

from __future__ import annotations

import asyncio


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
