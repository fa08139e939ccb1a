"""Process lifecycle: stop on SIGTERM/SIGINT, and do the controller's work only while leading.

``run_while_leading`` ties the rules together: work starts when the Lease is won, is cancelled the moment it
is lost (before anyone else can win it: renew deadline 10 s < lease 15 s), and on shutdown the work is
cancelled first and the Lease released after, so a successor starts within one retry period.
"""

from __future__ import annotations

import asyncio
import enum
import signal
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from kubetrain.kube.runtime.leader import LeaderElector


class Outcome(enum.Enum):
    STOPPED = "stopped"
    """Shutdown was asked for (or the work ended); the Lease was released."""
    LOST_LEADERSHIP = "lost-leadership"
    """The Lease could not be renewed; the work was cancelled. A fresh process should campaign again."""


def termination_event(signals: Iterable[signal.Signals] = (signal.SIGTERM, signal.SIGINT)) -> asyncio.Event:
    """An event set when the process receives one of ``signals`` (call from inside the running loop)."""
    loop = asyncio.get_running_loop()
    event = asyncio.Event()
    for received in signals:
        loop.add_signal_handler(received, event.set)
    return event


async def run_while_leading(
    elector: LeaderElector, work: Callable[[], Coroutine[Any, Any, None]], stop: asyncio.Event
) -> Outcome:
    """Campaign for the Lease, run ``work()`` while leading, return when ``stop`` is set or the Lease is lost.

    If ``work`` ends by itself the Lease is released too, and an error it raised is passed on."""
    election = asyncio.ensure_future(elector.run())
    stopping = asyncio.ensure_future(stop.wait())
    worker: asyncio.Future[None] | None = None
    lost = False
    try:
        elected = asyncio.ensure_future(elector.leading.wait())
        await _first_of(election, stopping, elected)
        await _cancel(elected)
        if elector.is_leader and not stop.is_set():
            worker = asyncio.ensure_future(work())
            await _first_of(election, stopping, worker)
    finally:
        await _cancel(worker)  # stop reconciling before anything else
        lost = election.done() and not stop.is_set()  # the elector only returns by itself when it lost
        await _cancel(election)
        await _cancel(stopping)
    if lost:
        return Outcome.LOST_LEADERSHIP
    await elector.release()
    if worker is not None and not worker.cancelled() and (error := worker.exception()) is not None:
        raise error
    return Outcome.STOPPED


async def _first_of(*tasks: asyncio.Future[Any]) -> None:
    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)


async def _cancel(task: asyncio.Future[Any] | None) -> None:
    if task is not None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
