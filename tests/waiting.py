"""Waiting in tests for what must happen, with a deadline that load cannot reach.

A test waits for an outcome, never for a speed: CI runs nine lanes on two cores at a load near 15, where a
`kubectl get` alone takes seconds, so a deadline is only the point at which the outcome is taken to be
missing. ``PATIENCE`` is that point for every tier; how fast things happen is measured in ``bench/`` instead
(docs/development.md, "Time in tests").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

T = TypeVar("T")

PATIENCE = 180.0
"""Seconds to wait for something that must happen: far beyond what the busiest CI machine takes, and below
pytest's per-test timeout (pyproject.toml), so a missing outcome fails with its name instead of a timeout."""

_FIRST_POLL = 0.05
_LONGEST_POLL = 0.5


def _polls(timeout: float, what: str) -> Iterator[float]:
    """The pauses between probes, growing from 50 ms to 0.5 s; AssertionError naming ``what`` at the
    deadline."""
    deadline = time.monotonic() + timeout
    pause = _FIRST_POLL
    while time.monotonic() < deadline:
        yield pause
        pause = min(pause * 2, _LONGEST_POLL)
    raise AssertionError(f"{what} did not happen within {timeout:g} s")


def eventually(probe: Callable[[], T | None], what: str = "condition", timeout: float = PATIENCE) -> T:
    """Probe until ``probe()`` returns something truthy, and return it."""
    for pause in _polls(timeout, what):
        result = probe()
        if result:
            return result
        time.sleep(pause)
    raise AssertionError("unreachable")  # _polls raises at its deadline


async def eventually_async(
    probe: Callable[[], Awaitable[T | None]], what: str = "condition", timeout: float = PATIENCE
) -> T:
    """``eventually`` for an async probe, sleeping without blocking the event loop."""
    for pause in _polls(timeout, what):
        result = await probe()
        if result:
            return result
        await asyncio.sleep(pause)
    raise AssertionError("unreachable")
