"""A controller's workers: each takes a key from the work queue, reconciles it, and puts it back after its
wake-up, or after a backoff when the reconcile failed. A key is never reconciled by two workers at once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from kubetrain.kube.runtime.queue import QueueShutDownError, WorkQueue

Reconcile = Callable[[str], Awaitable[float | None]]
"""Reconcile one key; returns when to look at it again (None: only on change)."""
OnError = Callable[[str, Exception, float], None]
"""A reconcile of ``key`` failed with ``error``; it is retried after ``delay`` seconds."""


async def run_workers(
    queue: WorkQueue[str],
    reconcile: Reconcile,
    on_error: OnError,
    threads: int = 1,
    on_take: Callable[[], None] = lambda: None,
) -> None:
    """``threads`` workers over ``queue`` until it shuts down; ``on_take`` runs as each key is taken."""
    await asyncio.gather(*(_work(queue, reconcile, on_error, on_take) for _ in range(max(1, threads))))


async def _work(
    queue: WorkQueue[str], reconcile: Reconcile, on_error: OnError, on_take: Callable[[], None]
) -> None:
    while True:
        try:
            key = await queue.get()
        except QueueShutDownError:
            return
        on_take()
        try:
            requeue_after = await reconcile(key)
        except Exception as error:
            delay = queue.next_backoff(key)
            queue.add_after(key, delay)
            on_error(key, error, delay)
        else:
            queue.forget(key)
            if requeue_after is not None:
                queue.add_after(key, requeue_after)
        finally:
            queue.done(key)
