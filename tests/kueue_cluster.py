"""What the cluster tier's Kueue tests share: Kueue v0.17.0 (``kubetrain.envtest.kueue``) running beside the
session's envtest for one module, and the queues of ``examples/kueue/queues.yaml`` made for one test."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.envtest import kueue
from kubetrain.envtest.kubeapi import ApiError, KubeApi, KubeObject
from kubetrain.envtest.pytest_plugin import EnvtestCluster

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "kueue"
KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"
CLUSTER_SCOPED = {
    "ResourceFlavor": "resourceflavors",
    "ClusterQueue": "clusterqueues",
    "WorkloadPriorityClass": "workloadpriorityclasses",
}
NAMESPACED = {"LocalQueue": "localqueues", "Workload": "workloads"}


RELEASE_FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset", kueue.TRAINJOB_FRAMEWORK)
"""The integrations of Kueue v0.17.0's release configuration (``config/components/manager``, and its Helm
chart's values) that a TrainJob's objects meet: the TrainJob's, and those of the JobSet and the Jobs made of
it, which Kueue must leave to the TrainJob's Workload (they are its children)."""


@contextlib.contextmanager
def kueue_beside(
    cluster: EnvtestCluster, frameworks: tuple[str, ...] = (kueue.TRAINJOB_FRAMEWORK,)
) -> Iterator[EnvtestCluster]:
    """Kueue integrating ``frameworks`` on ``cluster`` (the kinds it integrates already installed), stopped
    and its webhooks removed afterwards: they would mutate every TrainJob (and Job) of the modules after."""
    if cluster.run_dir is None:
        pytest.fail("Kueue runs beside an envtest this session started or found (not KUBETRAIN_KUBECONFIG)")
    if os.geteuid() != 0:
        pytest.skip(
            f"Kueue {kueue.version()} reads {kueue.METRICS_CERTS}, bound in a mount namespace: needs root"
        )
    kueue.start(cluster.run_dir, cluster.kubeconfig, frameworks)
    try:
        yield cluster
    finally:
        kueue.stop(cluster.run_dir, cluster.kubeconfig)


def example(name: str) -> list[KubeObject]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


def path_of(obj: KubeObject, namespace: str | None = None) -> str:
    kind, name = obj["kind"], obj["metadata"]["name"]
    if kind in CLUSTER_SCOPED:
        return f"{KUEUE_API}/{CLUSTER_SCOPED[kind]}/{name}"
    return f"{KUEUE_API}/namespaces/{namespace}/{NAMESPACED[kind]}/{name}"


@contextlib.contextmanager
def example_queues(api: KubeApi, namespace: str, extra: list[KubeObject] | None = None) -> Iterator[str]:
    """``examples/kueue/queues.yaml`` (plus ``extra`` cluster-scoped objects) for ``namespace``, the
    cluster-scoped ones renamed for it (``renamed_cluster_object``) so that tests share no quota; yields the
    LocalQueue's name. The cluster-scoped objects are deleted afterwards (the namespace takes the rest)."""
    renamed: dict[str, str] = {}
    objects = example("queues.yaml") + list(extra or [])
    for obj in objects:
        if obj["kind"] in CLUSTER_SCOPED:
            renamed[obj["metadata"]["name"]] = renamed_cluster_object(obj["metadata"]["name"], namespace)
    created: list[str] = []
    local_queue = ""
    try:
        for obj in objects:
            body = _renamed(obj, renamed)
            if body["kind"] == "LocalQueue":
                local_queue = body["metadata"]["name"]
                body["metadata"]["namespace"] = namespace
            path = path_of(body, namespace)
            api.create(path.rsplit("/", 1)[0], body)
            if body["kind"] in CLUSTER_SCOPED:
                created.append(path)
        yield local_queue
    finally:
        for path in reversed(created):
            with contextlib.suppress(ApiError):
                api.delete(path)


def renamed_cluster_object(name: str, namespace: str) -> str:
    """What ``example_queues`` calls the cluster-scoped object ``name`` for ``namespace``: with the
    namespace's random suffix (Kueue puts a ClusterQueue's name in a label value, at most 63 characters)."""
    return f"{name}-{namespace.rsplit('-', 1)[-1]}"


def _renamed(obj: Any, names: dict[str, str]) -> Any:
    """``obj`` with the cluster-scoped names it holds (its own, and references: a flavor's, a queue's)
    replaced."""
    if isinstance(obj, dict):
        return {key: _renamed(value, names) for key, value in obj.items()}
    if isinstance(obj, list):
        return [_renamed(value, names) for value in obj]
    if isinstance(obj, str) and obj in names:
        return names[obj]
    return obj
