"""The cyclic garbage collector, set for a process whose heap is mostly its informer caches.

The caches hold the API server's JSON as plain dicts and lists: no cycles, freed by reference counting the
moment a watch event replaces them. Python's default (a young collection every 700 container allocations)
makes a burst of 500 jobs run about 500 collections, and every full one walks the whole cache for nothing:
1.6 s of collection in one such burst, the longest pause 310 ms, a pause of every reconcile in flight
(docs/benchmarks.md). A larger young generation collects the same garbage in fewer, cheaper passes; what
survives start-up and the first cache fill is frozen, so full collections never walk it again.

Cyclic garbage is still collected: the young threshold bounds how much of it can wait for a collection, and
the middle and old thresholds stay Python's.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from prometheus_client import Histogram

DEFAULT_YOUNG_THRESHOLD = 10_000
"""Container allocations (net of frees) between young collections; Python's default is 700."""


def tune(young_threshold: int) -> None:
    """Collect the young generation every ``young_threshold`` allocations; the older thresholds stay."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young_threshold, middle, old)


def freeze_survivors() -> None:
    """Collect everything, then move what is still alive (modules, the synced caches) out of the
    collector's reach: later full collections walk only what was allocated since.

    A frozen object is still freed by reference counting; only a cycle among frozen objects that later
    becomes garbage would stay, and the objects alive here are the process's long-lived ones.
    """
    gc.collect()
    gc.freeze()


class PauseRecorder:
    """Times every collection into a histogram labelled by generation, while installed."""

    def __init__(self, histogram: Histogram) -> None:
        self.histogram = histogram
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            elapsed = time.perf_counter() - self._started
            self.histogram.labels(generation=str(info["generation"])).observe(elapsed)

    def install(self) -> None:
        gc.callbacks.append(self)

    def remove(self) -> None:
        if self in gc.callbacks:
            gc.callbacks.remove(self)
