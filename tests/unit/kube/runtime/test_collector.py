"""The operator's garbage-collector settings and its collection-pause metric."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Histogram

from kubetrain.kube.runtime import collector


@pytest.fixture
def restored_collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)
    gc.unfreeze()


def pauses() -> tuple[CollectorRegistry, Histogram]:
    registry = CollectorRegistry()
    return registry, Histogram("pauses", "test", ("generation",), registry=registry)


def observed(registry: CollectorRegistry, generation: str) -> float:
    value = registry.get_sample_value("pauses_count", {"generation": generation})
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
        pass

    entry = Cached()
    freed = weakref.ref(entry)
    collector.freeze_survivors()
    del entry
    assert freed() is None


def test_each_collection_is_timed_under_its_generation() -> None:
    registry, histogram = pauses()
    recorder = collector.PauseRecorder(histogram)
    recorder.install()
    try:
        gc.collect(1)
        gc.collect(2)
    finally:
        recorder.remove()
    assert observed(registry, "1") >= 1
    assert observed(registry, "2") >= 1


def test_a_removed_recorder_times_nothing() -> None:
    registry, histogram = pauses()
    recorder = collector.PauseRecorder(histogram)
    recorder.install()
    recorder.remove()
    gc.collect()
    assert observed(registry, "2") == 0
    assert recorder not in gc.callbacks
