"""The cyclic garbage collector, set for a process whose heap is mostly its informer caches.

The caches hold the API server's JSON as plain dicts and lists: no cycles, freed by reference counting the
moment a watch event replaces them. Python's default (a young collection every 700 container allocations)
makes a burst of 500 jobs run about 500 collections, and every full one walks the whole cache for nothing:
1.0 to 1.5 s of collection in one such burst, each collection a pause of every reconcile in flight
(docs/benchmarks.md). A larger young generation collects the same garbage in fewer, cheaper passes; what
survives start-up and the first cache fill is frozen, so full collections never walk it again.

Cyclic garbage is still collected: the young threshold bounds how much of it can wait for a collection, and
the middle and old thresholds stay Python's.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import itertools
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import HistogramMetricFamily, Metric

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


_pauses = 0
_enabled_before_pauses = True


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No cyclic collection until every ``paused`` block in progress has ended: for work that allocates a
    great many containers that cannot form cycles, such as listing a kind into a cache (JSON: dicts, lists,
    scalars). The blocks may await and overlap (the informers list their kinds at once on one loop).

    A page of 500 pods decodes to about 150,000 containers: a young collection every 10,000 of them, an
    older one every ten of those, and a full one, walking the whole growing cache, whenever the old
    generation has grown by a quarter; and each collection walks the page's decoded objects, all alive until
    the page is compacted and dropped. Listing 2,000 jobs' 22,000 objects spent a third of its CPU so
    (docs/benchmarks.md, "Many jobs"). Paused, the allocations are counted all the same, and the first one
    after the last block ends collects what survived (the compacted cache) once. What waits meanwhile is
    only cyclic garbage, for as long as a list takes; reference counting frees everything else at once.
    The collector's state before the first block (it may have been disabled) is what the last one leaves.
    """
    global _pauses, _enabled_before_pauses
    if _pauses == 0:
        _enabled_before_pauses = gc.isenabled()
        gc.disable()
    _pauses += 1
    try:
        yield
    finally:
        _pauses -= 1
        if _pauses == 0 and _enabled_before_pauses:
            gc.enable()


class PauseRecorder:
    """Times every collection, by generation, while installed; a Prometheus collector of those times
    (``kubetrain_gc_pause_seconds``, a histogram).

    The callback runs inside a collection, which can start at almost any allocation, one made while a
    metric's lock is held included (prometheus-client's locks are not reentrant): so it takes no lock and
    only adds to preallocated counts, and the histogram is built from them when scraped.
    """

    NAME = "kubetrain_gc_pause_seconds"
    BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
    GENERATIONS = 3

    def __init__(self) -> None:
        self._started = 0.0
        self._counts = [[0] * (len(self.BUCKETS) + 1) for _ in range(self.GENERATIONS)]
        self._sums = [0.0] * self.GENERATIONS

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        elapsed = time.perf_counter() - self._started
        generation = info["generation"]
        self._sums[generation] += elapsed
        self._counts[generation][bisect.bisect_left(self.BUCKETS, elapsed)] += 1

    def install(self) -> None:
        gc.callbacks.append(self)

    def remove(self) -> None:
        if self in gc.callbacks:
            gc.callbacks.remove(self)

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(
            self.NAME,
            "Cyclic garbage collections by generation (2: full), each a pause of every reconcile in flight",
            labels=["generation"],
        )
        for generation, counts in enumerate(self._counts):
            cumulative = list(itertools.accumulate(counts))
            if cumulative[-1]:
                bounds = [*(str(b) for b in self.BUCKETS), "+Inf"]
                family.add_metric(
                    [str(generation)], list(zip(bounds, cumulative, strict=True)), self._sums[generation]
                )
        yield family
