"""Small builders for the Pods the cluster tests create."""

from __future__ import annotations

from typing import Any

from kubetrain.envtest.kubeapi import KubeApi, KubeObject
from waiting import eventually


def pod_manifest(name: str, gpus: int = 0, restart_policy: str = "Never", **metadata: Any) -> KubeObject:
    resources = {"cpu": "100m", "memory": "64Mi"}
    if gpus:
        resources["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **metadata},
        "spec": {
            "restartPolicy": restart_policy,
            "containers": [
                {
                    "name": "trainer",
                    "image": "example.com/trainer:1",
                    "resources": {"requests": resources, "limits": resources},
                }
            ],
        },
    }


def create_pod(api: KubeApi, namespace: str, manifest: KubeObject) -> KubeObject:
    return api.create(f"/api/v1/namespaces/{namespace}/pods", manifest)


def is_bound(pod: KubeObject) -> bool:
    return bool(pod["spec"].get("nodeName"))


def scheduled_condition(pod: KubeObject) -> KubeObject:
    conditions = pod.get("status", {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "PodScheduled"), {})


def wait_gone(api: KubeApi, path: str) -> None:
    """Wait until GET ``path`` answers 404."""
    eventually(lambda: not api.exists(path), f"{path} gone")
