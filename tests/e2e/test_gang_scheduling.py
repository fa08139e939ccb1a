"""Gang scheduling with a real gang scheduler: scheduler-plugins' Coscheduling (the ``gang_scheduler``
fixture) binds a job's pods only when its PodGroup's ``minMember`` fit together; a job that cannot fit has
every pod Pending, none half-scheduled, where the default scheduler would bind the ones that fit, and its
PodGroup (scheduler-plugins' controller) and the job's events say why."""

from __future__ import annotations

import time
from typing import Any

import pytest

from builders import container, manifest
from e2e.realpods import TEST_IMAGE, RealCluster, wait_until
from kubetrain.envtest import realnode
from waiting import PATIENCE

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

GROUP_PATH = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups/{name}"
WAIT_PAST_PERMIT_SECONDS = 20.0
"""Longer than the scheduler's permitWaitingTimeSeconds: a gang that could half-bind has had its chance."""


def _job(name: str, workers: int, cpu_millis: int, command: str) -> dict[str, Any]:
    replica = container(
        "pytorch",
        TEST_IMAGE,
        imagePullPolicy="Never",
        command=["python", "-u", "-c", command],
        resources={"requests": {"cpu": f"{cpu_millis}m"}},
    )
    return manifest(
        "PyTorchJob", {"Master": 1, "Worker": workers}, name=name, namespace=None, containers=[replica]
    )


def _pods(cluster: RealCluster, namespace: str, job: str) -> list[dict[str, Any]]:
    selector = {"labelSelector": f"training.kubeflow.org/job-name={job}"}
    return list(cluster.api.get(f"/api/v1/namespaces/{namespace}/pods", selector)["items"])


def _all_unschedulable(cluster: RealCluster, namespace: str, job: str) -> list[dict[str, Any]] | None:
    """The job's pods once the scheduler has found every one of them Unschedulable."""
    pods = _pods(cluster, namespace, job)

    def unschedulable(pod: dict[str, Any]) -> bool:
        return any(
            (c["type"], c["status"], c.get("reason")) == ("PodScheduled", "False", "Unschedulable")
            for c in pod["status"].get("conditions") or []
        )

    return pods if pods and all(unschedulable(pod) for pod in pods) else None


def _allocatable_cpu_millis(cluster: RealCluster) -> int:
    return _millis(cluster.api.get(f"/api/v1/nodes/{realnode.NODE_NAME}")["status"]["allocatable"]["cpu"])


def _free_cpu_millis(cluster: RealCluster) -> int:
    """The real node's allocatable CPU less what its live pods request: what a new pod can still get."""
    allocatable = _allocatable_cpu_millis(cluster)
    pods = cluster.api.get("/api/v1/pods", {"fieldSelector": f"spec.nodeName={realnode.NODE_NAME}"})["items"]
    requested = sum(
        _millis(c.get("resources", {}).get("requests", {}).get("cpu", "0"))
        for pod in pods
        if pod["status"].get("phase") in ("Pending", "Running")
        for c in pod["spec"]["containers"]
    )
    return allocatable - requested


def _group(cluster: RealCluster, namespace: str, name: str) -> dict[str, Any] | None:
    path = GROUP_PATH.format(namespace=namespace, name=name)
    return dict(cluster.api.get(path)) if cluster.api.exists(path) else None


def _group_status(cluster: RealCluster, namespace: str, name: str) -> dict[str, Any] | None:
    """The PodGroup once scheduler-plugins' controller has seen its pods (past its initial Pending)."""
    group = _group(cluster, namespace, name)
    return group if group is not None and group.get("status", {}).get("phase") == "Scheduling" else None


def _millis(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def test_a_gang_that_fits_is_scheduled_by_the_gang_scheduler_and_runs(
    operator: RealCluster, namespace: str, gang_scheduler: str
) -> None:
    operator.api.create(
        f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs",
        _job("fits", workers=1, cpu_millis=10, command="print('together')"),
    )
    path = f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/fits"

    def succeeded() -> bool:
        conditions = operator.api.get(path).get("status", {}).get("conditions") or []
        return any(c["type"] == "Succeeded" and c["status"] == "True" for c in conditions)

    group = wait_until("the PodGroup", lambda: _group(operator, namespace, "fits"), PATIENCE)
    wait_until("fits Succeeded", succeeded, 180.0)
    pods = _pods(operator, namespace, "fits")

    assert group["spec"]["minMember"] == 2
    assert {p["spec"]["schedulerName"] for p in pods} == {gang_scheduler}
    assert all(p["spec"]["nodeName"] == realnode.NODE_NAME for p in pods)


def test_a_gang_that_cannot_fit_keeps_every_pod_pending_none_half_scheduled(
    operator: RealCluster, namespace: str, gang_scheduler: str
) -> None:
    # Three pods together ask for more CPU than the node has at all, so the gang never fits whatever else
    # runs; two of them fit now, which the default scheduler would bind: half a gang.
    per_pod = _allocatable_cpu_millis(operator) // 3 + 1
    wait_until(
        "room on the node for two of the pods", lambda: _free_cpu_millis(operator) >= 2 * per_pod, PATIENCE
    )
    operator.api.create(
        f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs",
        _job("too-big", workers=2, cpu_millis=per_pod, command="import time; time.sleep(600)"),
    )
    wait_until("three pods", lambda: len(_pods(operator, namespace, "too-big")) == 3, PATIENCE)
    group = wait_until("the PodGroup", lambda: _group(operator, namespace, "too-big"), PATIENCE)

    # A window for what must not happen (a half-bound gang), then what must: the scheduler has said of every
    # pod that it cannot place it, so that a loaded scheduler is not caught mid-permit.
    time.sleep(WAIT_PAST_PERMIT_SECONDS)
    pods = wait_until(
        "every pod found Unschedulable", lambda: _all_unschedulable(operator, namespace, "too-big")
    )
    group = wait_until(
        "the PodGroup's status", lambda: _group_status(operator, namespace, "too-big"), PATIENCE
    )

    assert group["spec"]["minMember"] == 3
    # scheduler-plugins' controller: every member exists, fewer than minMember run, so it is still Scheduling.
    assert (group["status"]["phase"], group["status"].get("running", 0)) == ("Scheduling", 0), group["status"]
    assert [p["status"]["phase"] for p in pods] == ["Pending"] * 3
    assert [p["spec"].get("nodeName") for p in pods] == [None] * 3
    for pod in pods:
        scheduled = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
        assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable"), scheduled
        assert scheduled["message"], scheduled
    job = operator.api.get(f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/too-big")
    running = [c for c in job.get("status", {}).get("conditions") or [] if c["type"] == "Running"]
    assert not any(c["status"] == "True" for c in running)


def test_the_job_says_why_its_gang_waits_the_gap_and_the_rejected_pod_group(
    operator: RealCluster, namespace: str, gang_scheduler: str
) -> None:
    per_pod = _allocatable_cpu_millis(operator) // 3 + 1
    operator.api.create(
        f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs",
        _job("too-big", workers=2, cpu_millis=per_pod, command="import time; time.sleep(600)"),
    )

    # The operator turns each pod's Unschedulable condition into a Warning event on the job (upstream's too).
    messages = wait_until(
        "the job's event naming the gap", lambda: _gap_events(operator, namespace), PATIENCE
    )

    assert any(f"PodGroup {namespace}/too-big gets rejected" in message for message in messages), messages


def _gap_events(cluster: RealCluster, namespace: str) -> list[str]:
    selector = "involvedObject.kind=PyTorchJob,involvedObject.name=too-big,reason=Unschedulable,type=Warning"
    events = cluster.api.get(f"/api/v1/namespaces/{namespace}/events", {"fieldSelector": selector})["items"]
    return [e["message"] for e in events if "resource gap" in e["message"]]
