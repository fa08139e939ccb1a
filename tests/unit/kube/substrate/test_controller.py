"""The controller's reconcile: it reads only the cache, and never acts while its own creations are unseen."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from builders import job
from kubetrain.api.manifest import parse_job
from kubetrain.engine.types import Traits
from kubetrain.frameworks.registry import framework_for
from kubetrain.kube.act import Actor
from kubetrain.kube.controller import ChildStores, JobController, ReconcileError
from kubetrain.kube.events import EventRecorder
from kubetrain.kube.metrics import OperatorMetrics
from kubetrain.kube.plan import kubernetes_plan
from kubetrain.kube.render import RenderSettings
from kubetrain.kube.runtime.expectations import Expectations, expectation_key
from kubetrain.kube.runtime.store import ChangeType, ObjectChange, Store

from .fakes import FakeApi

PYTORCH = job("PyTorchJob", {"Master": 1, "Worker": 1}, name="j")
STORED = {
    **PYTORCH.to_wire(),
    "metadata": {"name": "j", "namespace": "default", "uid": "u1", "resourceVersion": "7"},
}


def controller(api: FakeApi, expectations: Expectations, stored: dict[str, Any] = STORED) -> JobController:
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(api.handle), base_url="https://api")
    metrics = OperatorMetrics()
    actor = Actor(http, expectations, EventRecorder(http), metrics, RenderSettings())
    jobs = Store()
    jobs.apply(ChangeType.ADDED, stored)
    children = ChildStores(pods=Store(), services=Store(), pod_groups=None)
    return JobController(
        framework_for(PYTORCH), jobs, children, actor, expectations, metrics, Traits(colocated=False)
    )


async def test_a_new_job_gets_every_pod_and_service_and_its_created_status() -> None:
    api = FakeApi()
    await controller(api, Expectations()).reconcile("default/j")
    posts = sorted(path.rsplit("/", 1)[-1] for method, path, _ in api.requests if method == "POST")
    assert posts == ["pods", "pods", "services", "services"]
    assert [path for method, path, _ in api.requests if method == "PUT"] == [
        "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs/j/status"
    ]


async def test_nothing_is_done_while_a_creation_is_not_yet_seen_by_the_watch() -> None:
    api, expectations = FakeApi(), Expectations()
    expectations.expect_creations(expectation_key("default/j", "Worker", "pods"))
    await controller(api, expectations).reconcile("default/j")
    assert api.requests == []


async def test_the_watch_seeing_the_pod_settles_the_expectation_and_requeues_the_job() -> None:
    expectations = Expectations()
    key = expectation_key("default/j", "Worker", "pods")
    expectations.expect_creations(key)
    jobs = controller(FakeApi(), expectations)
    pod = {"metadata": {"name": "j-worker-0", "namespace": "default"}}
    jobs.on_child_change(ObjectChange(ChangeType.ADDED, None, pod), "pods", "j", "worker")
    assert expectations.satisfied(key)
    assert len(jobs.queue) == 1


def _pod(terminating: bool) -> dict[str, Any]:
    metadata = {"name": "j-worker-0", "namespace": "default", "uid": "p1"}
    return {
        "metadata": {**metadata, "deletionTimestamp": "2026-11-27T21:41:25Z"} if terminating else metadata
    }


def test_a_pod_turning_terminating_on_a_node_that_reports_is_awaited_until_it_goes() -> None:
    expectations = Expectations()
    key = expectation_key("default/j", "Worker", "pods")
    expectations.expect_deletions(key)
    jobs = controller(FakeApi(), expectations)

    jobs.on_child_change(ObjectChange(ChangeType.MODIFIED, _pod(False), _pod(True)), "pods", "j", "worker")
    assert not expectations.satisfied(key)
    jobs.on_child_change(ObjectChange(ChangeType.DELETED, _pod(True), None), "pods", "j", "worker")
    assert expectations.satisfied(key)


def test_a_terminating_pod_on_a_node_that_stopped_reporting_settles_its_deletion() -> None:
    # It stays terminating until its node comes back: the reconcile that forces it off (node-loss timeout,
    # stuck deletion) must not wait for it to be gone.
    expectations = Expectations()
    key = expectation_key("default/j", "Worker", "pods")
    expectations.expect_deletions(key)
    jobs = controller(FakeApi(), expectations)

    jobs.on_node_lost(_pod(True), "j", "Worker")

    assert expectations.satisfied(key)
    assert len(jobs.queue) == 1


def test_a_stranded_pod_force_deleted_settles_that_deletion_when_it_goes() -> None:
    expectations = Expectations()
    key = expectation_key("default/j", "Worker", "pods")
    jobs = controller(FakeApi(), expectations)
    expectations.expect_deletions(key)
    jobs.on_node_lost(_pod(True), "j", "Worker")
    expectations.expect_deletions(key)  # forced off its lost node: deleted again, with grace period 0

    jobs.on_child_change(ObjectChange(ChangeType.DELETED, _pod(True), None), "pods", "j", "worker")

    assert expectations.satisfied(key)


class TerminatingNamespaceApi(FakeApi):
    """Refuses every write as an API server does in a namespace being deleted."""

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        super().handle(request)
        causes = [{"reason": "NamespaceTerminating", "field": "metadata.namespace"}]
        body = {
            "reason": "Forbidden",
            "message": "namespace is being terminated",
            "details": {"causes": causes},
        }
        return httpx2.Response(403, json=body)


async def test_a_job_whose_namespace_is_being_deleted_is_dropped_not_retried_as_an_error() -> None:
    api = TerminatingNamespaceApi()
    jobs = controller(api, Expectations())

    assert await jobs.reconcile("default/j") is None  # no ReconcileError: nothing to retry, no error logged
    assert api.requests  # it did try to create the job's pods and services


async def test_a_refused_write_for_any_other_reason_is_an_error_to_retry() -> None:
    with pytest.raises(ReconcileError, match="403"):
        await controller(FakeApi(status_code=403), Expectations()).reconcile("default/j")


async def test_a_deleted_job_is_forgotten() -> None:
    api = FakeApi()
    jobs = controller(api, Expectations())
    jobs.jobs.apply(ChangeType.DELETED, STORED)
    assert await jobs.reconcile("default/j") is None
    assert api.requests == []


def _newer(stored: dict[str, Any]) -> dict[str, Any]:
    return {**stored, "metadata": {**stored["metadata"], "resourceVersion": "8"}}


class SuspendedMeanwhileApi(FakeApi):
    """Takes the status write (answering it as version 8), and before the operator reads the answer the job's
    watch brings version 9: a client's patch suspending the job, made just after the write."""

    def __init__(self) -> None:
        super().__init__()
        self.jobs: Store | None = None

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        response = super().handle(request)
        if request.method != "PUT" or not request.url.path.endswith("/status"):
            return response
        written = _newer(response.json())
        assert self.jobs is not None
        suspended = {**written, "metadata": {**written["metadata"], "resourceVersion": "9"}}
        run_policy = {**written["spec"]["runPolicy"], "suspend": True}
        suspended["spec"] = {**written["spec"], "runPolicy": run_policy}
        self.jobs.apply(ChangeType.MODIFIED, suspended)
        return httpx2.Response(200, json=written)


async def test_a_status_writes_answer_never_takes_the_cache_back_past_what_the_watch_brought() -> None:
    # CI: the job's suspension never reached the reconciles after it, and its HPA was not removed.
    api = SuspendedMeanwhileApi()
    jobs = controller(api, Expectations())
    api.jobs = jobs.jobs

    await jobs.reconcile("default/j")

    cached = jobs.jobs.get("default/j")
    assert cached is not None
    assert (cached["metadata"]["resourceVersion"], cached["spec"]["runPolicy"]["suspend"]) == ("9", True)


async def test_a_stored_job_the_model_cannot_read_is_failed_as_invalid_spec_once() -> None:
    api = FakeApi()
    jobs = controller(api, Expectations())
    unreadable = {**STORED, "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": "many"}}}}
    jobs.jobs.apply(ChangeType.MODIFIED, _newer(unreadable))
    assert await jobs.reconcile("default/j") is None
    [(method, path, body)] = api.requests
    assert (method, path) == ("PUT", "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs/j/status")
    failed = body["status"]["conditions"][-1]
    assert (failed["type"], failed["reason"]) == ("Failed", "InvalidSpec")
    assert "spec.pytorchReplicaSpecs.Worker.replicas" in failed["message"]


async def test_a_stored_job_with_a_malformed_template_is_failed_without_creating_anything() -> None:
    api = FakeApi()
    jobs = controller(api, Expectations())
    spec = PYTORCH.to_wire()["spec"]
    spec["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"] = [-1]
    jobs.jobs.apply(ChangeType.MODIFIED, _newer({**STORED, "spec": spec}))
    assert await jobs.reconcile("default/j") is None
    assert [method for method, _, _ in api.requests] == ["PUT"]
    failed = api.requests[0][2]["status"]["conditions"][-1]
    assert failed["reason"] == "InvalidSpec"
    assert "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].env[0]" in failed["message"]


def _with_report(job_object: dict[str, Any], version: str, percent: int, **status: Any) -> dict[str, Any]:
    report = {"progressPercentage": percent, "lastUpdatedTime": f"2026-11-25T12:00:{percent:02d}Z"}
    return {
        **job_object,
        "metadata": {**job_object["metadata"], "resourceVersion": version},
        "status": {**(job_object.get("status") or {}), **status, "trainerStatus": report},
    }


def test_a_new_progress_report_alone_does_not_requeue_the_job() -> None:
    jobs = controller(FakeApi(), Expectations())
    old = _with_report(STORED, "8", 10)
    jobs.on_job_change(ObjectChange(ChangeType.MODIFIED, old, _with_report(STORED, "9", 11)))
    assert len(jobs.queue) == 0


def test_a_report_on_a_stalled_job_requeues_it_so_the_condition_clears() -> None:
    stalled = {"conditions": [{"type": "Stalled", "status": "True"}]}
    jobs = controller(FakeApi(), Expectations())
    old = _with_report(STORED, "8", 10, **stalled)
    jobs.on_job_change(ObjectChange(ChangeType.MODIFIED, old, _with_report(STORED, "9", 11, **stalled)))
    assert len(jobs.queue) == 1


def test_a_report_together_with_another_change_requeues_the_job() -> None:
    jobs = controller(FakeApi(), Expectations())
    old = _with_report(STORED, "8", 10)
    new = _with_report({**STORED, "metadata": {**STORED["metadata"], "labels": {"a": "b"}}}, "9", 11)
    jobs.on_job_change(ObjectChange(ChangeType.MODIFIED, old, new))
    assert len(jobs.queue) == 1


def test_a_jobs_first_report_requeues_it_to_arm_the_progress_deadline() -> None:
    jobs = controller(FakeApi(), Expectations())
    old = {**STORED, "metadata": {**STORED["metadata"], "resourceVersion": "8"}}
    jobs.on_job_change(ObjectChange(ChangeType.MODIFIED, old, _with_report(STORED, "9", 1)))
    assert len(jobs.queue) == 1


async def test_a_framework_with_config_files_gets_its_running_workers_hosts() -> None:
    """MPIJob v1's discover_hosts.sh names each running worker: the controller hands the actor their hosts."""
    mpijob = job("MPIJob", {"Launcher": 1, "Worker": 2}, name="m")
    stored = {
        **mpijob.to_wire(),
        "metadata": {"name": "m", "namespace": "default", "uid": "u2", "resourceVersion": "7"},
    }
    api = FakeApi()
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(api.handle), base_url="https://api")
    metrics, expectations = OperatorMetrics(), Expectations()
    actor = Actor(http, expectations, EventRecorder(http), metrics, RenderSettings())
    jobs, pods = Store(), Store()
    jobs.apply(ChangeType.ADDED, stored)
    for obj in kubernetes_plan(parse_job(stored)):
        if obj["kind"] == "Pod":
            name = obj["metadata"]["name"]
            obj["metadata"].update(uid=f"uid-{name}", resourceVersion="8")
            obj["status"] = {"phase": "Running" if name == "m-worker-1" else "Pending"}
            pods.apply(ChangeType.ADDED, obj)
    children = ChildStores(pods=pods, services=Store(), pod_groups=None)
    mpi = JobController(
        framework_for(mpijob), jobs, children, actor, expectations, metrics, Traits(colocated=False)
    )

    await mpi.reconcile("default/m")

    scripts = [
        body["data"]["discover_hosts.sh"]
        for method, path, body in api.requests
        if method in ("POST", "PUT") and path.endswith("/configmaps/m-config")
    ]
    assert scripts == ["#!/bin/sh\necho m-worker-1:1"]


def _expired(uid: str) -> dict[str, Any]:
    """The job, succeeded an hour ago with a TTL of one second."""
    finished = "2026-11-28T03:00:00Z"
    succeeded = {"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded", "message": "done"}
    return {
        **STORED,
        "metadata": {**STORED["metadata"], "uid": uid},
        "spec": {**STORED["spec"], "runPolicy": {"ttlSecondsAfterFinished": 1}},
        "status": {
            "conditions": [{**succeeded, "lastTransitionTime": finished, "lastUpdateTime": finished}],
            "startTime": "2026-11-28T02:00:00Z",
            "completionTime": finished,
        },
    }


def _job_deletions(api: FakeApi) -> list[str]:
    return [path for method, path, _ in api.requests if method == "DELETE" and "/pytorchjobs/" in path]


async def test_a_job_deleted_for_its_ttl_is_not_reconciled_again_before_the_watch_shows_it_gone() -> None:
    api = FakeApi(status_code=200)
    jobs = controller(api, Expectations(), _expired("u1"))

    await jobs.reconcile("default/j")
    await jobs.reconcile("default/j")  # woken again before the watch's DELETED came

    # One deletion, so one decision with its ``Deleted job`` event.
    assert _job_deletions(api) == ["/apis/kubeflow.org/v1/namespaces/default/pytorchjobs/j"]


async def test_a_new_job_of_a_deleted_jobs_name_is_reconciled() -> None:
    api = FakeApi(status_code=200)
    jobs = controller(api, Expectations(), _expired("u1"))
    await jobs.reconcile("default/j")

    jobs.jobs.apply(ChangeType.DELETED, _expired("u1"))
    await jobs.reconcile("default/j")
    jobs.jobs.apply(ChangeType.ADDED, _expired("u2"))
    await jobs.reconcile("default/j")

    assert len(_job_deletions(api)) == 2
