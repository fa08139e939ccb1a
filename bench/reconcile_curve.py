"""One job's reconcile time against its replica count: the operator's own ``JobController.reconcile`` on
caches holding what the API server would hold, with the API calls answered at once in memory.

What is timed is everything the operator does for one reconcile but wait for the network: reading the
caches (the job, its pods and services by owner), parsing and admitting the job, ``observe``, the engine,
planning and rendering each child it creates, and building each request, the crash-loop log reader's and the
first-failure keeper's looks at the replicas, under the operator's garbage
collector settings (``kube.runtime.collector``: its young threshold; survivors frozen once caches fill).
The API server is replaced by an in-memory answer (``InstantApi``: a create returns its body, a status
write returns the job), so the figure is CPU time that grows with the job, not round trips. Three states
per size:

- **create all**: the job just posted, nothing exists: 1 + W pods and services to create;
- **all running**: every pod exists and runs (the pods are those the first reconcile rendered, as the API
  server returns them: uid, resourceVersion, ``status.phase: Running``, Ready; stored as the informers
  store them, compacted by ``kube.compact``), status up to date:
  the reconcile that runs on every change of any pod of a running job;
- **one pod changed**: the same, with one pod at a new resourceVersion and the stored status one active
  worker behind: one status write.

The last two are timed on a controller that has reconciled the same state once before, untimed, as the
operator's has by the time a running job's pod changes (what it keeps between reconciles counts:
``kube.observe.ChildObservations``).

Usage::

    .venv/bin/python bench/reconcile_curve.py --replicas 100 500 1000 2000 5000 --repeat 5 --markdown
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import logging
import os
import statistics
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from kubetrain.engine.types import Traits
from kubetrain.frameworks.registry import framework_for_kind
from kubetrain.kube.act import Actor
from kubetrain.kube.compact import compact_pod, compact_service
from kubetrain.kube.controller import ChildStores, JobController
from kubetrain.kube.events import EventRecorder
from kubetrain.kube.failures import FailureKeeper
from kubetrain.kube.metrics import OperatorMetrics
from kubetrain.kube.previous_logs import PreviousLogs
from kubetrain.kube.render import RenderSettings
from kubetrain.kube.runtime import collector
from kubetrain.kube.runtime.expectations import Expectations
from kubetrain.kube.runtime.http import ApiResponse, HttpResponse, QueryParams, StreamResponse
from kubetrain.kube.runtime.store import ChangeType, Store

NAMESPACE = "bench"
UID = "0d6f3c2e-5f5b-4c7e-9a55-3c9b2f0e1a11"


class InstantApi:
    """An API server that answers every call at once: creates echo their body with server fields, a status
    write returns the job; everything it was sent is kept, to be stored as the watch would bring it."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self._version = 1000

    def _answer(self, code: int, body: Any) -> ApiResponse:
        return ApiResponse(code, "OK", json.dumps(body).encode())

    def _with_server_fields(self, body: Mapping[str, Any]) -> dict[str, Any]:
        self._version += 1
        stored = dict(body)
        stored["metadata"] = {
            **body.get("metadata", {}),
            "uid": f"uid-{self._version}",
            "resourceVersion": str(self._version),
            "creationTimestamp": "2026-11-26T06:00:00Z",
        }
        return stored

    async def get(self, url: str, *, params: QueryParams | None = None) -> HttpResponse:
        return self._answer(200, {"items": []})

    async def post(self, url: str, *, json: Any = None) -> HttpResponse:
        stored = self._with_server_fields(json)
        if url.endswith("/pods") or url.endswith("/services"):
            self.created.append(stored)
        return self._answer(201, stored)

    async def put(self, url: str, *, json: Any = None) -> HttpResponse:
        return self._answer(200, self._with_server_fields(json))

    async def patch(
        self,
        url: str,
        *,
        content: bytes | str | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> HttpResponse:
        return self._answer(200, {})

    async def delete(self, url: str) -> HttpResponse:
        return self._answer(200, {})

    async def request(self, method: str, url: str, *, json: Any = None) -> HttpResponse:
        return self._answer(200, {})

    def stream(
        self, method: str, url: str, *, params: QueryParams | None = None, timeout: float | None = None
    ) -> AbstractAsyncContextManager[StreamResponse]:
        raise NotImplementedError("the bench opens no watch")


def stored_job(workers: int, status: Mapping[str, Any] | None = None) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "pytorch", "image": "example.com/trainer:1"}]}}
    job: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": "big",
            "namespace": NAMESPACE,
            "uid": UID,
            "resourceVersion": "1",
            "generation": 1,
            "creationTimestamp": "2026-11-26T06:00:00Z",
        },
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": template},
                "Worker": {"replicas": workers, "template": template},
            }
        },
    }
    if status is not None:
        job["status"] = dict(status)
    return job


def running(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A created pod as a kubelet would have it once it runs (bound, Ready, its container running)."""
    ran = copy.deepcopy(dict(pod))
    ran["spec"]["nodeName"] = "node-0"
    container = ran["spec"]["containers"][0]["name"]
    ran["status"] = {
        "phase": "Running",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-26T06:00:01Z"},
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-26T06:00:05Z"},
        ],
        "containerStatuses": [
            {
                "name": container,
                "ready": True,
                "restartCount": 0,
                "image": "example.com/trainer:1",
                "imageID": "example.com/trainer@sha256:" + "a" * 64,
                "state": {"running": {"startedAt": "2026-11-26T06:00:04Z"}},
            }
        ],
    }
    return ran


class Bench:
    """A controller on fresh caches, its API answered by ``InstantApi``."""

    def __init__(self, job: dict[str, Any], children: Sequence[dict[str, Any]] = ()) -> None:
        self.api = InstantApi()
        self.jobs = Store()
        self.pods = Store()
        self.services = Store()
        self.jobs.apply(ChangeType.ADDED, job)
        for child in children:  # as the informers store them
            if child["kind"] == "Pod":
                self.pods.apply(ChangeType.ADDED, compact_pod(copy.deepcopy(child)))
            else:
                self.services.apply(ChangeType.ADDED, compact_service(copy.deepcopy(child)))
        metrics = OperatorMetrics()
        expectations = Expectations()
        events = EventRecorder(self.api)
        actor = Actor(self.api, expectations, events, metrics, RenderSettings())
        framework = framework_for_kind("kubeflow.org/v1", "PyTorchJob")
        self.controller = JobController(
            framework,
            self.jobs,
            ChildStores(self.pods, self.services, None),
            actor,
            expectations,
            metrics,
            Traits(colocated=False, batch_jobs=True),
            # As the operator has them: each looks at every replica on every reconcile.
            previous_logs=PreviousLogs(self.api),
            failures=FailureKeeper(self.api, self.api, events),
        )

    async def reconcile(self) -> float:
        started = time.process_time()
        await self.controller.reconcile(f"{NAMESPACE}/big")
        return time.process_time() - started


async def created_children(workers: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """What the first reconcile creates, and the status it writes once they all run."""
    bench = Bench(stored_job(workers))
    await bench.reconcile()
    children = [running(c) if c["kind"] == "Pod" else c for c in bench.api.created]
    settled = Bench(stored_job(workers), children)
    await settled.reconcile()
    status = settled.jobs.get(f"{NAMESPACE}/big")
    assert status is not None
    return children, dict(status.get("status") or {})


def next_version(pod: Mapping[str, Any]) -> dict[str, Any]:
    changed = copy.deepcopy(dict(pod))
    changed["metadata"]["resourceVersion"] += "1"
    return changed


def behind_by_one(status: Mapping[str, Any]) -> dict[str, Any]:
    changed = copy.deepcopy(dict(status))
    changed["replicaStatuses"]["Worker"]["active"] -= 1
    return changed


async def measure(replicas: int, repeat: int) -> dict[str, float]:
    workers = replicas - 1
    children, status = await created_children(workers)
    collector.freeze_survivors()  # as the operator does once its caches are filled
    samples: dict[str, list[float]] = {"create all": [], "all running": [], "one pod changed": []}
    for _ in range(repeat):
        samples["create all"].append(await Bench(stored_job(workers)).reconcile())
        settled = Bench(stored_job(workers, status), children)
        await settled.reconcile()
        samples["all running"].append(await settled.reconcile())
        changed = Bench(stored_job(workers, status), children)
        await changed.reconcile()
        changed.jobs.apply(ChangeType.MODIFIED, stored_job(workers, behind_by_one(status)))
        last_pod = next(child for child in reversed(children) if child["kind"] == "Pod")
        changed.pods.apply(ChangeType.MODIFIED, compact_pod(next_version(last_pod)))
        samples["one pod changed"].append(await changed.reconcile())
    return {state: statistics.median(values) for state, values in samples.items()}


def markdown(rows: dict[int, dict[str, float]]) -> str:
    states = list(next(iter(rows.values())))
    smallest = min(rows)
    lines = [
        "| replicas | " + " | ".join(f"{s} (per replica)" for s in states) + " |",
        "|---|" + "---|" * len(states),
    ]
    for replicas, times in rows.items():
        cells = [f"{times[s] * 1e3:.1f} ms ({times[s] / replicas * 1e6:.0f} µs)" for s in states]
        lines.append(f"| {replicas:,} | " + " | ".join(cells) + " |")
    growth = {s: (rows[max(rows)][s] / max(rows)) / (rows[smallest][s] / smallest) for s in states}
    lines.append("")
    lines.append(
        f"Per-replica cost at {max(rows):,} over {smallest:,}: "
        + ", ".join(f"{s} {g:.2f}x" for s, g in growth.items())
        + f" (1.00x is linear). Load average {os.getloadavg()[0]:.1f}."
    )
    return "\n".join(lines)


async def run(sizes: list[int], repeat: int) -> dict[int, dict[str, float]]:
    return {replicas: await measure(replicas, repeat) for replicas in sizes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, nargs="+", default=[100, 500, 1000, 2000, 5000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the recorder's queue fills at 5,000 replicas: no sender runs here
    collector.tune(collector.DEFAULT_YOUNG_THRESHOLD)  # the operator's collector settings
    rows = asyncio.run(run(args.replicas, args.repeat))
    if args.markdown:
        print(markdown(rows))
    else:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
