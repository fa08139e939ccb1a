"""Carrying out a Decision: the API calls made, the expectations kept, status written only when changed."""

from __future__ import annotations

import httpx2

from builders import job
from kubetrain.api.common import JobStatus
from kubetrain.engine.types import CreateReplica, Decision, DeleteReplica
from kubetrain.frameworks.base import Autoscaling
from kubetrain.frameworks.registry import framework_for
from kubetrain.kube.act import Actor, Target, render_autoscaler
from kubetrain.kube.events import EventRecorder
from kubetrain.kube.metrics import OperatorMetrics
from kubetrain.kube.render import RenderSettings
from kubetrain.kube.runtime.expectations import Expectations, expectation_key

from .fakes import FakeApi

PYTORCH = job("PyTorchJob", {"Master": 1, "Worker": 1}, name="j")
STORED = {
    **PYTORCH.to_wire(),
    "metadata": {"name": "j", "namespace": "default", "uid": "u1", "resourceVersion": "7"},
}
KEY = "default/j"


def actor(api: FakeApi, expectations: Expectations) -> Actor:
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(api.handle), base_url="https://api")
    return Actor(http, expectations, EventRecorder(http), OperatorMetrics(), RenderSettings())


def target() -> Target:
    return Target(KEY, STORED, PYTORCH, framework_for(PYTORCH))


async def test_an_unchanged_status_is_not_written() -> None:
    api = FakeApi()
    await actor(api, Expectations()).carry_out(target(), Decision(status=PYTORCH.status))
    assert api.requests == []


async def test_a_changed_status_is_written_through_the_status_subresource_with_the_resource_version() -> None:
    api = FakeApi(200)
    status = JobStatus.model_validate({"replicaStatuses": {"Master": {"active": 1}}})
    outcome = await actor(api, Expectations()).carry_out(target(), Decision(status=status))
    [(method, path, body)] = api.requests
    assert (method, path) == ("PUT", "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs/j/status")
    assert body["metadata"]["resourceVersion"] == "7"
    assert body["status"]["replicaStatuses"] == {"Master": {"active": 1}}
    assert outcome.status_written


async def test_a_pod_creation_raises_a_creation_expectation_until_the_watch_sees_it() -> None:
    api, expectations = FakeApi(), Expectations()
    decision = Decision(actions=(CreateReplica("Worker", 0),), status=PYTORCH.status)
    await actor(api, expectations).carry_out(target(), decision)
    [(method, path, body)] = api.requests
    assert (method, path, body["metadata"]["name"]) == (
        "POST",
        "/api/v1/namespaces/default/pods",
        "j-worker-0",
    )
    assert expectations.pending(expectation_key(KEY, "Worker", "pods")) == (1, 0)


async def test_a_refused_creation_lowers_its_expectation_and_is_reported() -> None:
    api, expectations = FakeApi(403), Expectations()
    decision = Decision(actions=(CreateReplica("Worker", 0),), status=PYTORCH.status)
    outcome = await actor(api, expectations).carry_out(target(), decision)
    assert expectations.satisfied(expectation_key(KEY, "Worker", "pods"))
    assert outcome.errors and "403" in outcome.errors[0]


async def test_a_forced_deletion_asks_for_a_zero_grace_period() -> None:
    api = FakeApi(200)
    decision = Decision(actions=(DeleteReplica("Worker", 0, "stuck", force=True),), status=PYTORCH.status)
    await actor(api, Expectations()).carry_out(target(), decision)
    [(method, path, body)] = api.requests
    assert (method, path, body) == (
        "DELETE",
        "/api/v1/namespaces/default/pods/j-worker-0",
        {"gracePeriodSeconds": 0},
    )


def created_status() -> JobStatus:
    condition = {"type": "Created", "status": "True", "reason": "PyTorchJobCreated", "message": "created"}
    return JobStatus.model_validate({"conditions": [condition]})


def created_count(metrics: OperatorMetrics) -> float | None:
    labels = {"job_namespace": "default", "framework": "pytorch"}
    return metrics.registry.get_sample_value("training_operator_jobs_created_total", labels)


async def test_the_created_counter_counts_a_written_transition_once() -> None:
    api, metrics = FakeApi(200), OperatorMetrics()
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(api.handle), base_url="https://api")
    acting = Actor(http, Expectations(), EventRecorder(http), metrics, RenderSettings())
    await acting.carry_out(target(), Decision(status=created_status()))
    assert created_count(metrics) == 1.0


async def test_a_refused_status_write_counts_no_transition() -> None:
    api, metrics = FakeApi(409), OperatorMetrics()
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(api.handle), base_url="https://api")
    acting = Actor(http, Expectations(), EventRecorder(http), metrics, RenderSettings())
    outcome = await acting.carry_out(target(), Decision(status=created_status()))
    assert outcome.errors and not outcome.status_written
    assert not created_count(metrics)


async def test_a_creation_answered_already_exists_expects_nothing_more() -> None:
    # Made by a request whose answer was lost (the API server crashed): the re-listed cache may have seen it
    # before this creation raised its expectation, so no watch event is left to lower it.
    api, expectations = FakeApi(409), Expectations()
    decision = Decision(actions=(CreateReplica("Worker", 0),), status=PYTORCH.status)
    outcome = await actor(api, expectations).carry_out(target(), decision)
    assert expectations.satisfied(expectation_key(KEY, "Worker", "pods"))
    assert (outcome.created, outcome.errors) == (0, [])


def test_an_hpa_carries_no_labels_as_upstreams_and_is_owned_by_its_job() -> None:
    """The operator watches every HPA and keeps the ones its jobs own: one upstream made before a switch is
    found as well as its own."""
    hpa = render_autoscaler(target(), Autoscaling(1, 4, ({"type": "Resource"},)))
    assert "labels" not in hpa["metadata"]
    assert [(r["kind"], r["name"], r["controller"]) for r in hpa["metadata"]["ownerReferences"]] == [
        ("PyTorchJob", "j", True)
    ]
