"""The event recorder: events wait while the controllers are busy, but never past the hold limit."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import httpx2

from kubetrain.kube.events import MAX_HOLD_SECONDS, EventRecord, EventRecorder

from .fakes import FakeApi

JOB = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "j", "namespace": "ns"}}


def recorder(api: FakeApi, busy: list[bool]) -> EventRecorder:
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(api.handle), base_url="https://api")
    return EventRecorder(http, busy=lambda: busy[0])


def created(at: datetime | None = None) -> EventRecord:
    return EventRecord(
        JOB,
        "Normal",
        "SuccessfulCreatePod",
        "Created pod: j-master-0",
        "pytorchjob-controller",
        at=at or datetime.now(UTC),
    )


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
