"""The run policies and restart rules on a real API server, with the operator as a real process."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from operator_support import (
    StartOperator,
    condition_true,
    create_job,
    env_of,
    events,
    eventually,
    get_job,
    gone,
    job_path,
    pod,
    pods,
    pytorch_job,
    wait_condition,
    wait_pods,
)

from kubetrain.envtest.kubeapi import KubeApi, KubeObject
from kubetrain.envtest.poddriver import PodDriver
from kubetrain.kube.events import BUMP_INTERVAL_SECONDS
from waiting import PATIENCE

pytestmark = pytest.mark.cluster

ALL_PODS = ["j-master-0", "j-worker-0", "j-worker-1"]


def uid(api: KubeApi, namespace: str, name: str) -> str:
    return str(pod(api, namespace, name)["metadata"]["uid"])


def recreated(api: KubeApi, namespace: str, name: str, old_uid: str) -> bool:
    current = [p for p in pods(api, namespace) if p["metadata"]["name"] == name]
    return (
        bool(current)
        and current[0]["metadata"]["uid"] != old_uid
        and not current[0]["metadata"].get("deletionTimestamp")
    )


def test_a_failed_on_failure_pod_is_recreated_and_the_job_is_restarting(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver, start_operator: StartOperator
) -> None:
    start_operator()
    create_job(kube_api, namespace, pytorch_job("j", restart_policy="OnFailure"))
    wait_pods(kube_api, namespace, ALL_PODS)
    before = uid(kube_api, namespace, "j-worker-0")
    pod_driver.fail((namespace, "j-worker-0"), exit_code=1)
    wait_condition(kube_api, "PyTorchJob", namespace, "j", "Restarting")
    eventually(lambda: recreated(kube_api, namespace, "j-worker-0", before), what="worker-0 recreated")
    # Events are posted by sender tasks after the reconcile, never inside it: wait for it as for the pod.
    eventually(lambda: events(kube_api, namespace, "SuccessfulDeletePod"), what="SuccessfulDeletePod event")


def test_exit_code_policy_retries_a_signal_and_fails_the_job_on_a_program_error(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver, start_operator: StartOperator
) -> None:
    start_operator()
    create_job(kube_api, namespace, pytorch_job("j", restart_policy="ExitCode"))
    wait_pods(kube_api, namespace, ALL_PODS)
    assert pod(kube_api, namespace, "j-worker-0")["spec"]["restartPolicy"] == "Never"
    before = uid(kube_api, namespace, "j-worker-0")
    pod_driver.fail((namespace, "j-worker-0"), exit_code=137)
    eventually(
        lambda: recreated(kube_api, namespace, "j-worker-0", before), what="worker-0 recreated after 137"
    )
    pod_driver.fail((namespace, "j-worker-1"), exit_code=1)
    failed = wait_condition(kube_api, "PyTorchJob", namespace, "j", "Failed")
    assert failed["status"]["conditions"][-1]["type"] == "Failed"


def test_backoff_limit_fails_the_job_once_restarts_reach_it(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver, start_operator: StartOperator
) -> None:
    start_operator()
    create_job(kube_api, namespace, pytorch_job("j", restart_policy="OnFailure", backoffLimit=1))
    wait_pods(kube_api, namespace, ALL_PODS)
    for name in ALL_PODS:
        pod_driver.run((namespace, name))
    # One restart reaches backoffLimit 1 (upstream's restarts >= limit). A second one raced the operator
    # deleting the failed job's pods: a slow test process found the pod gone.
    pod_driver.restart((namespace, "j-worker-0"))
    failed = wait_condition(kube_api, "PyTorchJob", namespace, "j", "Failed")
    assert "backoff limit" in failed["status"]["conditions"][-1]["message"]
    eventually(lambda: not pods(kube_api, namespace), what="every pod deleted after the backoff failure")


def test_active_deadline_fails_a_quiet_job_once_it_has_passed_without_any_event(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver, start_operator: StartOperator
) -> None:
    start_operator()
    create_job(kube_api, namespace, pytorch_job("j", activeDeadlineSeconds=3))
    wait_pods(kube_api, namespace, ALL_PODS)
    for name in ALL_PODS:
        pod_driver.run((namespace, name))
    failed = wait_condition(kube_api, "PyTorchJob", namespace, "j", "Failed")
    condition = condition_true(failed, "Failed")
    assert condition is not None and "deadline" in condition["message"]
    started = datetime.fromisoformat(failed["status"]["startTime"].replace("Z", "+00:00"))
    ended = datetime.fromisoformat(condition["lastTransitionTime"].replace("Z", "+00:00"))
    assert ended >= started + timedelta(seconds=3), "not before the deadline"


def test_ttl_after_finished_deletes_the_job(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver, start_operator: StartOperator
) -> None:
    start_operator()
    create_job(kube_api, namespace, pytorch_job("j", workers=1, ttlSecondsAfterFinished=3))
    wait_pods(kube_api, namespace, ["j-master-0", "j-worker-0"])
    pod_driver.succeed((namespace, "j-master-0"))
    wait_condition(kube_api, "PyTorchJob", namespace, "j", "Succeeded")
    eventually(lambda: gone(kube_api, job_path("PyTorchJob", namespace, "j")), what="job deleted")


def test_clean_pod_policy_running_deletes_running_pods_when_the_job_succeeds(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver, start_operator: StartOperator
) -> None:
    start_operator()
    create_job(kube_api, namespace, pytorch_job("j", cleanPodPolicy="Running"))
    wait_pods(kube_api, namespace, ALL_PODS)
    for name in ALL_PODS:
        pod_driver.run((namespace, name))
    pod_driver.succeed((namespace, "j-master-0"))
    wait_condition(kube_api, "PyTorchJob", namespace, "j", "Succeeded")
    wait_pods(kube_api, namespace, ["j-master-0"])


def test_a_suspended_job_has_no_pods_and_resuming_creates_them(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    start_operator()
    create_job(kube_api, namespace, pytorch_job("j", suspend=True))
    suspended = wait_condition(kube_api, "PyTorchJob", namespace, "j", "Suspended")
    assert suspended["status"]["conditions"][-1]["reason"] == "PyTorchJobSuspended"
    assert not pods(kube_api, namespace)
    kube_api.patch(job_path("PyTorchJob", namespace, "j"), {"spec": {"runPolicy": {"suspend": False}}})
    wait_pods(kube_api, namespace, ALL_PODS)

    def resumed() -> KubeObject | None:
        job = get_job(kube_api, "PyTorchJob", namespace, "j")
        return None if condition_true(job, "Suspended") else job

    job = eventually(resumed, what="Suspended=False")
    suspended_condition = next(c for c in job["status"]["conditions"] if c["type"] == "Suspended")
    assert suspended_condition["reason"] == "PyTorchJobResumed"


def test_suspending_a_running_job_deletes_its_pods_and_services(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver, start_operator: StartOperator
) -> None:
    start_operator()
    create_job(kube_api, namespace, pytorch_job("j"))
    wait_pods(kube_api, namespace, ALL_PODS)
    kube_api.patch(job_path("PyTorchJob", namespace, "j"), {"spec": {"runPolicy": {"suspend": True}}})
    wait_condition(kube_api, "PyTorchJob", namespace, "j", "Suspended")
    wait_pods(kube_api, namespace, [])
    eventually(
        lambda: not kube_api.get(f"/api/v1/namespaces/{namespace}/services")["items"], what="no services"
    )


def test_a_job_managed_by_another_controller_is_left_alone(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    operator = start_operator()
    create_job(kube_api, namespace, pytorch_job("other", managedBy="kueue.x-k8s.io/multikueue"))
    create_job(kube_api, namespace, pytorch_job("ours"))
    wait_pods(kube_api, namespace, ["ours-master-0", "ours-worker-0", "ours-worker-1"])
    eventually(lambda: '"job": "' + namespace + '/other"' in operator.log, what="the other job reconciled")
    assert not get_job(kube_api, "PyTorchJob", namespace, "other").get("status")
    assert not [p for p in pods(kube_api, namespace) if p["metadata"]["name"].startswith("other")]


def test_scaling_through_the_scale_subresource_adds_a_worker_with_the_new_world_size(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    start_operator()
    create_job(kube_api, namespace, pytorch_job("j"))
    wait_pods(kube_api, namespace, ALL_PODS)
    kube_api.patch(job_path("PyTorchJob", namespace, "j") + "/scale", {"spec": {"replicas": 3}})
    wait_pods(kube_api, namespace, [*ALL_PODS, "j-worker-2"])
    env = env_of(pod(kube_api, namespace, "j-worker-2"), "pytorch")
    assert (env["WORLD_SIZE"], env["RANK"]) == ("4", "3")
    kube_api.patch(job_path("PyTorchJob", namespace, "j") + "/scale", {"spec": {"replicas": 1}})
    wait_pods(kube_api, namespace, ["j-master-0", "j-worker-0"])


def test_a_pod_deleted_by_hand_is_recreated(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    start_operator()
    create_job(kube_api, namespace, pytorch_job("j"))
    wait_pods(kube_api, namespace, ALL_PODS)
    before = uid(kube_api, namespace, "j-worker-1")
    kube_api.delete(f"/api/v1/namespaces/{namespace}/pods/j-worker-1", {"gracePeriodSeconds": 0})
    eventually(lambda: recreated(kube_api, namespace, "j-worker-1", before), what="worker-1 recreated")


def test_every_child_action_is_reported_as_an_event_from_the_controller(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    start_operator()
    create_job(kube_api, namespace, pytorch_job("j"))
    wait_pods(kube_api, namespace, ALL_PODS)

    def three_created() -> list[KubeObject] | None:
        found = events(kube_api, namespace, "SuccessfulCreatePod")
        return found if len(found) == 3 else None

    created = eventually(three_created, what="three SuccessfulCreatePod events")
    assert {e["source"]["component"] for e in created} == {"pytorchjob-controller"}
    assert {e["involvedObject"]["kind"] for e in created} == {"PyTorchJob"}
    assert sorted(e["message"] for e in created) == [f"Created pod: {name}" for name in ALL_PODS]
    services = eventually(
        lambda: len(events(kube_api, namespace, "SuccessfulCreateService")) == 3,
        what="three services' events",
    )
    # A job's creation is its Created condition: upstream records no event for it, and neither does kubetrain.
    assert services and not events(kube_api, namespace, "PyTorchJobCreated")


@pytest.mark.slow
def test_a_pod_stuck_terminating_on_a_lost_node_is_force_deleted_and_replaced(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver, start_operator: StartOperator
) -> None:
    start_operator()
    create_job(kube_api, namespace, pytorch_job("j", restart_policy="OnFailure"))
    wait_pods(kube_api, namespace, ALL_PODS)
    before = uid(kube_api, namespace, "j-worker-0")
    pod_driver.lose_node((namespace, "j-worker-0"))
    kube_api.delete(f"/api/v1/namespaces/{namespace}/pods/j-worker-0", {"gracePeriodSeconds": 1})
    assert pod(kube_api, namespace, "j-worker-0")["metadata"].get("deletionTimestamp")
    eventually(lambda: recreated(kube_api, namespace, "j-worker-0", before), what="replacement")


def test_elastic_metrics_get_an_hpa_on_the_scale_subresource_which_suspension_removes(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver, start_operator: StartOperator
) -> None:
    start_operator()
    cpu = {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
    }
    manifest = pytorch_job("j", workers=2)
    del manifest["spec"]["pytorchReplicaSpecs"]["Master"]
    manifest["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 3, "metrics": [cpu]}
    create_job(kube_api, namespace, manifest)
    hpa_path = f"/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers/j"
    eventually(lambda: not gone(kube_api, hpa_path), what="the HPA")
    hpa = kube_api.get(hpa_path)
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "name": "j",
    }
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 3)
    assert hpa["spec"]["metrics"] == [cpu]
    assert hpa["metadata"]["ownerReferences"][0]["name"] == "j"
    kube_api.patch(job_path("PyTorchJob", namespace, "j"), {"spec": {"runPolicy": {"suspend": True}}})
    eventually(lambda: gone(kube_api, hpa_path), what="the HPA removed while suspended")


def test_a_crash_looping_pod_is_one_warning_event_on_the_job_whose_count_grows(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver, start_operator: StartOperator
) -> None:
    start_operator()
    create_job(kube_api, namespace, pytorch_job("j", restart_policy="OnFailure"))
    wait_pods(kube_api, namespace, ALL_PODS)
    pod_driver.run((namespace, "j-worker-0"))
    back_off = "back-off 10s restarting failed container=pytorch pod=j-worker-0"

    def crash_loop(restarts: int) -> None:
        """What the kubelet reports between restarts of a container that keeps failing."""
        waiting = {"reason": "CrashLoopBackOff", "message": back_off}
        status = {"name": "pytorch", "ready": False, "restartCount": restarts, "state": {"waiting": waiting}}
        path = f"/api/v1/namespaces/{namespace}/pods/j-worker-0/status"
        kube_api.patch(path, {"status": {"containerStatuses": [status]}})

    def warnings() -> list[KubeObject]:
        return events(kube_api, namespace, "CrashLoopBackOff")

    crash_loop(restarts=1)
    [warning] = eventually(warnings, what="a CrashLoopBackOff event")
    assert (warning["type"], warning["involvedObject"]["name"]) == ("Warning", "j")
    assert warning["message"] == f"Error pod j-worker-0 container pytorch waiting message: {back_off}"
    for restarts in (2, 3):
        crash_loop(restarts)  # each status change is another reconcile, which warns again
    # The repeats are reported together once the Event's bump interval is over: wait that out, then as long
    # as for anything else.
    eventually(
        lambda: warnings()[0]["count"] >= 2,
        "the CrashLoopBackOff event's count to grow",
        timeout=BUMP_INTERVAL_SECONDS + PATIENCE,
    )
    assert len(warnings()) == 1
