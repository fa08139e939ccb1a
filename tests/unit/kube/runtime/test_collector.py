"""The operator's garbage-collector settings and its collection-pause metric."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from kubetrain.kube.runtime import collector


@pytest.fixture
def restored_collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)
    gc.unfreeze()


def registered() -> tuple[CollectorRegistry, collector.PauseRecorder]:
    registry = CollectorRegistry()
    recorder = collector.PauseRecorder()
    registry.register(recorder)
    return registry, recorder


def observed(registry: CollectorRegistry, generation: str) -> float:
    value = registry.get_sample_value("kubetrain_gc_pause_seconds_count", {"generation": generation})
    return value or 0.0


@pytest.mark.usefixtures("restored_collector")
def test_tune_sets_the_young_threshold_and_keeps_the_older_ones() -> None:
    gc.set_threshold(700, 11, 12)
    collector.tune(10_000)
    assert gc.get_threshold() == (10_000, 11, 12)


@pytest.mark.usefixtures("restored_collector")
def test_freeze_survivors_moves_the_live_heap_out_of_the_collectors_reach() -> None:
    collector.freeze_survivors()
    assert gc.get_freeze_count() > 0


@pytest.mark.usefixtures("restored_collector")
def test_a_frozen_object_is_still_freed_when_its_last_reference_goes() -> None:
    import weakref

    class Cached:
        """A cached object (a class instance, so a weak reference can watch it go)."""

    entry = Cached()
    freed = weakref.ref(entry)
    collector.freeze_survivors()
    del entry
    assert freed() is None


def test_each_collection_is_timed_under_its_generation() -> None:
    registry, recorder = registered()
    recorder.install()
    try:
        gc.collect(1)
        gc.collect(2)
    finally:
        recorder.remove()
    assert observed(registry, "1") >= 1
    assert observed(registry, "2") >= 1
    assert registry.get_sample_value(
        "kubetrain_gc_pause_seconds_bucket", {"generation": "2", "le": "+Inf"}
    ) == observed(registry, "2")


def test_a_removed_recorder_times_nothing() -> None:
    registry, recorder = registered()
    recorder.install()
    recorder.remove()
    gc.collect()
    assert observed(registry, "2") == 0
    assert recorder not in gc.callbacks


@pytest.mark.usefixtures("restored_collector")
def test_a_scrape_completes_while_collections_run_at_every_allocation() -> None:
    # A collection can start inside a scrape, while a metric's (non-reentrant) lock is held: the recorder
    # takes no lock, so /metrics answers however often the collector runs.
    registry, recorder = registered()
    Histogram("other", "a labelled histogram beside it", ("kind",), registry=registry).labels(
        kind="x"
    ).observe(1)
    recorder.install()
    try:
        gc.set_threshold(1)
        for _ in range(20):
            generate_latest(registry)
    finally:
        gc.set_threshold(700)
        recorder.remove()
    assert observed(registry, "0") > 0


@pytest.fixture
def collector_enabled() -> Iterator[None]:
    gc.enable()
    yield
    gc.enable()


@pytest.mark.usefixtures("collector_enabled")
def test_no_collection_runs_inside_a_paused_block_and_it_runs_again_after() -> None:
    with collector.paused():
        assert not gc.isenabled()
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_enabled")
def test_overlapping_pauses_end_when_the_last_of_them_ends() -> None:
    # Informers list their kinds at once on one loop: the first to finish must not resume collection.
    first, second = collector.paused(), collector.paused()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert not gc.isenabled()
    second.__exit__(None, None, None)
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_enabled")
def test_a_block_that_raises_still_ends_its_pause() -> None:
    with pytest.raises(RuntimeError), collector.paused():
        raise RuntimeError("list failed")
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_enabled")
def test_a_collector_disabled_before_the_pause_stays_disabled_after_it() -> None:
    gc.disable()
    with collector.paused():
        pass
    assert not gc.isenabled()
