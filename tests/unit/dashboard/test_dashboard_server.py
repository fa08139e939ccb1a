"""The Jobs view's server against a backend whose watch the test drives: what a page is sent, live; who may
see and do what; the guards against other sites. Real backends: tests/cluster/dashboard and tests/browser."""

from __future__ import annotations

import asyncio
import json
import queue
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from kubetrain.api.summary import NodeTally
from kubetrain.dashboard.access import Attributes, OwnCredentials, ReviewedAccess
from kubetrain.dashboard.server import CSRF_HEADER, Dashboard
from kubetrain.dashboard.sources import Source
from kubetrain.frameworks.trainer.builtin import builtin_runtimes
from kubetrain.sdk.backends.base import JobWatchEvent, WatchEventType
from kubetrain.sdk.client import TrainingClient

HOST = "127.0.0.1"


def wire(name: str, namespace: str = "team-a", **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": "2026-11-01T00:00:00Z"},
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2}}},
        "status": status,
    }


class ScriptedWatch:
    """A watch whose events the test puts, as a backend's thread would yield them."""

    def __init__(self) -> None:
        self.events: queue.Queue[JobWatchEvent | None] = queue.Queue()

    def __iter__(self) -> Iterator[JobWatchEvent]:
        while (event := self.events.get()) is not None:
            yield event

    def close(self) -> None:
        self.events.put(None)


class ScriptedBackend:
    default_namespace = "default"

    def __init__(self) -> None:
        self.scripted = ScriptedWatch()
        self.calls: list[tuple[str, Any]] = []

    def watch(self, kind: object, namespace: object) -> ScriptedWatch:
        return self.scripted

    def patch(self, kind: Any, namespace: str, name: str, patch: Any) -> Any:
        self.calls.append(("patch", (namespace, name, patch)))
        return None

    def delete(self, kind: Any, namespace: str, name: str, **options: Any) -> None:
        self.calls.append(("delete", (namespace, name)))

    def training_runtime(self, trainjob: Any) -> Any:
        """The cluster's runtimes: Trainer's built-in ones, as the chart installs them."""
        return builtin_runtimes()[trainjob.spec.runtime_ref.name]

    def create_trainjob(self, trainjob: Any, runtimes: Any, *, dry_run: bool = False) -> Any:
        self.calls.append(("create", (trainjob.namespace, trainjob.name)))
        return trainjob


class Reviewer:
    """The API server's answers for one user who may list, get and patch PyTorchJobs in team-a only."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, Attributes]] = []
        self.fail = False

    def review_access(self, user: str, groups: tuple[str, ...], **attributes: Any) -> bool:
        self.asked.append((user, Attributes(**attributes)))
        if self.fail:
            raise RuntimeError("the API server is down")
        return user == "alice@example.com" and attributes["namespace"] == "team-a"


def client_with(backend: ScriptedBackend, tmp_path: Path) -> TrainingClient:
    client = TrainingClient(backend="local", state_dir=tmp_path)
    client.backend = backend  # type: ignore[assignment]
    client.backend_name = "kubernetes"  # plans as the operator would render the job
    return client


@pytest.fixture
def backend() -> ScriptedBackend:
    return ScriptedBackend()


async def served(dashboard: Dashboard) -> AsyncIterator[TestClient[Any, Any]]:
    server = TestServer(dashboard.application(), host=HOST)
    async with TestClient(server) as client:
        dashboard.allowed_hosts = frozenset({f"{HOST}:{server.port}"})
        yield client


@pytest.fixture
async def local_view(backend: ScriptedBackend, tmp_path: Path) -> AsyncIterator[TestClient[Any, Any]]:
    source = Source("cluster", client_with(backend, tmp_path), None)
    async for client in served(Dashboard({"cluster": source}, OwnCredentials(), allowed_hosts=None)):
        yield client


@pytest.fixture
def reviewer() -> Reviewer:
    return Reviewer()


@pytest.fixture
async def kubeflow_view(
    backend: ScriptedBackend, reviewer: Reviewer, tmp_path: Path
) -> AsyncIterator[TestClient[Any, Any]]:
    source = Source("cluster", client_with(backend, tmp_path), None)
    access = ReviewedAccess(reviewer, "kubeflow-userid", prefix="accounts.google.com:")
    async for client in served(Dashboard({"cluster": source}, access, allowed_hosts=None)):
        yield client


ALICE = {"kubeflow-userid": "accounts.google.com:alice@example.com"}


async def sse(response: Any) -> AsyncIterator[tuple[str, Any]]:
    while True:
        block = (await asyncio.wait_for(response.content.readuntil(b"\n\n"), 5)).decode()
        if block.startswith(":"):
            continue
        lines = dict(line.split(": ", 1) for line in block.strip().splitlines())
        yield lines["event"], json.loads(lines["data"])


def listed(backend: ScriptedBackend, *jobs: dict[str, Any]) -> None:
    for job in jobs:
        backend.scripted.events.put(JobWatchEvent(WatchEventType.ADDED, job, 0))
    backend.scripted.events.put(JobWatchEvent(WatchEventType.SYNCED))


async def csrf_headers(client: TestClient[Any, Any], **extra: str) -> dict[str, str]:
    session = await client.get("/api/session", headers=extra)
    return {CSRF_HEADER: session.headers[CSRF_HEADER], **extra}


# --- the list, live --------------------------------------------------------------------------------


async def test_the_list_stream_starts_with_every_job_then_sends_each_change(
    local_view: TestClient[Any, Any], backend: ScriptedBackend
) -> None:
    listed(backend, wire("a"))
    await asyncio.sleep(0.2)
    response = await local_view.get("/api/stream")
    events = sse(response)
    name, snapshot = await anext(events)
    assert (name, [row["name"] for row in snapshot["jobs"]]) == ("snapshot", ["a"])
    running = [{"type": "Running", "status": "True"}]
    backend.scripted.events.put(JobWatchEvent(WatchEventType.MODIFIED, wire("a", conditions=running), 3))
    name, changes = await anext(events)
    assert name == "changes"
    [row] = changes["upserts"]
    assert (row["state"], row["restarts"], row["replicas"]) == ("Running", 3, "Worker 0/2")
    backend.scripted.events.put(JobWatchEvent(WatchEventType.DELETED, wire("a"), 3))
    _, gone = await anext(events)
    assert gone["deletes"] == ["cluster/team-a/pytorchjobs.v1/a"]
    response.close()


async def test_a_row_shows_what_kubetrain_get_prints(
    local_view: TestClient[Any, Any], backend: ScriptedBackend
) -> None:
    report = {"progressPercentage": 40, "metrics": [{"name": "loss", "value": "0.3"}]}
    listed(backend, wire("a", trainerStatus=report))
    await asyncio.sleep(0.2)
    response = await local_view.get("/api/jobs/cluster/team-a/pytorchjobs.v1/a")
    row = (await response.json())["row"]
    assert (row["progressText"], row["metrics"]) == ("40%", [{"name": "loss", "value": "0.3"}])


async def test_a_job_page_is_sent_again_when_its_job_changes(
    local_view: TestClient[Any, Any], backend: ScriptedBackend
) -> None:
    listed(backend, wire("a"), wire("b"))
    response = await local_view.get("/api/jobs/cluster/team-a/pytorchjobs.v1/a/stream")
    events = sse(response)
    assert (await anext(events))[0] == "job"
    backend.scripted.events.put(JobWatchEvent(WatchEventType.MODIFIED, wire("b", conditions=[]), 0))
    failed = [{"type": "Failed", "status": "True", "reason": "OOM", "message": "worker-1 ran out of memory"}]
    backend.scripted.events.put(JobWatchEvent(WatchEventType.MODIFIED, wire("a", conditions=failed), 0))
    name, detail = await anext(events)
    assert (name, detail["row"]["name"], detail["conditions"][0]["reason"]) == ("job", "a", "OOM")
    backend.scripted.events.put(JobWatchEvent(WatchEventType.DELETED, wire("a"), 0))
    assert (await anext(events))[0] == "deleted"


async def test_an_unknown_job_is_404(local_view: TestClient[Any, Any], backend: ScriptedBackend) -> None:
    listed(backend)
    response = await local_view.get("/api/jobs/cluster/team-a/pytorchjobs.v1/nope")
    assert response.status == 404
    assert "not found" in (await response.json())["error"]


async def test_a_source_that_cannot_be_reached_says_why(
    local_view: TestClient[Any, Any], backend: ScriptedBackend
) -> None:
    listed(backend)
    backend.scripted.events.put(JobWatchEvent(WatchEventType.UNAVAILABLE, message="connection refused"))
    await asyncio.sleep(0.2)
    [source] = (await (await local_view.get("/api/session")).json())["sources"]
    assert (source["reachable"], source["message"]) == (False, "connection refused")


# --- actions and their guards ----------------------------------------------------------------------


async def test_suspend_with_the_pages_token_patches_the_job(
    local_view: TestClient[Any, Any], backend: ScriptedBackend
) -> None:
    listed(backend, wire("a"))
    headers = await csrf_headers(local_view)
    response = await local_view.post("/api/jobs/cluster/team-a/pytorchjobs.v1/a/suspend", headers=headers)
    assert response.status == 200
    assert backend.calls == [("patch", ("team-a", "a", {"spec": {"runPolicy": {"suspend": True}}}))]


async def test_an_action_without_the_csrf_token_is_refused(
    local_view: TestClient[Any, Any], backend: ScriptedBackend
) -> None:
    listed(backend, wire("a"))
    await local_view.get("/api/session")  # the cookie is set, but the header is not sent
    response = await local_view.delete("/api/jobs/cluster/team-a/pytorchjobs.v1/a")
    assert response.status == 403
    assert backend.calls == []


async def test_an_action_from_another_origin_is_refused_even_with_the_token(
    local_view: TestClient[Any, Any], backend: ScriptedBackend
) -> None:
    listed(backend, wire("a"))
    headers = await csrf_headers(local_view, Origin="https://evil.example")
    response = await local_view.delete("/api/jobs/cluster/team-a/pytorchjobs.v1/a", headers=headers)
    assert response.status == 403
    assert "cross-site" in (await response.json())["error"]
    assert backend.calls == []


async def test_a_request_naming_another_host_is_refused(local_view: TestClient[Any, Any]) -> None:
    response = await local_view.get("/api/session", headers={"Host": f"rebound.example:{local_view.port}"})
    assert response.status == 421


async def test_every_answer_forbids_loading_anything_from_elsewhere(local_view: TestClient[Any, Any]) -> None:
    page = await local_view.get("/")
    policy = page.headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy
    assert page.headers["X-Content-Type-Options"] == "nosniff"


async def test_the_page_and_its_assets_come_from_the_package(local_view: TestClient[Any, Any]) -> None:
    page = await (await local_view.get("/")).text()
    assert 'src="static/app.js"' in page
    script = await local_view.get("/static/app.js")
    assert (script.status, script.content_type) == (200, "text/javascript")
    assert (await local_view.get("/static/../server.py")).status == 404


# --- plan and create -------------------------------------------------------------------------------

MPI_JOB = """
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: pi}
spec:
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template: {spec: {containers: [{name: mpi, image: mpi:1, command: [mpirun, python, pi.py]}]}}
    Worker:
      replicas: 2
      template: {spec: {containers: [{name: mpi, image: mpi:1}]}}
"""


async def test_the_plan_shows_each_pod_and_its_env_and_no_secret_data(
    local_view: TestClient[Any, Any],
) -> None:
    headers = await csrf_headers(local_view)
    response = await local_view.post(
        "/api/plan", json={"yaml": MPI_JOB, "namespace": "team-a"}, headers=headers
    )
    assert response.status == 200, await response.text()
    plan = await response.json()
    assert sorted(p["name"] for p in plan["pods"]) == ["pi-launcher", "pi-worker-0", "pi-worker-1"]
    assert {"kind": "Secret", "name": "pi-ssh"} in plan["objects"]
    text = json.dumps(plan)
    assert "PRIVATE KEY" not in text and 'ssh-privatekey": "' not in text


async def test_an_invalid_manifest_is_refused_naming_the_field(local_view: TestClient[Any, Any]) -> None:
    headers = await csrf_headers(local_view)
    bad = MPI_JOB.replace("replicas: 2", "replicas: -2")
    response = await local_view.post("/api/plan", json={"yaml": bad}, headers=headers)
    assert response.status == 422
    assert any("replicas" in e for e in (await response.json())["errors"])


# --- behind the Kubeflow Central Dashboard ---------------------------------------------------------


async def test_a_request_without_the_user_header_is_401(kubeflow_view: TestClient[Any, Any]) -> None:
    for path in ("/", "/api/session", "/api/stream", "/api/jobs/cluster/team-a/pytorchjobs.v1/a"):
        assert (await kubeflow_view.get(path)).status == 401, path


async def test_the_user_sees_only_the_jobs_of_namespaces_they_may_list(
    kubeflow_view: TestClient[Any, Any], backend: ScriptedBackend, reviewer: Reviewer
) -> None:
    listed(backend, wire("mine", "team-a"), wire("theirs", "team-b"))
    await asyncio.sleep(0.2)
    response = await kubeflow_view.get("/api/stream", headers=ALICE)
    _, snapshot = await anext(sse(response))
    assert [row["name"] for row in snapshot["jobs"]] == ["mine"]
    assert (
        "alice@example.com",
        Attributes("list", "pytorchjobs", "team-b", "kubeflow.org"),
    ) in reviewer.asked
    response.close()


async def test_another_namespaces_job_logs_and_actions_are_403_and_show_nothing(
    kubeflow_view: TestClient[Any, Any], backend: ScriptedBackend
) -> None:
    listed(backend, wire("theirs", "team-b"))
    headers = await csrf_headers(kubeflow_view, **ALICE)
    job = "/api/jobs/cluster/team-b/pytorchjobs.v1/theirs"
    for method, path in [
        ("GET", job),
        ("GET", f"{job}/stream"),
        ("GET", f"{job}/pods"),
        ("GET", f"{job}/logs?replica=worker-0"),
        ("POST", f"{job}/suspend"),
        ("DELETE", job),
    ]:
        response = await kubeflow_view.request(method, path, headers=headers)
        body = await response.json()
        assert response.status == 403, path
        assert set(body) == {"error", "errors"} and "team-b" in body["error"]
    assert backend.calls == []


async def test_an_unanswered_review_is_a_refusal(
    kubeflow_view: TestClient[Any, Any], backend: ScriptedBackend, reviewer: Reviewer
) -> None:
    listed(backend, wire("mine", "team-a"))
    reviewer.fail = True
    response = await kubeflow_view.get("/api/jobs/cluster/team-a/pytorchjobs.v1/mine", headers=ALICE)
    assert response.status == 403


async def test_a_review_is_asked_once_per_question_within_the_ttl(
    kubeflow_view: TestClient[Any, Any], backend: ScriptedBackend, reviewer: Reviewer
) -> None:
    listed(backend, wire("mine", "team-a"))
    for _ in range(3):
        assert (
            await kubeflow_view.get("/api/jobs/cluster/team-a/pytorchjobs.v1/mine", headers=ALICE)
        ).status == 200
    assert len(reviewer.asked) == 1


# --- Kubeflow Trainer's TrainJobs, beside the v1 jobs ----------------------------------------------------


def trainjob(name: str, namespace: str = "team-a", suspend: bool = False, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": "2026-11-01T00:00:00Z"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 2}, "suspend": suspend},
        "status": status,
    }


async def test_a_trainjob_is_listed_beside_the_v1_jobs_its_state_from_its_nodes(
    local_view: TestClient[Any, Any], backend: ScriptedBackend
) -> None:
    listed(backend, wire("v1"), trainjob("tj"))
    await asyncio.sleep(0.2)
    response = await local_view.get("/api/stream")
    events = sse(response)
    _, snapshot = await anext(events)
    assert {row["id"]: row["state"] for row in snapshot["jobs"]} == {
        "cluster/team-a/pytorchjobs.v1/v1": "Created",
        "cluster/team-a/trainjobs.v1alpha1/tj": "Created",
    }
    running = NodeTally(seen=2, active=2, running=2)
    backend.scripted.events.put(JobWatchEvent(WatchEventType.MODIFIED, trainjob("tj"), 0, nodes=running))
    _, changes = await anext(events)
    [row] = changes["upserts"]
    assert (row["kind"], row["state"], row["replicas"]) == ("TrainJob", "Running", "node 2/2")
    response.close()


async def test_a_trainjobs_page_shows_its_runtime_and_its_jobsets_jobs(
    local_view: TestClient[Any, Any], backend: ScriptedBackend
) -> None:
    jobs = [{"name": "node", "ready": 1, "active": 1, "succeeded": 0, "failed": 0, "suspended": 0}]
    listed(backend, trainjob("tj", jobsStatus=jobs))
    await asyncio.sleep(0.2)
    detail = await (await local_view.get("/api/jobs/cluster/team-a/trainjobs.v1alpha1/tj")).json()
    assert detail["runtime"] == "ClusterTrainingRuntime torch-distributed"
    assert detail["jobs"] == jobs


async def test_a_suspended_trainjob_is_shown_suspended_and_resumed_through_its_spec(
    local_view: TestClient[Any, Any], backend: ScriptedBackend
) -> None:
    held = [
        {"type": "Suspended", "status": "True", "reason": "Suspended", "message": "TrainJob is suspended"}
    ]
    listed(backend, trainjob("tj", suspend=True, conditions=held))
    await asyncio.sleep(0.2)
    row = (await (await local_view.get("/api/jobs/cluster/team-a/trainjobs.v1alpha1/tj")).json())["row"]
    assert (row["state"], row["suspended"]) == ("Suspended", True)
    headers = await csrf_headers(local_view)
    response = await local_view.post("/api/jobs/cluster/team-a/trainjobs.v1alpha1/tj/resume", headers=headers)
    assert response.status == 200
    assert backend.calls == [("patch", ("team-a", "tj", {"spec": {"suspend": False}}))]


async def test_a_trainjob_is_listed_only_to_who_may_list_trainjobs_in_its_namespace(
    kubeflow_view: TestClient[Any, Any], backend: ScriptedBackend, reviewer: Reviewer
) -> None:
    listed(backend, trainjob("mine", "team-a"), trainjob("theirs", "team-b"))
    await asyncio.sleep(0.2)
    response = await kubeflow_view.get("/api/stream", headers=ALICE)
    _, snapshot = await anext(sse(response))
    assert [row["name"] for row in snapshot["jobs"]] == ["mine"]
    assert (
        "alice@example.com",
        Attributes("list", "trainjobs", "team-b", "trainer.kubeflow.org"),
    ) in reviewer.asked
    response.close()


TRAINJOB_YAML = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: llm
spec:
  runtimeRef:
    name: deepspeed-distributed
  trainer:
    numNodes: 2
"""


async def test_a_trainjobs_plan_shows_its_jobsets_pods_on_the_clusters_runtime_and_no_secret_data(
    local_view: TestClient[Any, Any],
) -> None:
    headers = await csrf_headers(local_view)
    response = await local_view.post(
        "/api/plan", json={"yaml": TRAINJOB_YAML, "namespace": "team-a"}, headers=headers
    )
    assert response.status == 200, await response.text()
    plan = await response.json()
    assert (plan["kind"], plan["name"]) == ("TrainJob", "llm")
    assert sorted(p["name"] for p in plan["pods"]) == ["llm-launcher", "llm-node"]
    assert {"kind": "Secret", "name": "llm-mpi-ssh-auth"} in plan["objects"]
    assert {"kind": "ConfigMap", "name": "llm-runtime-snapshot"} in plan["objects"]
    launcher = next(p for p in plan["pods"] if p["name"] == "llm-launcher")
    assert {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"} in launcher["env"]
    assert "PRIVATE KEY" not in json.dumps(plan)


async def test_a_trainjob_is_created_from_the_form(
    local_view: TestClient[Any, Any], backend: ScriptedBackend
) -> None:
    listed(backend)
    headers = await csrf_headers(local_view)
    response = await local_view.post(
        "/api/jobs", json={"yaml": TRAINJOB_YAML, "namespace": "team-a"}, headers=headers
    )
    assert response.status == 201, await response.text()
    assert (await response.json())["id"] == "cluster/team-a/trainjobs.v1alpha1/llm"
    assert backend.calls == [("create", ("team-a", "llm"))]


async def test_a_trainjobs_plan_reads_its_runtime_only_for_who_may_get_it(
    kubeflow_view: TestClient[Any, Any], reviewer: Reviewer
) -> None:
    elsewhere = TRAINJOB_YAML.replace("name: deepspeed-distributed", "name: team\n    kind: TrainingRuntime")
    headers = await csrf_headers(kubeflow_view, **ALICE)
    response = await kubeflow_view.post(
        "/api/plan", json={"yaml": elsewhere, "namespace": "team-b"}, headers=headers
    )
    assert response.status == 403
    assert (await response.json())["error"] == (
        'forbidden: alice@example.com may not get trainingruntimes.trainer.kubeflow.org "team" '
        'in namespace "team-b"'
    )
