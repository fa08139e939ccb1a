"""What each replica of a job is: its name, labels, pod template with injected env (§3, §2).

Both substrates start replicas from a ``ReplicaPlan``: the kube substrate turns it into a Pod, the
local substrate into a process. Deciding it here keeps the two from drifting apart.
"""

from __future__ import annotations

import copy
from typing import Any

from kubetrain.api.common import RestartPolicy
from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.types import ReplicaPlan, Traits
from kubetrain.frameworks.addressing import Addressing
from kubetrain.frameworks.base import EnvTarget, Framework
from kubetrain.frameworks.labels import (
    REPLICA_TYPE_LABEL,
)
from kubetrain.frameworks.labels import job_labels as _job_labels
from kubetrain.frameworks.registry import framework_for


def job_labels(job: TrainingJob, framework: Framework[Any] | None = None) -> dict[str, str]:
    """The labels every replica of the job carries; substrates list a job's replicas by them."""
    framework = framework or framework_for(job)
    return _job_labels(framework.controller_name, job.name)


def replica_labels(
    job: TrainingJob, replica_type: str, index: int, framework: Framework[Any] | None = None
) -> dict[str, str]:
    """The labels kubetrain sets on one replica (per-replica services select by them too)."""
    return (framework or framework_for(job)).replica_labels(job, replica_type, index)


def replica_type_selector(
    job: TrainingJob, replica_type: str, framework: Framework[Any] | None = None
) -> str:
    """``replicaStatuses[T].selector``: the label selector of every replica of one type, keys sorted."""
    framework = framework or framework_for(job)
    labels = {**job_labels(job, framework), REPLICA_TYPE_LABEL: replica_type.lower()}
    return ",".join(f"{key}={labels[key]}" for key in sorted(labels))


def fills_selector(framework: Framework[Any]) -> bool:
    """Upstream fills ``selector`` exactly for the kinds with a ``scale`` subresource (HPA needs it)."""
    return framework.scale_replica_type is not None


def replica_policy(job: TrainingJob, replica_type: str, framework: Framework[Any]) -> RestartPolicy:
    spec = job.replica_specs[replica_type]
    return spec.restart_policy or framework.default_restart_policy


def replica_count(job: TrainingJob, replica_type: str) -> int:
    replicas = job.replica_specs[replica_type].replicas
    return 1 if replicas is None else replicas


def desired_replicas(
    job: TrainingJob, traits: Traits, framework: Framework[Any] | None = None
) -> list[tuple[str, int]]:
    """Every ``(type, index)`` that should exist, in the framework's replica-type order."""
    framework = framework or framework_for(job)
    return [
        (replica_type, index)
        for replica_type in framework.materialised_replica_types(job, traits.colocated)
        for index in range(replica_count(job, replica_type))
    ]


def _containers(template: dict[str, Any]) -> list[dict[str, Any]]:
    spec = template.get("spec")
    containers = spec.get("containers") if isinstance(spec, dict) else None
    return [c for c in containers if isinstance(c, dict)] if isinstance(containers, list) else []


def _env_targets(containers: list[dict[str, Any]], framework: Framework[Any]) -> list[dict[str, Any]]:
    if framework.env_target is EnvTarget.ALL_CONTAINERS:
        return containers
    if framework.env_target is EnvTarget.DEFAULT_CONTAINER:
        return [c for c in containers if c.get("name") == framework.default_container]
    return containers[:1]


def _main_container(containers: list[dict[str, Any]], framework: Framework[Any]) -> str:
    names = [str(c.get("name", "")) for c in containers]
    if framework.default_container in names:
        return framework.default_container
    return names[0] if names else framework.default_container


def plan_replica(
    job: TrainingJob,
    replica_type: str,
    index: int,
    addressing: Addressing,
    framework: Framework[Any] | None = None,
) -> ReplicaPlan:
    """The replica ``(type, index)`` of a defaulted job, ready for a substrate to start."""
    framework = framework or framework_for(job)
    template = copy.deepcopy(job.replica_specs[replica_type].template)
    metadata = template["metadata"] = dict(template.get("metadata") or {})
    labels = {**(metadata.get("labels") or {}), **replica_labels(job, replica_type, index, framework)}
    metadata["labels"] = labels
    annotations = framework.replica_annotations(job, replica_type, index)
    if annotations:
        metadata["annotations"] = {**(metadata.get("annotations") or {}), **annotations}

    containers = _containers(template)
    injected = framework.replica_env(job, replica_type, index, addressing)
    for container in _env_targets(containers, framework):
        container["env"] = [*(container.get("env") or []), *copy.deepcopy(injected)]

    policy = replica_policy(job, replica_type, framework)
    pod_spec = template["spec"] = template.get("spec") or {}
    overridden = pod_spec.get("restartPolicy") is not None
    # The pod never restarts on its own under ExitCode: the engine decides from the exit code.
    pod_spec["restartPolicy"] = str(RestartPolicy.NEVER if policy is RestartPolicy.EXIT_CODE else policy)

    return ReplicaPlan(
        name=framework.pod_name(job, replica_type, index),
        replica_type=replica_type,
        index=index,
        labels=labels,
        restart_policy=policy,
        main_container=_main_container(containers, framework),
        template=template,
        template_restart_policy_overridden=overridden,
    )
