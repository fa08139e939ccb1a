"""The previous run's log of a crash-looping container: read in the background once per restart, remembered in
a bounded cache, and quoted by the job's CrashLoop event once in."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2

from builders import job
from kubetrain.engine.types import Traits
from kubetrain.frameworks.registry import framework_for
from kubetrain.kube.act import Actor
from kubetrain.kube.controller import ChildStores, JobController
from kubetrain.kube.events import EventRecord, EventRecorder
from kubetrain.kube.metrics import OperatorMetrics
from kubetrain.kube.previous_logs import PreviousLogs
from kubetrain.kube.render import RenderSettings
from kubetrain.kube.runtime.expectations import Expectations
from kubetrain.kube.runtime.store import ChangeType, Store

POD = {"metadata": {"namespace": "ns", "name": "j-worker-0", "uid": "u1"}}


class LogServer:
    """Answers log reads with ``body`` (or ``status``), recording each request's path and query."""

    def __init__(self, body: str = "line 1\nline 2\n", status: int = 200) -> None:
        self.body, self.status = body, status
        self.reads: list[tuple[str, dict[str, str]]] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.path.endswith("/log"):
            self.reads.append((request.url.path, dict(request.url.params)))
            return httpx2.Response(self.status, text=self.body)
        return httpx2.Response(200, json={})

    def http(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle), base_url="https://api")


async def read(logs: PreviousLogs, key: Any) -> str | None:
    done = asyncio.Event()
    first = logs.tail(key, done.set)
    if first is not None:
        return first
    await asyncio.wait_for(done.wait(), 5)
    return logs.tail(key, lambda: None)


async def test_the_previous_runs_tail_is_read_once_per_restart_and_then_remembered() -> None:
    server = LogServer()
    logs = PreviousLogs(server.http())
    key = PreviousLogs.key(POD, "pytorch", 3)

    assert await read(logs, key) == "line 1\nline 2\n"
    assert await read(logs, key) == "line 1\nline 2\n"
    assert server.reads == [
        (
            "/api/v1/namespaces/ns/pods/j-worker-0/log",
            {"container": "pytorch", "previous": "true", "tailLines": "20", "limitBytes": "8192"},
        )
    ]


async def test_the_next_restart_is_read_again() -> None:
    server = LogServer()
    logs = PreviousLogs(server.http())

    await read(logs, PreviousLogs.key(POD, "pytorch", 3))
    await read(logs, PreviousLogs.key(POD, "pytorch", 4))

    assert len(server.reads) == 2


async def test_a_log_that_cannot_be_read_is_remembered_as_empty_and_not_asked_for_again() -> None:
    server = LogServer(status=404)
    logs = PreviousLogs(server.http())
    key = PreviousLogs.key(POD, "pytorch", 3)

    assert await read(logs, key) == ""
    assert await read(logs, key) == ""
    assert len(server.reads) == 1


async def test_the_cache_forgets_the_least_recently_used_tails_beyond_its_capacity() -> None:
    logs = PreviousLogs(LogServer().http(), capacity=2)

    for restart in range(5):
        await read(logs, PreviousLogs.key(POD, "pytorch", restart))

    assert len(logs) == 2


async def test_closing_cancels_the_reads_in_flight() -> None:
    never = asyncio.Event()

    class Hanging(LogServer):
        def http(self) -> httpx2.AsyncClient:
            async def hang(request: httpx2.Request) -> httpx2.Response:
                await never.wait()
                return httpx2.Response(200)

            return httpx2.AsyncClient(transport=httpx2.MockTransport(hang), base_url="https://api")

    logs = PreviousLogs(Hanging().http())
    logs.tail(PreviousLogs.key(POD, "pytorch", 1), lambda: None)

    await asyncio.wait_for(logs.close(), 5)


# --- in the operator's reconcile -------------------------------------------------------------------------


class RecordedEvents(EventRecorder):
    def __init__(self, http: httpx2.AsyncClient) -> None:
        super().__init__(http)
        self.records: list[EventRecord] = []

    def record(self, record: EventRecord) -> None:
        self.records.append(record)


PYTORCH = job("PyTorchJob", {"Master": 1}, name="j", namespace="ns")
STORED = {
    **PYTORCH.to_wire(),
    "metadata": {"name": "j", "namespace": "ns", "uid": "job-uid", "resourceVersion": "7"},
}
CRASHING_MASTER = {
    "metadata": {
        "name": "j-master-0",
        "namespace": "ns",
        "uid": "pod-uid",
        "labels": {
            "training.kubeflow.org/replica-type": "master",
            "training.kubeflow.org/replica-index": "0",
            "training.kubeflow.org/job-name": "j",
        },
        "ownerReferences": [{"uid": "job-uid", "controller": True, "kind": "PyTorchJob", "name": "j"}],
    },
    "spec": {"containers": [{"name": "pytorch", "image": "trainer:1"}]},
    "status": {
        "phase": "Running",
        "containerStatuses": [
            {
                "name": "pytorch",
                "restartCount": 3,
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                "lastState": {"terminated": {"exitCode": 3, "reason": "Error"}},
            }
        ],
    },
}


async def test_the_crash_loop_event_quotes_the_previous_runs_log_once_it_is_read() -> None:
    server = LogServer("Traceback (most recent call last):\nKeyError: 'lr'\n")
    http = server.http()
    events = RecordedEvents(http)
    jobs, pods = Store(), Store()
    jobs.apply(ChangeType.ADDED, STORED)
    pods.apply(ChangeType.ADDED, CRASHING_MASTER)
    controller = JobController(
        framework_for(PYTORCH),
        jobs,
        ChildStores(pods=pods, services=Store(), pod_groups=None),
        Actor(http, Expectations(), events, OperatorMetrics(), RenderSettings()),
        Expectations(),
        OperatorMetrics(),
        Traits(colocated=False),
        previous_logs=PreviousLogs(http),
    )

    await controller.reconcile("ns/j")
    first = [r.message for r in events.records if r.reason == "CrashLoop"]
    await asyncio.wait_for(controller.queue.get(), 5)  # the read is in: the job is queued again
    await controller.reconcile("ns/j")
    second = [r.message for r in events.records if r.reason == "CrashLoop"][len(first) :]

    assert first == [
        "pod j-master-0 is in a crash loop: container pytorch exited with code 3 (Error) and is restarted "
        "again and again. Fix: correct what its output shows (its log holds the whole run); "
        "runPolicy.backoffLimit bounds the restarts"
    ]
    assert second == [
        "pod j-master-0 is in a crash loop: container pytorch exited with code 3 (Error) and is restarted "
        "again and again; its last lines: \"Traceback (most recent call last): | KeyError: 'lr'\". Fix: "
        "correct what its output shows (its log holds the whole run); runPolicy.backoffLimit bounds the "
        "restarts"
    ]
    assert len(server.reads) == 1
