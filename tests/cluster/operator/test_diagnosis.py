"""The operator diagnoses the seeds' failure modes on a real API server and scheduler: a Warning event on the
job naming the pods, the cause and the fix, after the cause, and ``kubetrain describe`` showing it first
while it holds. The fake nodes advertise ``nvidia.com/gpu``; the pod driver plays the kubelet. How soon
after the cause the event comes is bench/operator_latency.py's to measure."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from operator_support import StartOperator, create_job, eventually, pytorch_job, wait_pods

from builders import cli_runner
from kubetrain.cli.main import app
from kubetrain.engine.diagnosis import CRASH_LOOP_RESTARTS
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.nodes import FAKE_NODE_LABEL
from kubetrain.envtest.poddriver import PodDriver
from kubetrain.envtest.pytest_plugin import EnvtestCluster

pytestmark = pytest.mark.cluster

GPU = "nvidia.com/gpu"


def gpu_job(name: str, workers: int, gpus: int) -> dict[str, Any]:
    job = pytorch_job(name, workers=workers, restart_policy="OnFailure")
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["containers"][0]["resources"] = {"limits": {GPU: str(gpus)}}
    return job


def node_gpus(api: KubeApi) -> list[int]:
    nodes = api.get("/api/v1/nodes", {"labelSelector": FAKE_NODE_LABEL})["items"]
    return [int(node["status"]["allocatable"].get(GPU, "0")) for node in nodes]


def warnings(api: KubeApi, namespace: str, job: str, reason: str) -> list[dict[str, Any]]:
    selector = f"involvedObject.name={job},reason={reason},type=Warning"
    return list(api.get(f"/api/v1/namespaces/{namespace}/events", {"fieldSelector": selector})["items"])


def first_warning(api: KubeApi, namespace: str, job: str, reason: str, naming: str = "") -> dict[str, Any]:
    """The job's first ``reason`` Warning whose message starts with ``naming`` (the pods a test expects:
    pods created a moment apart may first be named one by one)."""

    def found() -> list[dict[str, Any]]:
        return [e for e in warnings(api, namespace, job, reason) if e["message"].startswith(naming)]

    return dict(eventually(found, f"a {reason} event on {job}")[0])


def describe(envtest: EnvtestCluster, namespace: str, job: str) -> list[str]:
    result = cli_runner().invoke(
        app, ["describe", "pytorchjob", job, "-n", namespace, "--kubeconfig", str(envtest.kubeconfig)]
    )
    assert result.exit_code == 0, result.output
    return str(result.stdout).splitlines()


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def first_seen(event: dict[str, Any]) -> datetime:
    """When an Event was first recorded, in whole seconds (``firstTimestamp``, or ``eventTime`` cut to it)."""
    if event.get("firstTimestamp"):
        return moment(event["firstTimestamp"])
    return moment(event["eventTime"]).replace(microsecond=0)


def unschedulable_since(api: KubeApi, namespace: str, name: str) -> datetime:
    """When the scheduler found the pod could not be placed: its PodScheduled=False condition's time."""
    conditions = api.get(f"/api/v1/namespaces/{namespace}/pods/{name}")["status"]["conditions"]
    [scheduled] = [c for c in conditions if c["type"] == "PodScheduled" and c["status"] == "False"]
    return moment(scheduled["lastTransitionTime"])


def unschedulable(api: KubeApi, namespace: str) -> list[str]:
    pods = api.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
    return sorted(
        p["metadata"]["name"]
        for p in pods
        if any(
            c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
            for c in p.get("status", {}).get("conditions") or []
        )
    )


def test_a_half_scheduled_job_without_gang_scheduling_is_a_gang_deadlock_naming_the_pending_pod(
    start_operator: StartOperator,
    kube_api: KubeApi,
    namespace: str,
    pod_driver: PodDriver,
    envtest: EnvtestCluster,
) -> None:
    # Every pod asks for a whole node's GPUs: one pod more than there are nodes cannot be placed.
    per_node = node_gpus(kube_api)
    start_operator()
    create_job(kube_api, namespace, gpu_job("deadlock", workers=len(per_node), gpus=min(per_node)))
    names = ["deadlock-master-0", *(f"deadlock-worker-{i}" for i in range(len(per_node)))]
    wait_pods(kube_api, namespace, names)
    [pending] = eventually(lambda: unschedulable(kube_api, namespace), "the pod that does not fit")
    for name in names:
        if name != pending:
            pod_driver.run((namespace, name))

    event = first_warning(kube_api, namespace, "deadlock", "GangDeadlock")

    assert first_seen(event) >= unschedulable_since(kube_api, namespace, pending), "after its cause"
    message = event["message"]
    assert message.startswith(f"pod {pending} cannot be scheduled (0/")
    assert f"Insufficient {GPU}) while the job's other pods were placed" in message
    assert "Fix: gang scheduling (the operator's --gang-scheduler-name" in message
    text = describe(envtest, namespace, "deadlock")
    assert text[:2] == ["Diagnosis:", f"  GangDeadlock: {message}"]


def test_pods_that_cannot_be_placed_before_any_runs_are_insufficient_resources(
    start_operator: StartOperator,
    kube_api: KubeApi,
    namespace: str,
    envtest: EnvtestCluster,
) -> None:
    start_operator()
    create_job(kube_api, namespace, gpu_job("too-big", workers=1, gpus=max(node_gpus(kube_api)) + 1))

    event = first_warning(
        kube_api, namespace, "too-big", "InsufficientResources", "pods too-big-master-0 and"
    )

    assert event["message"].startswith("pods too-big-master-0 and too-big-worker-0 cannot be scheduled (0/")
    assert f"Fix: free or add {GPU} on the nodes" in event["message"]
    assert describe(envtest, namespace, "too-big")[:2] == [
        "Diagnosis:",
        f"  InsufficientResources: {event['message']}",
    ]


def test_a_crash_looping_replica_is_a_crash_loop_event_with_its_exit_code(
    start_operator: StartOperator, kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    start_operator()
    create_job(kube_api, namespace, pytorch_job("crashing", workers=1, restart_policy="OnFailure"))
    wait_pods(kube_api, namespace, ["crashing-master-0", "crashing-worker-0"])
    pod_driver.run((namespace, "crashing-master-0"))
    for _ in range(CRASH_LOOP_RESTARTS):
        pod_driver.crash_loop((namespace, "crashing-worker-0"), exit_code=3)

    event = first_warning(kube_api, namespace, "crashing", "CrashLoop")

    # No kubelet serves this fake node's logs: the finding says what it knows without the last lines.
    assert event["message"] == (
        "pod crashing-worker-0 is in a crash loop: container pytorch exited with code 3 (Error) and is "
        "restarted again and again. Fix: correct what its output shows (its log holds the whole run); "
        "runPolicy.backoffLimit bounds the restarts"
    )


def test_an_oom_killed_container_is_an_out_of_memory_event(
    start_operator: StartOperator, kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    start_operator()
    create_job(kube_api, namespace, pytorch_job("hungry", workers=1, restart_policy="OnFailure"))
    wait_pods(kube_api, namespace, ["hungry-master-0", "hungry-worker-0"])
    pod_driver.run((namespace, "hungry-master-0"))
    pod_driver.crash_loop((namespace, "hungry-worker-0"), exit_code=137, reason="OOMKilled")

    event = first_warning(kube_api, namespace, "hungry", "OutOfMemory")

    assert event["message"].startswith(
        "pod hungry-worker-0: container pytorch was killed for running out of memory (OOMKilled, exit code "
        "137) with no memory limit: the node ran out of memory."
    )
    assert warnings(kube_api, namespace, "hungry", "CrashLoop") == []


def test_an_image_that_cannot_be_pulled_is_an_image_pull_failed_event_and_leaves_describe_once_pulled(
    start_operator: StartOperator,
    kube_api: KubeApi,
    namespace: str,
    pod_driver: PodDriver,
    envtest: EnvtestCluster,
) -> None:
    start_operator()
    create_job(kube_api, namespace, pytorch_job("typo", workers=1))
    wait_pods(kube_api, namespace, ["typo-master-0", "typo-worker-0"])
    pod_driver.wait_for_image((namespace, "typo-master-0"), message="not found")

    event = first_warning(kube_api, namespace, "typo", "ImagePullFailed")
    shown = describe(envtest, namespace, "typo")
    pod_driver.run((namespace, "typo-master-0"))  # the image came: the cause is gone

    assert event["message"].startswith(
        "pod typo-master-0 cannot start: image example.com/trainer:1 of container pytorch cannot be pulled "
        "(ErrImagePull: not found). Fix:"
    )
    assert shown[:2] == ["Diagnosis:", f"  ImagePullFailed: {event['message']}"]
    eventually(lambda: describe(envtest, namespace, "typo")[0].startswith("Name:"), "the diagnosis gone")


def test_a_finding_that_holds_is_one_event_whose_count_grows(
    start_operator: StartOperator, kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    # --resync-period 1: the job is reconciled every second although nothing changes.
    start_operator("--resync-period", "1")
    create_job(kube_api, namespace, pytorch_job("steady", workers=1, restart_policy="OnFailure"))
    wait_pods(kube_api, namespace, ["steady-master-0", "steady-worker-0"])
    pod_driver.run((namespace, "steady-master-0"))
    for _ in range(CRASH_LOOP_RESTARTS):
        pod_driver.crash_loop((namespace, "steady-worker-0"))

    counted = eventually(
        lambda: [e for e in warnings(kube_api, namespace, "steady", "CrashLoop") if e.get("count", 1) > 1],
        "the CrashLoop event counted again",
    )

    assert len(warnings(kube_api, namespace, "steady", "CrashLoop")) == 1
    assert counted[0]["count"] > 1
