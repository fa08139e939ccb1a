"""The reflector: list then watch, resume, re-list on 410 and silence, back off on errors."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import gc
import random
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, Literal

from kubetrain.kube.runtime.reflector import (
    ListPage,
    Reflector,
    ReflectorSettings,
    ResourceExpiredError,
    WatchEvent,
    resync_periodically,
)
from kubetrain.kube.runtime.store import ObjectChange, Store

from .fakes import FakeClock, settle

SILENCE_LIMIT = ReflectorSettings().inactivity_timeout

Step = WatchEvent | Exception | Callable[[], object] | Literal["end"]
"""An event to send, an error to raise, something to do to the cluster, or the end of the stream."""


class ScriptedListWatch:
    """Lists ``objects`` in pages; each watch call plays the next script, then hangs (a quiet stream)."""

    def __init__(self, objects: list[dict[str, Any]], version: str = "100") -> None:
        self.objects = objects
        self.version = version
        self.list_failures: list[Exception] = []
        self.list_calls: list[str | None] = []
        self.watch_calls: list[tuple[str, int]] = []
        self.scripts: list[list[Step]] = []

    async def list_page(self, *, limit: int, continue_token: str | None) -> ListPage:
        self.list_calls.append(continue_token)
        if self.list_failures:
            raise self.list_failures.pop(0)
        start = int(continue_token or 0)
        end = start + limit
        more = str(end) if end < len(self.objects) else None
        return ListPage(copy.deepcopy(self.objects[start:end]), self.version, more)

    async def watch(self, *, resource_version: str, timeout_seconds: int) -> AsyncGenerator[WatchEvent, None]:
        self.watch_calls.append((resource_version, timeout_seconds))
        script = self.scripts.pop(0) if self.scripts else []
        for step in script:
            if step == "end":
                return
            if isinstance(step, Exception):
                raise step
            if isinstance(step, WatchEvent):
                yield step
            else:
                step()
        await asyncio.Event().wait()


def pod(name: str, version: str, **metadata: Any) -> dict[str, Any]:
    metadata = {"name": name, "namespace": "ns", "resourceVersion": version, **metadata}
    return {"kind": "Pod", "metadata": metadata}


def event(kind: str, obj: dict[str, Any]) -> WatchEvent:
    return WatchEvent(kind, obj)


def bookmark(version: str) -> WatchEvent:
    return WatchEvent("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": version}})


def gone() -> WatchEvent:
    return WatchEvent("ERROR", {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"})


class Harness:
    def __init__(self, source: ScriptedListWatch, *, page_size: int = 500) -> None:
        self.source = source
        self.clock = FakeClock()
        self.store = Store()
        self.changes: list[ObjectChange] = []
        settings = ReflectorSettings(page_size=page_size)
        self.reflector = Reflector(
            source, self.store, name="pods", settings=settings, clock=self.clock, rng=random.Random(7)
        )
        self.reflector.add_handler(self.changes.append)

    def seen(self) -> list[tuple[str, str]]:
        return [(change.type.value, change.object["metadata"]["name"]) for change in self.changes]


@contextlib.asynccontextmanager
async def running(harness: Harness) -> AsyncIterator[Harness]:
    task = asyncio.ensure_future(harness.reflector.run())
    await settle()
    try:
        yield harness
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_the_first_list_reads_every_page_and_marks_the_store_synced() -> None:
    source = ScriptedListWatch([pod(f"p{i}", str(i)) for i in range(5)])
    async with running(Harness(source, page_size=2)) as harness:
        assert source.list_calls == [None, "2", "4"]
        assert len(harness.store) == 5
        assert harness.reflector.has_synced.is_set()
        assert harness.store.resource_version == "100"


async def test_the_watch_starts_at_the_list_version_with_a_jittered_server_timeout() -> None:
    source = ScriptedListWatch([])
    async with running(Harness(source)):
        [(version, timeout)] = source.watch_calls
        assert version == "100"
        assert 300 <= timeout <= 600


async def test_watch_events_update_the_store_and_reach_the_handlers() -> None:
    source = ScriptedListWatch([pod("a", "1")])
    source.scripts = [[event("MODIFIED", pod("a", "101")), event("ADDED", pod("b", "102"))]]
    source.scripts[0].append(event("DELETED", pod("a", "103")))
    async with running(Harness(source)) as harness:
        assert harness.seen() == [("ADDED", "a"), ("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "a")]
        assert harness.store.keys() == ["ns/b"]
        modified = harness.changes[1]
        assert modified.old is not None and modified.old["metadata"]["resourceVersion"] == "1"


async def test_a_watch_the_server_closes_resumes_from_the_last_version_seen_without_re_listing() -> None:
    source = ScriptedListWatch([])
    source.scripts = [[event("ADDED", pod("a", "105")), "end"]]
    async with running(Harness(source)) as harness:
        assert [version for version, _ in source.watch_calls] == ["100", "105"]
        assert harness.reflector.lists == 1
        assert harness.reflector.restarts["timeout"] == 1


async def test_a_bookmark_moves_the_resume_version_without_reporting_a_change() -> None:
    source = ScriptedListWatch([])
    source.scripts = [[bookmark("150"), "end"]]
    async with running(Harness(source)) as harness:
        assert source.watch_calls[-1][0] == "150"
        assert harness.changes == []
        assert harness.store.resource_version == "150"


async def test_a_410_error_event_makes_it_re_list() -> None:
    source = ScriptedListWatch([pod("a", "1")])
    source.scripts = [[gone()]]
    async with running(Harness(source)) as harness:
        assert harness.reflector.lists == 2
        assert harness.reflector.restarts["gone"] == 1


async def test_a_410_response_to_the_watch_request_makes_it_re_list() -> None:
    source = ScriptedListWatch([])
    source.scripts = [[ResourceExpiredError("too old")]]
    async with running(Harness(source)) as harness:
        assert harness.reflector.lists == 2
        assert harness.reflector.restarts["gone"] == 1


async def test_a_re_list_reports_objects_deleted_while_the_watch_was_broken() -> None:
    source = ScriptedListWatch([pod("kept", "1"), pod("gone", "2")])
    source.scripts = [[source.objects.pop, gone()]]
    async with running(Harness(source)) as harness:
        assert harness.seen()[-1] == ("DELETED", "gone")
        assert harness.store.keys() == ["ns/kept"]


async def test_a_silent_watch_is_re_listed_after_the_inactivity_timeout() -> None:
    source = ScriptedListWatch([])
    async with running(Harness(source)) as harness:
        await harness.clock.advance(SILENCE_LIMIT - 1)
        assert harness.reflector.lists == 1
        await harness.clock.advance(1)
        assert harness.reflector.lists == 2
        assert harness.reflector.restarts["inactive"] == 1


async def test_events_and_bookmarks_keep_a_watch_alive() -> None:
    source = ScriptedListWatch([])
    releases: list[asyncio.Event] = [asyncio.Event(), asyncio.Event()]

    async def slow_watch(*, resource_version: str, timeout_seconds: int) -> AsyncGenerator[WatchEvent, None]:
        source.watch_calls.append((resource_version, timeout_seconds))
        for release in releases:
            await release.wait()
            yield bookmark("120")
        await asyncio.Event().wait()

    source.watch = slow_watch  # type: ignore[method-assign]
    async with running(Harness(source)) as harness:
        for release in releases:
            await harness.clock.advance(SILENCE_LIMIT - 10)  # never silent for the whole limit
            release.set()
            await settle()
        await harness.clock.advance(SILENCE_LIMIT - 10)
        assert harness.reflector.lists == 1
        await harness.clock.advance(10)
        assert harness.reflector.lists == 2


async def test_a_transport_error_backs_off_then_re_watches_from_the_last_version() -> None:
    source = ScriptedListWatch([])
    source.scripts = [[event("ADDED", pod("a", "107")), ConnectionResetError("reset")]]
    async with running(Harness(source)) as harness:
        assert len(source.watch_calls) == 1
        await harness.clock.advance(1.0)
        assert [version for version, _ in source.watch_calls] == ["100", "107"]
        assert harness.reflector.lists == 1
        assert harness.reflector.restarts["error"] == 1


async def test_a_failing_list_is_retried_with_a_growing_backoff() -> None:
    source = ScriptedListWatch([pod("a", "1")])
    source.list_failures = [ConnectionRefusedError("down") for _ in range(3)]
    async with running(Harness(source)) as harness:
        for wait in (1.0, 1.92, 3.84):  # 0.8 s doubling, at most 20 % jitter
            assert not harness.reflector.has_synced.is_set()
            await harness.clock.advance(wait)
        assert harness.reflector.has_synced.is_set()
        assert len(source.list_calls) == 4


async def test_a_watch_that_closes_at_once_with_nothing_in_it_is_backed_off() -> None:
    source = ScriptedListWatch([])
    source.scripts = [["end"], ["end"]]
    async with running(Harness(source)) as harness:
        assert len(source.watch_calls) == 1
        assert harness.reflector.restarts["error"] == 1
        await harness.clock.advance(1.0)
        assert len(source.watch_calls) == 2


async def test_a_failing_handler_does_not_stop_the_reflector() -> None:
    source = ScriptedListWatch([])
    source.scripts = [[event("ADDED", pod("a", "101")), event("ADDED", pod("b", "102"))]]
    harness = Harness(source)

    def broken(change: ObjectChange) -> None:
        raise RuntimeError("bug")

    harness.reflector.add_handler(broken)
    async with running(harness):
        assert harness.seen() == [("ADDED", "a"), ("ADDED", "b")]


async def test_managed_fields_are_dropped_before_caching() -> None:
    source = ScriptedListWatch([pod("a", "1", managedFields=[{"manager": "kubectl"}])])
    async with running(Harness(source)) as harness:
        cached = harness.store.get("ns/a")
        assert cached is not None and "managedFields" not in cached["metadata"]


async def test_resync_calls_back_every_interval() -> None:
    clock = FakeClock()
    calls: list[float] = []
    task = asyncio.ensure_future(resync_periodically(600, lambda: calls.append(clock.now), clock=clock))
    await settle()
    for _ in range(3):
        await clock.advance(600)
    task.cancel()
    assert calls == [1600.0, 2200.0, 2800.0]


class CollectorWatchingListWatch(ScriptedListWatch):
    """Records, at each page it is asked for, whether the cyclic collector may run."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        super().__init__(objects)
        self.collector_enabled_at_pages: list[bool] = []

    async def list_page(self, *, limit: int, continue_token: str | None) -> ListPage:
        self.collector_enabled_at_pages.append(gc.isenabled())
        await asyncio.sleep(0)  # a real page is awaited: the pause must hold across it
        return await super().list_page(limit=limit, continue_token=continue_token)


async def test_the_collector_is_paused_while_a_list_is_read_and_runs_again_once_it_is_in() -> None:
    source = CollectorWatchingListWatch([pod(f"p{i}", str(i)) for i in range(5)])
    assert gc.isenabled()
    async with running(Harness(source, page_size=2)) as harness:
        assert harness.reflector.has_synced.is_set()
        assert source.collector_enabled_at_pages == [False, False, False]
        assert gc.isenabled()


async def test_a_failing_list_leaves_the_collector_running() -> None:
    source = CollectorWatchingListWatch([pod("a", "1")])
    source.list_failures = [RuntimeError("connection reset")]
    async with running(Harness(source)):
        assert gc.isenabled()
