"""Gang scheduling on a real API server: Volcano and scheduler-plugins PodGroups, pod decoration, and
Volcano's rule that no pod is created before the PodGroup is admitted (§4.9). scheduler-plugins' PodGroups
are served by the CRD of the release the e2e tier schedules with (tools/scheduler-plugins), so a field the
operator writes that its schema does not know would be pruned here and fail these tests."""

from __future__ import annotations

from typing import Any

import pytest
from operator_support import (
    StartOperator,
    create_job,
    eventually,
    gone,
    job_path,
    pod,
    pods,
    pytorch_job,
    wait_pods,
)

from kubetrain.envtest import coscheduler
from kubetrain.envtest.crds import CRD_PATH
from kubetrain.envtest.kubeapi import ApiError, KubeApi

pytestmark = pytest.mark.cluster

ALL_PODS = ["j-master-0", "j-worker-0", "j-worker-1"]


def pod_group_crd(group: str, version: str) -> dict[str, Any]:
    """Volcano's PodGroup CRD with an open schema: the tests need its API, not Volcano."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"podgroups.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {
                "kind": "PodGroup",
                "plural": "podgroups",
                "singular": "podgroup",
                "listKind": "PodGroupList",
            },
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def pod_group_crds(kube_api: KubeApi) -> None:
    try:
        kube_api.create(CRD_PATH, pod_group_crd("scheduling.volcano.sh", "v1beta1"))
    except ApiError as error:
        if error.code != 409:
            raise
    coscheduler.install_crds(kube_api)
    for served in (
        "/apis/scheduling.volcano.sh/v1beta1/podgroups",
        "/apis/scheduling.x-k8s.io/v1alpha1/podgroups",
    ):
        eventually(lambda: kube_api.is_ok(served), what=f"{served} served")  # noqa: B023 (called at once)


def test_volcano_gets_a_pod_group_and_pods_only_once_it_is_admitted(
    pod_group_crds: None, kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    start_operator("--gang-scheduler-name", "volcano")
    job = pytorch_job("j", schedulingPolicy={"queue": "research", "priorityClass": "high"})
    create_job(kube_api, namespace, job)
    group_path = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{namespace}/podgroups/j"
    eventually(lambda: not gone(kube_api, group_path), what="the PodGroup")
    group = kube_api.get(group_path)
    assert group["spec"]["minMember"] == 3
    assert group["spec"]["queue"] == "research"
    assert group["spec"]["priorityClassName"] == "high"
    assert group["metadata"]["ownerReferences"][0]["kind"] == "PyTorchJob"
    assert not pods(kube_api, namespace), "no pod before Volcano admits the group"

    kube_api.patch(group_path, {"status": {"phase": "Inqueue"}})
    wait_pods(kube_api, namespace, ALL_PODS)
    worker = pod(kube_api, namespace, "j-worker-1")
    assert worker["spec"]["schedulerName"] == "volcano"
    assert worker["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "j"
    assert worker["metadata"]["annotations"]["volcano.sh/task-spec"] == "worker"

    kube_api.patch(job_path("PyTorchJob", namespace, "j"), {"spec": {"runPolicy": {"suspend": True}}})
    eventually(lambda: gone(kube_api, group_path), what="the PodGroup deleted on suspend")


def test_scheduler_plugins_get_a_pod_group_and_labelled_pods_at_once(
    pod_group_crds: None, kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    start_operator("--gang-scheduler-name", "scheduler-plugins-scheduler")
    job = pytorch_job("j", schedulingPolicy={"minAvailable": 2, "scheduleTimeoutSeconds": 30})
    create_job(kube_api, namespace, job)
    wait_pods(kube_api, namespace, ALL_PODS)
    group = kube_api.get(f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups/j")
    assert (group["spec"]["minMember"], group["spec"]["scheduleTimeoutSeconds"]) == (2, 30)
    master = pod(kube_api, namespace, "j-master-0")
    assert master["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
    assert master["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "j"


def test_computed_min_resources_take_the_highest_priority_replicas_first(
    pod_group_crds: None, kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    priority_class = f"{namespace}-high"
    kube_api.create(
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": priority_class},
            "value": 1000,
        },
    )
    try:
        start_operator("--gang-scheduler-name", "scheduler-plugins-scheduler")
        job = pytorch_job("j", schedulingPolicy={"minAvailable": 2})
        specs = job["spec"]["pytorchReplicaSpecs"]
        specs["Master"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
        worker = specs["Worker"]["template"]["spec"]
        worker["containers"][0]["resources"] = {"requests": {"cpu": "2"}}
        worker["priorityClassName"] = priority_class
        create_job(kube_api, namespace, job)
        group_path = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups/j"
        eventually(lambda: not gone(kube_api, group_path), what="the PodGroup")
        # The two high-priority workers fill minMember 2 before the master is counted: 2 x 2 CPUs.
        assert kube_api.get(group_path)["spec"]["minResources"] == {"cpu": "4"}
    finally:
        kube_api.delete(f"/apis/scheduling.k8s.io/v1/priorityclasses/{priority_class}")
