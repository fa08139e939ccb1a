"""Kubernetes manifests for a job's children: Pods, headless Services, PodGroups (§3, §4.9).

Pure functions of the job and the engine's ``ReplicaPlan``; the controller and ``kubetrain plan``
both render through here, so what ``plan`` prints is what the operator creates.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kubetrain.api.jobs import TrainingJob
from kubetrain.api.quantity import add_resources, format_quantity
from kubetrain.engine.gang import VOLCANO
from kubetrain.engine.planning import replica_count
from kubetrain.engine.types import ReplicaPlan
from kubetrain.frameworks.addressing import Addressing
from kubetrain.frameworks.base import Framework, InitSettings, decorate_pod_spec
from kubetrain.frameworks.labels import (
    APP_LABEL,
    JOB_NAME_LABEL,
    OPERATOR_NAME_LABEL,
    REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL,
)
from kubetrain.kube.status.injection import StatusInjection, inject_status_reporting

VOLCANO_GROUP = "scheduling.volcano.sh"
SCHEDULER_PLUGINS_GROUP = "scheduling.x-k8s.io"
VOLCANO_GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_TASK_SPEC_ANNOTATION = "volcano.sh/task-spec"
SCHEDULER_PLUGINS_POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
SERVICE_SELECTOR_LABELS = (OPERATOR_NAME_LABEL, JOB_NAME_LABEL, REPLICA_TYPE_LABEL, REPLICA_INDEX_LABEL)


@dataclass(frozen=True)
class RenderSettings:
    """Operator-wide settings that shape children (upstream's command-line flags)."""

    gang_scheduler: str | None = None
    """``volcano``, a scheduler-plugins scheduler name, or None (``--gang-scheduler-name``)."""
    init: InitSettings = field(default_factory=InitSettings)
    status: StatusInjection | None = None
    """Where pods reach the status endpoint; None (the endpoint off) renders pods exactly as upstream."""

    @property
    def is_volcano(self) -> bool:
        return (self.gang_scheduler or "").lower() == VOLCANO


def owner_reference(job: TrainingJob) -> dict[str, Any]:
    return {
        "apiVersion": job.API_VERSION,
        "kind": job.KIND,
        "name": job.name,
        "uid": job.metadata.uid or "",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _gang_decoration(
    pod: dict[str, Any],
    job: TrainingJob,
    plan: ReplicaPlan,
    settings: RenderSettings,
    framework: Framework[Any],
) -> bool:
    """Point the pod at the gang scheduler; False when the user chose another scheduler (kept, warned)."""
    spec, metadata = pod["spec"], pod["metadata"]
    scheduler_kept = True
    # mpi-operator overrides the template's scheduler; the training operator keeps it and warns.
    if framework.mpi_operator_gang or not spec.get("schedulerName"):
        spec["schedulerName"] = VOLCANO if settings.is_volcano else settings.gang_scheduler
    elif spec["schedulerName"] != (VOLCANO if settings.is_volcano else settings.gang_scheduler):
        scheduler_kept = False
    if settings.is_volcano:
        annotations = metadata.setdefault("annotations", {})
        annotations[VOLCANO_GROUP_NAME_ANNOTATION] = job.name
        if not framework.mpi_operator_gang:
            annotations[VOLCANO_TASK_SPEC_ANNOTATION] = plan.replica_type.lower()
    else:
        metadata["labels"][SCHEDULER_PLUGINS_POD_GROUP_LABEL] = job.name
    return scheduler_kept


@dataclass(frozen=True)
class RenderedPod:
    manifest: dict[str, Any]
    user_scheduler_kept: bool = True
    """Gang scheduling is on but the template names another scheduler (upstream warns)."""


def render_pod(
    job: TrainingJob,
    plan: ReplicaPlan,
    framework: Framework[Any],
    addressing: Addressing,
    settings: RenderSettings,
) -> RenderedPod:
    template = copy.deepcopy(plan.template)
    user_metadata = {k: v for k, v in (template.get("metadata") or {}).items() if v is not None}
    metadata = {
        "name": plan.name,
        "namespace": job.namespace,
        **{k: v for k, v in user_metadata.items() if k not in ("name", "namespace")},
        "ownerReferences": [owner_reference(job)],
    }
    spec = template.get("spec") or {}
    init = framework.init_containers(job, plan.replica_type, plan.index, addressing, settings.init)
    if init:
        spec["initContainers"] = [*(spec.get("initContainers") or []), *init]
    decorate_pod_spec(spec, framework.pod_decoration(job, plan.replica_type, plan.index))
    if settings.status is not None:
        inject_status_reporting(
            spec,
            settings.status,
            api_version=job.API_VERSION,
            namespace=job.namespace,
            plural=job.PLURAL,
            name=job.name,
        )
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    scheduler_kept = (
        _gang_decoration(pod, job, plan, settings, framework) if settings.gang_scheduler else True
    )
    return RenderedPod(pod, scheduler_kept)


def as_batch_job(job: TrainingJob, pod: dict[str, Any]) -> dict[str, Any]:
    """A ``batch/v1`` Job running ``pod`` once, with the job's run policy (MPI v2beta1's launcher), as the
    mpi-operator makes it: labelled ``app: <job>`` only (the pod's labels are on its template), the pod
    replacement policy left to the API's default, and the job's ownerReference in the template's metadata
    too (the Job controller copies only labels and annotations from it to the pod)."""
    policy = job.run_policy
    pod_metadata = {
        k: v for k, v in pod["metadata"].items() if k in ("labels", "annotations", "ownerReferences")
    }
    spec: dict[str, Any] = {"template": {"metadata": pod_metadata, "spec": pod["spec"]}}
    for name, value in (
        ("ttlSecondsAfterFinished", policy.ttl_seconds_after_finished),
        ("activeDeadlineSeconds", policy.active_deadline_seconds),
        ("backoffLimit", policy.backoff_limit),
    ):
        if value is not None:
            spec[name] = value
    if policy.suspend:
        spec["suspend"] = True
    metadata = {k: pod["metadata"][k] for k in ("name", "namespace", "ownerReferences")}
    metadata["labels"] = {APP_LABEL: job.name}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


def render_config_map(
    job: TrainingJob, framework: Framework[Any], addressing: Addressing, running_hosts: list[str]
) -> dict[str, Any] | None:
    """``<job>-config`` holding the framework's config files, or None when it has none."""
    files = framework.config_files(job, addressing, running_hosts)
    if not files:
        return None
    return _owned(
        job,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{job.name}-config", "labels": {APP_LABEL: job.name}},
            "data": files,
        },
    )


def render_companions(job: TrainingJob, framework: Framework[Any]) -> list[dict[str, Any]]:
    """The framework's companion objects, placed in the job's namespace and owned by it."""
    return [_owned(job, copy.deepcopy(obj)) for obj in framework.companion_objects(job)]


def _owned(job: TrainingJob, obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"] = {
        "name": obj["metadata"]["name"],
        "namespace": job.namespace,
        **{k: v for k, v in obj["metadata"].items() if k != "name"},
        "ownerReferences": [owner_reference(job)],
    }
    return obj


def render_service(
    job: TrainingJob, replica_type: str, index: int, framework: Framework[Any]
) -> dict[str, Any]:
    """The headless Service named like its pod, selecting exactly that pod.

    Its ports are the default container's (name and port only, as upstream). Read from the job's template
    as it is: a service needs none of the copy and env a pod's plan makes.
    """
    template = job.replica_specs[replica_type].template
    labels = {
        **((template.get("metadata") or {}).get("labels") or {}),
        **framework.replica_labels(job, replica_type, index),
    }
    selector = {key: labels[key] for key in SERVICE_SELECTOR_LABELS}
    containers = (template.get("spec") or {}).get("containers") or []
    main = next((c for c in containers if c.get("name") == framework.default_container), None)
    ports = [{"name": p.get("name"), "port": p.get("containerPort")} for p in (main or {}).get("ports") or []]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": framework.pod_name(job, replica_type, index),
            "namespace": job.namespace,
            "labels": dict(selector),
            "ownerReferences": [owner_reference(job)],
        },
        "spec": {"clusterIP": "None", "selector": selector, "ports": ports},
    }


def _pod_requests(template: Mapping[str, Any]) -> dict[str, str | int]:
    total: dict[str, Fraction] = {}
    for container in (template.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        add_resources(total, resources.get("requests") or resources.get("limits") or {})
    return {name: format_quantity(value) for name, value in total.items()}


def min_resources(
    job: TrainingJob, min_member: int, priority_values: Mapping[str, int] | None = None
) -> dict[str, str | int]:
    """Upstream's computed ``minResources``: requests of the first ``min_member`` pods, by priority.

    Replica types are walked in descending order of their template's PriorityClass value (unknown
    classes count 0), summing each container's requests, or its limits when it has no requests.
    """
    values = priority_values or {}

    def priority(replica_type: str) -> int:
        spec = job.replica_specs[replica_type].template.get("spec") or {}
        return values.get(str(spec.get("priorityClassName", "")), 0)

    total: dict[str, Fraction] = {}
    remaining = min_member
    for replica_type in sorted(job.replica_specs, key=priority, reverse=True):
        pods = min(remaining, replica_count(job, replica_type))
        per_pod = _pod_requests(job.replica_specs[replica_type].template)
        for _ in range(pods):
            add_resources(total, per_pod)
        remaining -= pods
    return {name: format_quantity(value) for name, value in sorted(total.items())}


def render_pod_group(
    job: TrainingJob,
    min_member: int,
    settings: RenderSettings,
    priority_values: Mapping[str, int] | None = None,
    existing_queue: str | None = None,
) -> dict[str, Any]:
    """A Volcano or scheduler-plugins PodGroup named after the job (§4.9)."""
    policy = job.run_policy.scheduling_policy
    resources = (
        dict(policy.min_resources)
        if policy and policy.min_resources
        else min_resources(job, min_member, priority_values)
    )
    metadata: dict[str, Any] = {
        "name": job.name,
        "namespace": job.namespace,
        "ownerReferences": [owner_reference(job)],
    }
    if job.metadata.annotations:
        metadata["annotations"] = dict(job.metadata.annotations)
    spec: dict[str, Any] = {"minMember": min_member, "minResources": resources}
    if settings.is_volcano:
        spec["queue"] = existing_queue or (policy.queue if policy and policy.queue else "default")
        if policy and policy.priority_class:
            spec["priorityClassName"] = policy.priority_class
        api_version = f"{VOLCANO_GROUP}/v1beta1"
    else:
        if policy and policy.schedule_timeout_seconds is not None:
            spec["scheduleTimeoutSeconds"] = policy.schedule_timeout_seconds
        api_version = f"{SCHEDULER_PLUGINS_GROUP}/v1alpha1"
    return {"apiVersion": api_version, "kind": "PodGroup", "metadata": metadata, "spec": spec}
