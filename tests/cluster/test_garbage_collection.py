"""kube-controller-manager's garbage collector removes pods whose owner is deleted."""

from __future__ import annotations

import pytest
from cluster_pods import create_pod, is_bound, pod_manifest, wait_gone

from kubetrain.envtest.kubeapi import KubeApi, KubeObject
from kubetrain.envtest.poddriver import PodDriver, pod_path, wait_for_pod
from waiting import PATIENCE

pytestmark = pytest.mark.cluster


def _owner(kube_api: KubeApi, namespace: str) -> KubeObject:
    return kube_api.create(
        f"/api/v1/namespaces/{namespace}/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}, "data": {"role": "owner"}},
    )


def _owned_by(owner: KubeObject) -> list[KubeObject]:
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def test_deleting_the_owner_garbage_collects_its_owned_running_pod(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    owner = _owner(kube_api, namespace)
    pod = create_pod(kube_api, namespace, pod_manifest("owned", ownerReferences=_owned_by(owner)))
    pod_driver.run(wait_for_pod(kube_api, pod, is_bound, PATIENCE))

    kube_api.delete(f"/api/v1/namespaces/{namespace}/configmaps/owner")

    wait_gone(kube_api, pod_path(namespace, "owned"))


def test_foreground_deletion_of_the_owner_completes_after_its_pod_is_gone(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    owner = _owner(kube_api, namespace)
    pod = create_pod(kube_api, namespace, pod_manifest("owned", ownerReferences=_owned_by(owner)))
    pod_driver.run(wait_for_pod(kube_api, pod, is_bound, PATIENCE))

    kube_api.delete(f"/api/v1/namespaces/{namespace}/configmaps/owner", {"propagationPolicy": "Foreground"})

    wait_gone(kube_api, pod_path(namespace, "owned"))
    wait_gone(kube_api, f"/api/v1/namespaces/{namespace}/configmaps/owner")
