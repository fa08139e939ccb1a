"""The operator keeps a job's first failure in ``<job>-failure`` before the Decision deletes anything: the
failed container's last lines read through ``pods/log``, the ConfigMap owned by the job, one Warning event."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import httpx2

from builders import job
from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.failures import FIRST_FAILURE
from kubetrain.engine.types import ObservedContainer, ObservedReplica, Phase, Traits
from kubetrain.frameworks.registry import framework_for
from kubetrain.kube.act import Actor
from kubetrain.kube.controller import ChildStores, JobController
from kubetrain.kube.events import EventRecord, EventRecorder
from kubetrain.kube.failure_config_map import RECORD_KEY, read_record
from kubetrain.kube.failures import FailureKeeper
from kubetrain.kube.metrics import OperatorMetrics
from kubetrain.kube.render import RenderSettings
from kubetrain.kube.runtime.expectations import Expectations
from kubetrain.kube.runtime.store import ChangeType, Store

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CONFIG_MAPS = "/api/v1/namespaces/ns/configmaps"


class Cluster:
    """ConfigMaps kept in memory, pod logs answered with ``log`` (or ``log_status``); requests recorded."""

    def __init__(self, log: str = "step 41\nloss is nan\n", log_status: int = 200) -> None:
        self.log, self.log_status = log, log_status
        self.config_maps: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.version = 0

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        path, method = request.url.path, request.method
        self.requests.append((method, path, dict(request.url.params)))
        if path.endswith("/log"):
            return httpx2.Response(self.log_status, text=self.log)
        if path.startswith(CONFIG_MAPS):
            return self._config_map(method, path, request)
        return httpx2.Response(200, json={})

    def _config_map(self, method: str, path: str, request: httpx2.Request) -> httpx2.Response:
        name = path.removeprefix(CONFIG_MAPS).strip("/")
        if method == "GET":
            found = self.config_maps.get(name)
            return httpx2.Response(200, json=found) if found else httpx2.Response(404, json={})
        body = json.loads(request.content)
        name = name or body["metadata"]["name"]
        if method == "POST" and name in self.config_maps:
            return httpx2.Response(409, json={})
        if method == "PUT" and body["metadata"].get("resourceVersion") != self._version_of(name):
            return httpx2.Response(409, json={})
        self.version += 1
        body["metadata"]["resourceVersion"] = str(self.version)
        self.config_maps[name] = body
        return httpx2.Response(201, json=body)

    def _version_of(self, name: str) -> str | None:
        version = (self.config_maps.get(name) or {}).get("metadata", {}).get("resourceVersion")
        return None if version is None else str(version)

    def http(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle), base_url="https://api")

    def log_reads(self) -> list[dict[str, str]]:
        return [params for _, path, params in self.requests if path.endswith("/log")]

    def writes(self) -> list[str]:
        return [
            method for method, path, _ in self.requests if path.startswith(CONFIG_MAPS) and method != "GET"
        ]


class RecordedEvents(EventRecorder):
    def __init__(self, http: httpx2.AsyncClient) -> None:
        super().__init__(http)
        self.records: list[EventRecord] = []

    def record(self, record: EventRecord) -> None:
        self.records.append(record)


def pytorch_job(**options: Any) -> TrainingJob:
    parsed = job("PyTorchJob", {"Master": 1, "Worker": 1}, name="j", namespace="ns", **options)
    parsed.metadata.uid = "job-uid"
    return parsed


JOB = pytorch_job()
STORED: dict[str, Any] = {**JOB.to_wire(), "metadata": {"name": "j", "namespace": "ns", "uid": "job-uid"}}


def failed_master(**container: Any) -> ObservedReplica:
    return ObservedReplica(
        "Master",
        0,
        Phase.FAILED,
        exit_code=1,
        node="real-node-0",
        containers=(
            ObservedContainer(
                "pytorch", last_exit_code=1, last_reason="Error", last_finished_at=NOW, **container
            ),
        ),
    )


def keeper(cluster: Cluster) -> tuple[FailureKeeper, RecordedEvents]:
    http = cluster.http()
    events = RecordedEvents(http)
    return FailureKeeper(http, http, events), events


def kept(cluster: Cluster) -> Any:
    return read_record(cluster.config_maps["j-failure"], "job-uid")


async def test_nothing_is_read_or_written_for_a_job_none_of_whose_replicas_failed() -> None:
    cluster = Cluster()
    failures, _ = keeper(cluster)
    running = ObservedReplica("Master", 0, Phase.RUNNING, containers=(ObservedContainer("pytorch"),))

    await failures.keep(STORED, JOB, framework_for(JOB), [running], NOW)

    assert cluster.requests == []


async def test_a_failure_is_kept_in_a_config_map_the_job_owns_with_its_last_lines_read_from_the_pod() -> None:
    cluster = Cluster()
    failures, _ = keeper(cluster)

    await failures.keep(STORED, JOB, framework_for(JOB), [failed_master()], NOW)

    config_map = cluster.config_maps["j-failure"]
    [owner] = config_map["metadata"]["ownerReferences"]
    assert (owner["uid"], owner["controller"], owner["kind"]) == ("job-uid", True, "PyTorchJob")
    assert kept(cluster).first.lines == "step 41\nloss is nan"
    assert cluster.log_reads() == [{"container": "pytorch", "tailLines": "50", "limitBytes": "65536"}]


async def test_a_crash_looping_containers_previous_run_is_read() -> None:
    cluster = Cluster()
    failures, _ = keeper(cluster)
    looping = ObservedReplica(
        "Master",
        0,
        Phase.RUNNING,
        containers=(
            ObservedContainer(
                "pytorch",
                waiting_reason="CrashLoopBackOff",
                last_exit_code=1,
                last_finished_at=NOW,
                restart_count=1,
            ),
        ),
    )

    await failures.keep(STORED, JOB, framework_for(JOB), [looping], NOW)

    assert cluster.log_reads()[0]["previous"] == "true"


async def test_the_first_failure_is_announced_once_with_a_warning_event() -> None:
    cluster = Cluster()
    failures, events = keeper(cluster)

    for _ in range(3):
        await failures.keep(STORED, JOB, framework_for(JOB), [failed_master()], NOW)

    assert [(e.type, e.reason) for e in events.records] == [("Warning", FIRST_FAILURE)]
    assert cluster.writes() == ["POST"]


async def test_a_log_that_cannot_be_read_is_not_asked_for_again_and_the_failure_kept_without_lines() -> None:
    cluster = Cluster(log_status=500)
    failures, _ = keeper(cluster)

    for _ in range(3):
        await failures.keep(STORED, JOB, framework_for(JOB), [failed_master()], NOW)

    assert kept(cluster).first.lines is None
    assert len(cluster.log_reads()) == 1


async def test_lines_the_engine_already_has_need_no_read() -> None:
    cluster = Cluster()
    failures, _ = keeper(cluster)

    await failures.keep(STORED, JOB, framework_for(JOB), [failed_master(last_message="CUDA error\n")], NOW)

    assert kept(cluster).first.lines == "CUDA error"
    assert cluster.log_reads() == []


async def test_after_an_operator_restart_the_kept_record_is_read_back_and_not_announced_again() -> None:
    cluster = Cluster()
    first, _ = keeper(cluster)
    await first.keep(STORED, JOB, framework_for(JOB), [failed_master()], NOW)
    restarted, events = keeper(cluster)

    await restarted.keep(STORED, JOB, framework_for(JOB), [failed_master()], NOW)

    assert events.records == []
    assert cluster.writes() == ["POST"]


async def test_a_record_left_by_a_previous_job_of_the_same_name_is_replaced() -> None:
    cluster = Cluster()
    failures, _ = keeper(cluster)
    await failures.keep(STORED, JOB, framework_for(JOB), [failed_master()], NOW)
    successor = pytorch_job()
    successor.metadata.uid = "new-uid"
    stored = {**STORED, "metadata": {**STORED["metadata"], "uid": "new-uid"}}

    await keeper(cluster)[0].keep(stored, successor, framework_for(successor), [failed_master()], NOW)

    assert read_record(cluster.config_maps["j-failure"], "new-uid") is not None


async def test_the_config_map_holds_the_record_as_json_under_one_key() -> None:
    cluster = Cluster()
    failures, _ = keeper(cluster)

    await failures.keep(STORED, JOB, framework_for(JOB), [failed_master()], NOW)

    data = json.loads(cluster.config_maps["j-failure"]["data"][RECORD_KEY])
    assert data["first"]["pod"] == "j-master-0"
    assert data["first"]["node"] == "real-node-0"
    assert data["first"]["exitCode"] == 1


# --- in the operator's reconcile -------------------------------------------------------------------------


def pod(replica_type: str, phase: str, exit_code: int) -> dict[str, Any]:
    name = f"j-{replica_type}-0"
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"{name}-uid",
            "resourceVersion": "1",
            "labels": {
                "training.kubeflow.org/replica-type": replica_type,
                "training.kubeflow.org/replica-index": "0",
                "training.kubeflow.org/job-name": "j",
            },
            "ownerReferences": [{"uid": "job-uid", "controller": True, "kind": "PyTorchJob", "name": "j"}],
        },
        "spec": {"nodeName": "real-node-0", "containers": [{"name": "pytorch", "image": "trainer:1"}]},
        "status": {
            "phase": phase,
            "containerStatuses": [
                {
                    "name": "pytorch",
                    "restartCount": 0,
                    "state": (
                        {
                            "terminated": {
                                "exitCode": exit_code,
                                "reason": "Error",
                                "finishedAt": "2026-03-01T12:00:00Z",
                            }
                        }
                        if phase == "Failed"
                        else {"running": {"startedAt": "2026-03-01T11:59:00Z"}}
                    ),
                }
            ],
        },
    }


async def test_the_failure_is_kept_before_the_reconcile_that_fails_the_job_deletes_its_pods() -> None:
    # restartPolicy Never, cleanPodPolicy All: the master's failure fails the job, and every pod is deleted
    # in the same reconcile. The log is read and the record written first.
    cluster = Cluster()
    http = cluster.http()
    events = RecordedEvents(http)
    parsed = pytorch_job(restart_policy="Never", spec={"runPolicy": {"cleanPodPolicy": "All"}})
    stored = {**parsed.to_wire(), "metadata": {"name": "j", "namespace": "ns", "uid": "job-uid"}}
    jobs, pods = Store(), Store()
    jobs.apply(ChangeType.ADDED, stored)
    pods.apply(ChangeType.ADDED, pod("master", "Failed", 1))
    pods.apply(ChangeType.ADDED, pod("worker", "Running", 0))
    controller = JobController(
        framework_for(parsed),
        jobs,
        ChildStores(pods=pods, services=Store(), pod_groups=None),
        Actor(http, Expectations(), events, OperatorMetrics(), RenderSettings()),
        Expectations(),
        OperatorMetrics(),
        Traits(colocated=False),
        failures=FailureKeeper(http, http, events),
    )

    await controller.reconcile("ns/j")

    order = [(m, p.rsplit("/", 2)[-2] if p.endswith("/log") else p) for m, p, _ in cluster.requests]
    read = order.index(("GET", "j-master-0"))
    written = order.index(("POST", CONFIG_MAPS))
    deleted = order.index(("DELETE", "/api/v1/namespaces/ns/pods/j-master-0"))
    assert read < written < deleted
    assert kept(cluster).first.lines == "step 41\nloss is nan"
