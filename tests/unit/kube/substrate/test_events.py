"""The event recorder: events wait while the controllers are busy, but never past the hold limit; repeats
bump one Event's count as client-go's EventCorrelator does: at once within their object's budget, then at
most once per bump interval; from the tenth distinct message of one reason about one object, the events are
combined into one, as client-go's EventAggregator does."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx2

from kubetrain.kube.events import (
    AGGREGATED_PREFIX,
    MAX_HOLD_SECONDS,
    REPEAT_BURST,
    REPEAT_WINDOW_SECONDS,
    EventRecord,
    EventRecorder,
    RecentEvents,
    RepeatBudget,
    SentEvent,
    SimilarEvents,
)

from .fakes import FakeApi

JOB: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "j", "namespace": "ns", "uid": "u-1"},
}


def recorder(
    api: FakeApi, busy: list[bool], bump_interval: float = 0.0, repeat_burst: int = REPEAT_BURST
) -> EventRecorder:
    """A recorder over ``api``; by default every repeat is reported at once (no bump interval)."""
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(api.handle), base_url="https://api")
    return EventRecorder(http, busy=lambda: busy[0], bump_interval=bump_interval, repeat_burst=repeat_burst)


def created(at: datetime | None = None, message: str = "Created pod: j-master-0") -> EventRecord:
    return EventRecord(
        JOB, "Normal", "SuccessfulCreatePod", message, "pytorchjob-controller", at=at or datetime.now(UTC)
    )


async def sent(api: FakeApi, *records: EventRecord) -> EventRecorder:
    """A recorder that was given ``records`` one after the other, each sent before the next."""
    events = recorder(api, [False])
    events.start()
    for record in records:
        events.record(record)
        await events.flush(timeout=2)
    await events.stop()
    return events


async def test_an_event_waits_while_the_controllers_are_busy() -> None:
    api, busy = FakeApi(), [True]
    events = recorder(api, busy)
    events.start()
    events.record(created())
    await asyncio.sleep(0.2)
    assert (api.requests, events.queued) == ([], 1)
    busy[0] = False
    await events.flush(timeout=2)
    await events.stop()
    assert events.queued == 0
    [(method, path, body)] = api.requests
    assert (method, path, body["reason"]) == ("POST", "/api/v1/namespaces/ns/events", "SuccessfulCreatePod")


async def test_an_event_held_past_the_limit_is_sent_while_still_busy() -> None:
    api = FakeApi()
    events = recorder(api, [True])
    events.start()
    events.record(created(at=datetime.now(UTC) - timedelta(seconds=MAX_HOLD_SECONDS)))
    await events.flush(timeout=2)
    await events.stop()
    assert [body["message"] for _, _, body in api.requests] == ["Created pod: j-master-0"]


async def test_a_repeat_bumps_the_count_of_the_event_already_posted() -> None:
    api, first = FakeApi(), datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    events = await sent(api, created(first), created(first + timedelta(seconds=30)))
    [(_, _, posted), (method, path, patch)] = api.requests
    assert (method, path) == ("PATCH", f"/api/v1/namespaces/ns/events/{posted['metadata']['name']}")
    assert patch == {"count": 2, "lastTimestamp": "2026-03-01T12:00:30Z"}
    assert (events.sent, events.folded, events.queued) == (2, 1, 0)


async def test_every_repeat_counts_one_more() -> None:
    api, first = FakeApi(), datetime.now(UTC)
    await sent(api, *(created(first + timedelta(seconds=i)) for i in range(4)))
    assert [body["count"] for _, _, body in api.requests] == [1, 2, 3, 4]


async def test_an_event_with_another_message_is_a_new_event() -> None:
    api = FakeApi()
    await sent(api, created(), created(message="Created pod: j-worker-0"))
    assert [method for method, _, _ in api.requests] == ["POST", "POST"]


async def test_the_same_event_about_another_object_is_a_new_event() -> None:
    api = FakeApi()
    other = EventRecord(
        {**JOB, "metadata": {**JOB["metadata"], "uid": "u-2"}},
        "Normal",
        "SuccessfulCreatePod",
        "Created pod: j-master-0",
        "pytorchjob-controller",
    )
    await sent(api, created(), other)
    assert [method for method, _, _ in api.requests] == ["POST", "POST"]


async def test_a_repeat_after_the_window_is_a_new_event() -> None:
    api, first = FakeApi(), datetime.now(UTC) - timedelta(seconds=REPEAT_WINDOW_SECONDS + 1)
    await sent(api, created(first), created())
    assert [method for method, _, _ in api.requests] == ["POST", "POST"]


class EventsExpiredApi(FakeApi):
    """Answers every PATCH with 404, as the API server does once an Event's TTL has passed."""

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        response = super().handle(request)
        return httpx2.Response(404, json={"reason": "NotFound"}) if request.method == "PATCH" else response


async def test_a_repeat_of_an_expired_event_posts_a_new_one_that_later_repeats_bump() -> None:
    api = EventsExpiredApi()
    events = await sent(api, created(), created())
    assert [(method, body.get("count")) for method, _, body in api.requests] == [
        ("POST", 1),
        ("PATCH", 2),
        ("POST", 1),
    ]
    assert (events.sent, events.folded) == (2, 0)


async def test_concurrent_repeats_make_one_event_and_bump_it_in_order() -> None:
    api, busy = FakeApi(), [True]
    events = recorder(api, busy)
    events.start()
    first = datetime.now(UTC)
    for i in range(8):
        events.record(created(first + timedelta(milliseconds=i)))
    busy[0] = False
    await events.flush(timeout=2)
    await events.stop()
    assert [body["count"] for _, _, body in api.requests] == list(range(1, 9))


async def test_the_first_repeats_about_an_object_are_reported_at_once_within_its_budget() -> None:
    api, first = FakeApi(), datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    events = recorder(api, [False], bump_interval=60, repeat_burst=2)
    events.start()
    for i in range(4):
        events.record(created(first + timedelta(seconds=i)))
        await events.flush(timeout=2)
    await events.stop()
    # Two repeats spend the budget; the third waits for the interval (a minute here).
    assert [(method, body.get("count")) for method, _, body in api.requests] == [
        ("POST", 1),
        ("PATCH", 2),
        ("PATCH", 3),
    ]


def test_a_spent_repeat_budget_refills_one_repeat_per_interval() -> None:
    budget = RepeatBudget(burst=1, refill_seconds=10)
    assert (budget.take("job", 0.0), budget.take("job", 5.0), budget.take("job", 10.5)) == (True, False, True)
    assert budget.take("another job", 10.5)


async def test_repeats_within_the_bump_interval_go_out_in_one_patch_when_it_ends() -> None:
    api, first = FakeApi(), datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    events = recorder(api, [False], bump_interval=0.3, repeat_burst=0)
    events.start()
    for i in range(4):
        events.record(created(first + timedelta(seconds=i)))
        await events.flush(timeout=2)
    assert [method for method, _, _ in api.requests] == ["POST"]
    await asyncio.sleep(0.5)
    await events.flush(timeout=2)
    await events.stop()
    assert [(method, body.get("count")) for method, _, body in api.requests] == [("POST", 1), ("PATCH", 4)]
    assert api.requests[1][2]["lastTimestamp"] == "2026-03-01T12:00:03Z"
    assert (events.sent, events.folded, events.queued) == (4, 3, 0)


def worker_created(index: int, at: datetime) -> EventRecord:
    return created(at + timedelta(seconds=index), message=f"Created pod: j-worker-{index}")


async def test_from_the_tenth_distinct_message_of_a_reason_the_events_are_combined_into_one() -> None:
    api, first = FakeApi(), datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    await sent(api, *(worker_created(i, first) for i in range(12)))
    assert [(method, body.get("count"), body.get("message")) for method, _, body in api.requests] == [
        *(("POST", 1, f"Created pod: j-worker-{i}") for i in range(9)),
        ("POST", 1, f"{AGGREGATED_PREFIX}Created pod: j-worker-9"),
        ("PATCH", 2, f"{AGGREGATED_PREFIX}Created pod: j-worker-10"),
        ("PATCH", 3, f"{AGGREGATED_PREFIX}Created pod: j-worker-11"),
    ]
    assert api.requests[-1][2]["lastTimestamp"] == "2026-03-01T12:00:11Z"


def test_events_of_another_reason_or_object_are_not_combined_with_them() -> None:
    similar, at = SimilarEvents(), datetime.now(UTC)
    for i in range(9):
        similar.combine(worker_created(i, at))
    service = EventRecord(JOB, "Normal", "SuccessfulCreateService", "Created service: j-0", "c", at=at)
    other_job = replace(
        worker_created(9, at), involved={**JOB, "metadata": {**JOB["metadata"], "uid": "u-2"}}
    )
    assert similar.combine(service)[0] is service
    assert similar.combine(other_job)[0] is other_job
    assert similar.combine(worker_created(9, at))[0].message.startswith(AGGREGATED_PREFIX)


def test_similar_events_are_counted_afresh_after_the_window() -> None:
    similar, at = SimilarEvents(window_seconds=600), datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    for i in range(9):
        similar.combine(worker_created(i, at))
    late = worker_created(9, at + timedelta(seconds=700))
    assert similar.combine(late)[0] is late


def test_the_least_recently_seen_event_is_forgotten_first() -> None:
    recent, at = RecentEvents(capacity=2), datetime.now(UTC)
    for key in ("a", "b"):
        recent.remember((key,), SentEvent("ns", key, 1, at, "m"))
    assert recent.repeat_of(("a",), at) is not None
    recent.remember(("c",), SentEvent("ns", "c", 1, at, "m"))
    assert [recent.repeat_of((key,), at) is not None for key in ("a", "b", "c")] == [True, False, True]
