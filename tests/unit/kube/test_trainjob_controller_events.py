"""The TrainJob controller's Warning when the API server refuses what it applies: the server's own words, as
Kubeflow Trainer quotes them (client-go's error is the status message, without its code)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from kubetrain.frameworks.trainer.builtin import builtin_runtime_documents
from kubetrain.kube.events import EventRecord, EventRecorder
from kubetrain.kube.metrics import OperatorMetrics
from kubetrain.kube.runtime.client import ApiStatusError
from kubetrain.kube.runtime.store import ChangeType, Store
from kubetrain.kube.trainjobs import TrainJobController, TrainJobStores

REFUSAL = (
    'JobSet.jobset.x-k8s.io "tt" is invalid: spec.volumeClaimPolicies: Invalid value: "array": '
    "Value is immutable"
)


class Recorder(EventRecorder):
    def __init__(self, http: httpx.AsyncClient) -> None:
        super().__init__(http)
        self.records: list[EventRecord] = []

    def record(self, record: EventRecord) -> None:
        self.records.append(record)


def _status(code: int, reason: str, message: str) -> httpx.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code}
    return httpx.Response(code, json={**body, "reason": reason, "message": message})


def _api(request: httpx.Request) -> httpx.Response:
    """No snapshot yet; applies answered with what was sent, the JobSet's refused."""
    if request.method == "GET":
        return _status(404, "NotFound", "not found")
    if "/jobsets/" in request.url.path:
        return _status(422, "Invalid", REFUSAL)
    applied: dict[str, Any] = json.loads(request.content)
    return httpx.Response(200, json={**applied, "metadata": {**applied["metadata"], "resourceVersion": "2"}})


async def test_a_refused_apply_is_a_warning_quoting_the_api_server_as_trainer_does() -> None:
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tt", "namespace": "ns", "uid": "u-1", "resourceVersion": "1"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 1}},
    }
    stores = TrainJobStores(Store(), Store(), Store(), Store())
    stores.trainjobs.apply(ChangeType.ADDED, trainjob)
    for runtime in builtin_runtime_documents():
        stores.cluster_runtimes.apply(ChangeType.ADDED, {**runtime, "metadata": {**runtime["metadata"]}})
    async with httpx.AsyncClient(transport=httpx.MockTransport(_api), base_url="https://api") as http:
        recorder = Recorder(http)
        controller = TrainJobController(stores, http, recorder, OperatorMetrics())

        with pytest.raises(ApiStatusError):
            await controller.reconcile("ns/tt")

    [warning] = recorder.records
    assert (warning.type, warning.reason) == ("Warning", "TrainJobResourcesCreationFailed")
    assert warning.message == f"TrainJob resources reconciliation failed: {REFUSAL}"
