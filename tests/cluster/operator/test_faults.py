"""Failures and disruptions on a real API server, with the operator as a real process (issue 29): restart
scope Job, disruptions replaced for free, lost nodes diagnosed and replaced, a scheduling timeout."""

from __future__ import annotations

from functools import partial

import pytest
from operator_support import (
    StartOperator,
    condition_true,
    create_job,
    events,
    eventually,
    get_job,
    pod,
    pods,
    pytorch_job,
    wait_condition,
    wait_pods,
)

from kubetrain.envtest.kubeapi import KubeApi, KubeObject
from kubetrain.envtest.poddriver import PodDriver

pytestmark = pytest.mark.cluster

ALL_PODS = ["j-master-0", "j-worker-0", "j-worker-1"]


def annotated(manifest: KubeObject, **annotations: str) -> KubeObject:
    return {**manifest, "metadata": {**manifest["metadata"], "annotations": annotations}}


def uids(api: KubeApi, namespace: str) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods(api, namespace)}


def replaced(api: KubeApi, namespace: str, name: str, old_uid: str) -> KubeObject | None:
    current = [p for p in pods(api, namespace) if p["metadata"]["name"] == name]
    if (
        current
        and current[0]["metadata"]["uid"] != old_uid
        and not current[0]["metadata"].get("deletionTimestamp")
    ):
        return current[0]
    return None


def run_all(driver: PodDriver, namespace: str, names: list[str]) -> None:
    for name in names:
        driver.run((namespace, name))


def worker_status(api: KubeApi, namespace: str) -> KubeObject:
    return (
        dict(
            (get_job(api, "PyTorchJob", namespace, "j").get("status") or {}).get("replicaStatuses") or {}
        ).get("Worker")
        or {}
    )


def messages(api: KubeApi, namespace: str, reason: str) -> list[str]:
    return [str(e.get("message")) for e in events(api, namespace, reason)]


# --- disruptions --------------------------------------------------------------------------------------


def test_a_pod_evicted_by_its_kubelet_is_replaced_with_backoff_limit_zero_and_an_event_names_it(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver, start_operator: StartOperator
) -> None:
    start_operator()
    create_job(kube_api, namespace, pytorch_job("j", restart_policy="OnFailure", backoffLimit=0))
    wait_pods(kube_api, namespace, ALL_PODS)
    run_all(pod_driver, namespace, ALL_PODS)
    before = uids(kube_api, namespace)["j-worker-1"]

    pod_driver.evict((namespace, "j-worker-1"), message="The node was low on resource: memory.")

    eventually(
        lambda: replaced(kube_api, namespace, "j-worker-1", before), what="the evicted worker replaced"
    )
    said = eventually(lambda: messages(kube_api, namespace, "Disrupted"), what="a Disrupted event")
    assert said[0].startswith(
        "pod j-worker-1 was disrupted (TerminationByKubelet: The node was low on resource: memory.)"
    )
    eventually(
        lambda: worker_status(kube_api, namespace).get("disruptions") == 1, what="the disruption counted"
    )
    pod_driver.run((namespace, "j-worker-1"))
    job = wait_condition(kube_api, "PyTorchJob", namespace, "j", "Running")
    assert not condition_true(job, "Failed")
    assert not worker_status(kube_api, namespace).get("restarts")


def test_a_pod_evicted_through_the_eviction_api_is_replaced_and_the_job_says_it_was_a_disruption(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver, start_operator: StartOperator
) -> None:
    start_operator()
    create_job(kube_api, namespace, pytorch_job("j", restart_policy="Never", backoffLimit=0))
    wait_pods(kube_api, namespace, ALL_PODS)
    run_all(pod_driver, namespace, ALL_PODS)
    before = uids(kube_api, namespace)["j-worker-0"]

    pod_driver.evict_through_api((namespace, "j-worker-0"))

    eventually(
        lambda: replaced(kube_api, namespace, "j-worker-0", before), what="the evicted worker replaced"
    )
    eventually(
        lambda: worker_status(kube_api, namespace).get("disruptions") == 1, what="the disruption counted"
    )
    job = get_job(kube_api, "PyTorchJob", namespace, "j")
    assert not condition_true(job, "Failed")  # restartPolicy Never: a failure would have failed it
    restarting = [c for c in job["status"]["conditions"] if c["type"] == "Restarting"]
    if restarting:  # the reconcile that saw it being evicted may be folded into the one that replaced it
        assert "disruption, not a failure: pod j-worker-0 (EvictionByEvictionAPI" in restarting[0]["message"]
    said = eventually(lambda: messages(kube_api, namespace, "Disrupted"), what="a Disrupted event")
    assert "EvictionByEvictionAPI" in said[0]


# --- lost nodes ---------------------------------------------------------------------------------------


def test_a_lost_node_is_diagnosed_naming_the_node_and_the_pods(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver, start_operator: StartOperator
) -> None:
    start_operator()
    create_job(kube_api, namespace, pytorch_job("j", restart_policy="OnFailure"))
    wait_pods(kube_api, namespace, ALL_PODS)
    run_all(pod_driver, namespace, ALL_PODS)
    node = pod(kube_api, namespace, "j-worker-0")["spec"]["nodeName"]
    on_it = sorted(p["metadata"]["name"] for p in pods(kube_api, namespace) if p["spec"]["nodeName"] == node)

    pod_driver.lose_node((namespace, "j-worker-0"))

    said = eventually(lambda: messages(kube_api, namespace, "NodeLost"), what="a NodeLost event")
    assert f"on node {node}, which stopped reporting (Ready Unknown since" in said[0]
    assert all(name in said[0] for name in on_it)
    assert f"kubectl delete node {node}" in said[0]


def test_with_a_node_loss_timeout_the_pods_there_are_force_deleted_and_replaced_elsewhere(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver, start_operator: StartOperator
) -> None:
    start_operator()
    manifest = annotated(
        pytorch_job("j", workers=1, restart_policy="OnFailure", backoffLimit=0),
        **{"kubetrain.dev/node-loss-timeout-seconds": "5"},
    )
    create_job(kube_api, namespace, manifest)
    wait_pods(kube_api, namespace, ["j-master-0", "j-worker-0"])
    run_all(pod_driver, namespace, ["j-master-0", "j-worker-0"])
    worker = pod(kube_api, namespace, "j-worker-0")
    lost_node = worker["spec"]["nodeName"]

    pod_driver.lose_node((namespace, "j-worker-0"))

    replacement = eventually(
        lambda: replaced(kube_api, namespace, "j-worker-0", worker["metadata"]["uid"]),
        what="the worker force-deleted off its lost node and created again",
    )
    bound = pod_driver.wait_bound(replacement)
    assert bound["spec"]["nodeName"] != lost_node
    eventually(
        lambda: worker_status(kube_api, namespace).get("disruptions") == 1, what="a disruption counted"
    )
    assert not condition_true(get_job(kube_api, "PyTorchJob", namespace, "j"), "Failed")


def test_a_node_tainted_out_of_service_has_the_jobs_pods_replaced_at_once_without_a_timeout(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver, start_operator: StartOperator
) -> None:
    start_operator()
    create_job(kube_api, namespace, pytorch_job("j", workers=1, restart_policy="OnFailure"))
    wait_pods(kube_api, namespace, ["j-master-0", "j-worker-0"])
    run_all(pod_driver, namespace, ["j-master-0", "j-worker-0"])
    worker = pod(kube_api, namespace, "j-worker-0")

    pod_driver.lose_node((namespace, "j-worker-0"))
    pod_driver.take_out_of_service(worker["spec"]["nodeName"])

    eventually(
        lambda: replaced(kube_api, namespace, "j-worker-0", worker["metadata"]["uid"]),
        what="the worker force-deleted off the out-of-service node and created again",
    )


# --- scheduling timeout -------------------------------------------------------------------------------


def test_a_pod_that_never_schedules_fails_the_job_with_the_scheduling_timeouts_condition(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver, start_operator: StartOperator
) -> None:
    start_operator()
    manifest = annotated(
        pytorch_job("j", workers=1, restart_policy="OnFailure"),
        **{"kubetrain.dev/scheduling-timeout-seconds": "3"},
    )
    worker = manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker["resources"] = {"limits": {"nvidia.com/gpu": "10000"}}
    create_job(kube_api, namespace, manifest)

    job = wait_condition(kube_api, "PyTorchJob", namespace, "j", "Failed")

    failed = condition_true(job, "Failed")
    assert failed is not None and failed["reason"] == "SchedulingTimeoutExceeded"
    assert failed["message"].startswith(
        "PyTorchJob j has failed because pod j-worker-0 is still not scheduled 3s after it was created "
        "(kubetrain.dev/scheduling-timeout-seconds: 3): 0/"
    )
    assert "Insufficient nvidia.com/gpu" in failed["message"]
    warned = eventually(lambda: events(kube_api, namespace, "SchedulingTimeoutExceeded"), what="its event")
    assert warned[0]["type"] == "Warning" and warned[0]["message"] == failed["message"]


# --- restart scope Job --------------------------------------------------------------------------------


def test_restart_scope_job_restarts_every_replica_together_and_counts_it_once(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver, start_operator: StartOperator
) -> None:
    start_operator()
    manifest = annotated(
        pytorch_job("j", restart_policy="OnFailure", backoffLimit=2), **{"kubetrain.dev/restart-scope": "Job"}
    )
    create_job(kube_api, namespace, manifest)
    wait_pods(kube_api, namespace, ALL_PODS)
    run_all(pod_driver, namespace, ALL_PODS)
    wait_condition(kube_api, "PyTorchJob", namespace, "j", "Running")
    before = uids(kube_api, namespace)

    pod_driver.restart((namespace, "j-worker-1"), exit_code=137)  # the kubelet restarted it in place

    for name in ALL_PODS:
        eventually(partial(replaced, kube_api, namespace, name, before[name]), what=f"{name} restarted")
    said = eventually(lambda: messages(kube_api, namespace, "PyTorchJobRestarting"), what="its Warning event")
    assert any(
        "because Worker replica 1 (pod j-worker-1) container pytorch exited with code 137 and was restarted "
        "in place; this counts once against backoffLimit" in message
        for message in said
    )
    job = get_job(kube_api, "PyTorchJob", namespace, "j")
    restarts = sum(s.get("restarts", 0) for s in job["status"]["replicaStatuses"].values())
    assert restarts == 1
    run_all(pod_driver, namespace, ALL_PODS)
    running = wait_condition(kube_api, "PyTorchJob", namespace, "j", "Running")
    assert not condition_true(running, "Failed")


def test_restart_scope_job_restarts_every_replica_when_a_pod_fails_with_a_retryable_exit_code(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver, start_operator: StartOperator
) -> None:
    start_operator()
    manifest = annotated(
        pytorch_job("j", restart_policy="ExitCode", backoffLimit=2), **{"kubetrain.dev/restart-scope": "Job"}
    )
    create_job(kube_api, namespace, manifest)
    wait_pods(kube_api, namespace, ALL_PODS)
    run_all(pod_driver, namespace, ALL_PODS)
    wait_condition(kube_api, "PyTorchJob", namespace, "j", "Running")
    before = uids(kube_api, namespace)

    pod_driver.fail((namespace, "j-master-0"), exit_code=137, reason="OOMKilled")

    for name in ALL_PODS:
        eventually(partial(replaced, kube_api, namespace, name, before[name]), what=f"{name} restarted")
    said = eventually(lambda: messages(kube_api, namespace, "PyTorchJobRestarting"), what="its Warning event")
    assert any(
        "because Master replica 0 (pod j-master-0) exited with code 137" in message
        and "this counts once against backoffLimit" in message
        for message in said
    )


def test_restart_scope_job_restarts_every_replica_when_a_pod_vanished_while_the_operator_was_away(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver, start_operator: StartOperator
) -> None:
    operator = start_operator()
    manifest = annotated(
        pytorch_job("j", restart_policy="OnFailure", backoffLimit=0), **{"kubetrain.dev/restart-scope": "Job"}
    )
    create_job(kube_api, namespace, manifest)
    wait_pods(kube_api, namespace, ALL_PODS)
    run_all(pod_driver, namespace, ALL_PODS)
    eventually(
        lambda: worker_status(kube_api, namespace).get("active") == 2 or None, what="both workers counted"
    )
    before = uids(kube_api, namespace)
    operator.terminate()

    path = f"/api/v1/namespaces/{namespace}/pods/j-worker-1"
    kube_api.delete(path, {"gracePeriodSeconds": 0})
    eventually(lambda: not kube_api.exists(path) or None, what="j-worker-1 gone")
    start_operator()

    for name in ALL_PODS:
        eventually(partial(replaced, kube_api, namespace, name, before[name]), what=f"{name} restarted")
    said = eventually(lambda: messages(kube_api, namespace, "PyTorchJobRestarting"), what="its Warning event")
    assert any("because Worker replica 1 (pod j-worker-1) is gone" in message for message in said)
    job = get_job(kube_api, "PyTorchJob", namespace, "j")
    assert not condition_true(job, "Failed"), "a vanished pod does not count against backoffLimit 0"
