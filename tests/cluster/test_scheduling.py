"""kube-scheduler binds pods to fake nodes by their nvidia.com/gpu capacity."""

from __future__ import annotations

import pytest
from cluster_pods import create_pod, is_bound, pod_manifest, scheduled_condition

from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.nodes import FAKE_NODE_LABEL, GPU_RESOURCE
from kubetrain.envtest.poddriver import wait_for_pod
from waiting import PATIENCE

pytestmark = pytest.mark.cluster


def test_pod_requesting_gpus_is_bound_to_a_fake_node_with_enough(kube_api: KubeApi, namespace: str) -> None:
    pod = create_pod(kube_api, namespace, pod_manifest("one-gpu", gpus=1))

    bound = wait_for_pod(kube_api, pod, is_bound, PATIENCE)

    node = kube_api.get(f"/api/v1/nodes/{bound['spec']['nodeName']}")
    assert node["metadata"]["labels"][FAKE_NODE_LABEL] == "true"
    assert int(node["status"]["allocatable"][GPU_RESOURCE]) >= 1


def test_pod_requesting_more_gpus_than_any_node_has_stays_pending_as_unschedulable(
    kube_api: KubeApi, namespace: str
) -> None:
    nodes = kube_api.get("/api/v1/nodes", {"labelSelector": FAKE_NODE_LABEL})["items"]
    most = max(int(node["status"]["allocatable"][GPU_RESOURCE]) for node in nodes)
    pod = create_pod(kube_api, namespace, pod_manifest("too-many-gpus", gpus=most + 1))

    pending = wait_for_pod(
        kube_api, pod, lambda p: scheduled_condition(p).get("reason") == "Unschedulable", PATIENCE
    )

    assert not is_bound(pending)
    assert pending["status"]["phase"] == "Pending"
    assert f"Insufficient {GPU_RESOURCE}" in scheduled_condition(pending)["message"]
