"""What the TrainJob controller applies when its JobSet cache lags behind its own apply: a reconcile woken
before the watch brings the JobSet it just made does not plan one anew (JobSet would refuse the runtime's
``volumeClaimPolicies`` again as a change to an immutable field)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from kubetrain.frameworks.trainer.builtin import builtin_runtime_documents
from kubetrain.kube.events import EventRecord, EventRecorder
from kubetrain.kube.metrics import OperatorMetrics
from kubetrain.kube.runtime.store import ChangeType, ObjectChange, Store
from kubetrain.kube.trainjobs import TrainJobController, TrainJobStores

RETENTION = {"whenDeleted": "Delete"}
"""What JobSet's webhook adds to each volume claim policy it stores."""


class Recorder(EventRecorder):
    def __init__(self, http: httpx.AsyncClient) -> None:
        super().__init__(http)
        self.records: list[EventRecord] = []

    def record(self, record: EventRecord) -> None:
        self.records.append(record)


class ApiServer:
    """Answers each apply with what was sent, stored (a resourceVersion; a JobSet with JobSet's defaults); no
    object exists to be read."""

    def __init__(self) -> None:
        self.applied: list[dict[str, Any]] = []
        self.version = 1

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404}
            return httpx.Response(404, json={**body, "reason": "NotFound", "message": "not found"})
        sent: dict[str, Any] = json.loads(request.content)
        self.version += 1
        stored = {**sent, "metadata": {**(sent.get("metadata") or {}), "resourceVersion": str(self.version)}}
        if sent.get("kind") == "JobSet":
            self.applied.append(sent)
            policies = stored["spec"].get("volumeClaimPolicies") or []
            stored["spec"] = {
                **stored["spec"],
                "volumeClaimPolicies": [{**policy, "retentionPolicy": RETENTION} for policy in policies],
            }
        return httpx.Response(200, json=stored)


TRAINJOB = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "tt", "namespace": "ns", "uid": "u-1", "resourceVersion": "1"},
    "spec": {"runtimeRef": {"name": "torchtune-llama3.2-1b"}, "trainer": {"numNodes": 1}},
}


def _stores() -> TrainJobStores:
    stores = TrainJobStores(Store(), Store(), Store(), Store())
    stores.trainjobs.apply(ChangeType.ADDED, TRAINJOB)
    for runtime in builtin_runtime_documents():
        stores.cluster_runtimes.apply(ChangeType.ADDED, {**runtime, "metadata": {**runtime["metadata"]}})
    return stores


async def test_a_jobset_just_applied_is_not_applied_again_before_the_cache_holds_it() -> None:
    api = ApiServer()
    async with httpx.AsyncClient(transport=httpx.MockTransport(api), base_url="https://api") as http:
        recorder = Recorder(http)
        controller = TrainJobController(_stores(), http, recorder, OperatorMetrics())
        await controller.reconcile("ns/tt")
        await controller.reconcile("ns/tt")  # the JobSet's ADDED not in the cache yet

    assert len(api.applied) == 1
    assert [r.reason for r in recorder.records if r.type == "Warning"] == []


async def test_a_jobset_deleted_after_its_apply_is_made_anew() -> None:
    api = ApiServer()
    async with httpx.AsyncClient(transport=httpx.MockTransport(api), base_url="https://api") as http:
        stores = _stores()
        controller = TrainJobController(stores, http, Recorder(http), OperatorMetrics())
        await controller.reconcile("ns/tt")
        [made] = api.applied
        owned = {**made, "metadata": {**made["metadata"], "namespace": "ns", "resourceVersion": "3"}}
        controller.on_owned_change(ObjectChange(ChangeType.DELETED, owned, None))
        await controller.reconcile("ns/tt")

    assert len(api.applied) == 2
