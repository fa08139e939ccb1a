"""Builders for TrainJob tests: a TrainJob on a runtime, the runtimes kubetrain ships."""

from __future__ import annotations

from typing import Any

from kubetrain.api.trainer import ClusterTrainingRuntime, TrainJob
from kubetrain.frameworks.trainer.builtin import builtin_runtimes


def trainjob(
    runtime: str = "torch-distributed", name: str = "demo", namespace: str = "team", **spec: Any
) -> TrainJob:
    return TrainJob.model_validate(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
            "spec": {"runtimeRef": {"name": runtime}, **spec},
        },
        context={"strict": True},
    )


def builtin(name: str) -> ClusterTrainingRuntime:
    return builtin_runtimes()[name]


def runtime(jobs: list[dict[str, Any]], **spec: Any) -> ClusterTrainingRuntime:
    """A ClusterTrainingRuntime named ``custom`` with these replicated jobs."""
    return ClusterTrainingRuntime.model_validate(
        {
            "metadata": {"name": "custom", "labels": {"trainer.kubeflow.org/framework": "torch"}},
            "spec": {**spec, "template": {"spec": {"replicatedJobs": jobs}}},
        }
    )


def replicated_job(
    name: str, containers: list[dict[str, Any]], ancestor: str | None = None, **extra: Any
) -> dict[str, Any]:
    labels = {"trainer.kubeflow.org/trainjob-ancestor-step": ancestor} if ancestor else {}
    return {
        "name": name,
        **extra,
        "template": {
            **({"metadata": {"labels": labels}} if labels else {}),
            "spec": {"template": {"spec": {"containers": containers}}},
        },
    }


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}


def pod_spec(jobset: dict[str, Any], job: str) -> dict[str, Any]:
    for replicated in jobset["spec"]["replicatedJobs"]:
        if replicated["name"] == job:
            spec: dict[str, Any] = replicated["template"]["spec"]["template"]["spec"]
            return spec
    raise KeyError(job)


def container_of(jobset: dict[str, Any], job: str = "node", name: str = "node") -> dict[str, Any]:
    return next(c for c in pod_spec(jobset, job)["containers"] if c["name"] == name)
