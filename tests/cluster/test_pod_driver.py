"""The pod driver plays the kubelet: each transition a test asks for shows up in the pod's status, and
deletions of pods on fake nodes complete, except on a node the test declared lost."""

from __future__ import annotations

import pytest
from cluster_pods import create_pod, is_bound, pod_manifest, scheduled_condition, wait_gone

from kubetrain.envtest.kubeapi import KubeApi, KubeObject
from kubetrain.envtest.nodes import FAKE_NODE_LABEL
from kubetrain.envtest.poddriver import PodDriver, PodDriverError, pod_path, wait_for_pod
from waiting import PATIENCE, eventually

pytestmark = pytest.mark.cluster


def _bound_pod(kube_api: KubeApi, namespace: str, restart_policy: str = "Never") -> KubeObject:
    pod = create_pod(kube_api, namespace, pod_manifest("worker", restart_policy=restart_policy))
    return wait_for_pod(kube_api, pod, is_bound, PATIENCE)


def _fake_nodes(kube_api: KubeApi) -> list[str]:
    nodes = kube_api.get("/api/v1/nodes", {"labelSelector": FAKE_NODE_LABEL})["items"]
    return [node["metadata"]["name"] for node in nodes]


def _condition(pod: KubeObject, kind: str) -> KubeObject:
    return next(c for c in pod["status"]["conditions"] if c["type"] == kind)


def _container(pod: KubeObject) -> KubeObject:
    statuses: list[KubeObject] = pod["status"]["containerStatuses"]
    return statuses[0]


def test_run_makes_the_pod_running_and_ready_with_a_pod_ip(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    pod = pod_driver.run(_bound_pod(kube_api, namespace))

    assert pod["status"]["phase"] == "Running"
    assert _condition(pod, "Ready")["status"] == "True"
    assert pod["status"]["podIP"]
    assert "running" in _container(pod)["state"]
    assert _container(pod)["ready"] is True


def test_succeed_terminates_the_containers_with_exit_code_zero(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    pod = _bound_pod(kube_api, namespace)
    pod_driver.run(pod)

    pod = pod_driver.succeed(pod)

    assert pod["status"]["phase"] == "Succeeded"
    assert _container(pod)["state"]["terminated"]["exitCode"] == 0


def test_fail_records_the_exit_code_and_reason_given(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    pod = _bound_pod(kube_api, namespace)

    pod = pod_driver.fail(pod, exit_code=137, reason="OOMKilled")

    assert pod["status"]["phase"] == "Failed"
    terminated = _container(pod)["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (137, "OOMKilled")


def test_fail_with_a_message_records_it_as_the_containers_termination_message(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    pod = pod_driver.fail(_bound_pod(kube_api, namespace), exit_code=1, message="loss is nan\n")

    assert _container(pod)["state"]["terminated"]["message"] == "loss is nan\n"


def test_restart_of_an_on_failure_pod_counts_one_restart_and_keeps_it_running(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    pod = _bound_pod(kube_api, namespace, restart_policy="OnFailure")
    pod_driver.run(pod)

    pod_driver.restart(pod, exit_code=2)
    pod = pod_driver.restart(pod, exit_code=3)

    assert pod["status"]["phase"] == "Running"
    assert _container(pod)["restartCount"] == 2
    assert _container(pod)["lastState"]["terminated"]["exitCode"] == 3


def test_restart_of_a_never_restarting_pod_is_refused(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    pod = _bound_pod(kube_api, namespace, restart_policy="Never")

    with pytest.raises(PodDriverError, match="restartPolicy Never"):
        pod_driver.restart(pod)


def test_evict_fails_the_pod_with_reason_evicted_and_a_disruption_condition(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    pod = _bound_pod(kube_api, namespace)
    pod_driver.run(pod)

    pod = pod_driver.evict(pod)

    assert (pod["status"]["phase"], pod["status"]["reason"]) == ("Failed", "Evicted")
    assert _condition(pod, "DisruptionTarget")["reason"] == "TerminationByKubelet"


def test_deleting_a_running_pod_on_a_fake_node_completes_like_a_kubelet_would(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    pod = pod_driver.run(_bound_pod(kube_api, namespace))

    kube_api.delete(pod_path(namespace, pod["metadata"]["name"]))

    wait_gone(kube_api, pod_path(namespace, pod["metadata"]["name"]))


def test_a_deleted_pod_on_a_lost_node_stays_terminating_until_the_node_recovers(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    pod = pod_driver.run(_bound_pod(kube_api, namespace))
    lost = pod_driver.lose_node(pod)
    assert _condition(lost, "Ready")["status"] == "False"

    # Then one on a healthy node: the finisher reads deletions in order, so once this one is finished the
    # worker's was read before it, however slow the machine.
    healthy = next(n for n in _fake_nodes(kube_api) if n != lost["spec"]["nodeName"])
    sentinel = pod_manifest("sentinel")
    sentinel["spec"]["nodeName"] = healthy
    create_pod(kube_api, namespace, sentinel)
    kube_api.delete(pod_path(namespace, "worker"))
    kube_api.delete(pod_path(namespace, "sentinel"))
    wait_gone(kube_api, pod_path(namespace, "sentinel"))
    terminating = kube_api.get(pod_path(namespace, "worker"))
    assert terminating["metadata"]["deletionTimestamp"]

    pod_driver.recover_nodes()
    wait_gone(kube_api, pod_path(namespace, "worker"))


def test_driving_a_pod_no_node_can_take_names_the_scheduler_reason(kube_api: KubeApi, namespace: str) -> None:
    pod = create_pod(kube_api, namespace, pod_manifest("unschedulable", gpus=10_000))
    # The scheduler's verdict first: a driver that gives up before it is written has no reason to name. No
    # wait would bind this pod, so giving up soon after cannot pass for the wrong reason.
    eventually(
        lambda: scheduled_condition(kube_api.get(pod_path(namespace, "unschedulable"))).get("reason"),
        "the scheduler's verdict on the pod",
    )
    impatient = PodDriver(kube_api, bind_timeout=3)

    with pytest.raises(PodDriverError, match="Unschedulable"):
        impatient.run(pod)
