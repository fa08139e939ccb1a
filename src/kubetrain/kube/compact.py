"""What the operator's caches keep of a pod or a service: what it reads, nothing more.

A busy cluster keeps thousands of finished jobs and their pods (``cleanPodPolicy: None``, no TTL), and the
operator caches every one as the API server's JSON. Most of a pod's JSON is spec the operator wrote itself
and never reads again: environment variables, volumes and mounts, tolerations, probes, the defaults the API
server filled in. Dropped on the informer's way in, before anything is stored, they cost neither memory at
rest nor a collector's walk.

What is kept, for a pod: all of ``metadata`` but ``managedFields`` (labels, ownerReferences, annotations,
deletionTimestamp: identity, ownership, gang membership), all of ``status`` (phase, conditions, container
states: what ``observe`` reads), and of ``spec`` only ``nodeName``, ``schedulerName`` and each container's
``name``, ``image`` and ``resources``. For a service: its ``metadata`` (the operator reads a service's
identity from its labels and deletes it by name). ``tests/unit/kube/substrate/test_compact.py`` holds
``observe`` to seeing a compacted pod exactly as the whole one.

What is kept is then **interned**: every key, and every string value of up to ``INTERNED_LENGTH``
characters, becomes the one shared copy of that string. The JSON decoder makes a fresh string of every key
of every object, so ten thousand pods hold ten thousand copies of ``"lastTransitionTime"``, of each label's
name and of values such as ``"True"`` or ``"pytorchjob-controller"``; shared, a compacted pod takes 4.4 KB
instead of 9.7 KB and a service 0.9 KB instead of 2.5 KB (tracemalloc, the pods of ``bench/many_jobs.py``),
for no measurable CPU (the rebuild replaces no work: about 90 µs a pod with or without it). Interned strings
are freed with the last object that uses them (``sys.intern`` makes them mortal), so a tenant's strings
do not accumulate.
"""

from __future__ import annotations

import sys
from typing import Any

from kubetrain.api.jobs import GROUP
from kubetrain.frameworks.labels import OPERATOR_NAME_LABEL
from kubetrain.kube.batch_jobs import batch_job_template
from kubetrain.kube.runtime.reflector import strip_managed_fields

POD_SPEC_KEPT = ("nodeName", "schedulerName")
OTHER_JOB_METADATA_KEPT = ("name", "namespace", "uid", "resourceVersion", "ownerReferences")
CONTAINER_KEPT = ("name", "image", "resources")
CONTAINER_LISTS = ("initContainers", "containers")
INTERNED_LENGTH = 64
"""Longer strings (messages, long annotations) are rarely shared; interning them would only cost a lookup."""


def interned(value: Any) -> Any:
    """``value`` rebuilt with its keys and short strings interned (JSON types only: dict, list, scalars)."""
    if isinstance(value, dict):
        return {sys.intern(key): interned(item) for key, item in value.items()}
    if isinstance(value, list):
        return [interned(item) for item in value]
    if isinstance(value, str) and len(value) <= INTERNED_LENGTH:
        return sys.intern(value)
    return value


def compact_object(obj: dict[str, Any]) -> dict[str, Any]:
    """Any cached object (a job): all of it but ``managedFields``, interned."""
    return dict(interned(strip_managed_fields(obj)))


def compact_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod with only what the operator reads, interned."""
    strip_managed_fields(pod)
    spec = pod.get("spec")
    if isinstance(spec, dict):
        kept: dict[str, Any] = {key: spec[key] for key in POD_SPEC_KEPT if key in spec}
        for key in CONTAINER_LISTS:
            containers = spec.get(key)
            if isinstance(containers, list):
                kept[key] = [
                    {field: c[field] for field in CONTAINER_KEPT if field in c} if isinstance(c, dict) else c
                    for c in containers
                ]
        pod["spec"] = kept
    return dict(interned(pod))


def compact_service(service: dict[str, Any]) -> dict[str, Any]:
    """The service's metadata, less managedFields, interned: its spec and status are never read."""
    strip_managed_fields(service)
    for key in ("spec", "status"):
        service.pop(key, None)
    return dict(interned(service))


NODE_METADATA_KEPT = ("name", "uid", "resourceVersion")


def compact_node(node: dict[str, Any]) -> dict[str, Any]:
    """A node as losing it goes (``observe.observe_node``): its name, its ``Ready`` condition and its taints.

    A node's JSON is mostly its images, addresses, capacity and the other conditions (10 to 40 KB); the
    operator reads one condition and one taint of it."""
    metadata = node.get("metadata") or {}
    status = node.get("status") or {}
    # Without its heartbeat, which changes on every status the kubelet posts.
    ready = [
        {key: value for key, value in condition.items() if key != "lastHeartbeatTime"}
        for condition in status.get("conditions") or ()
        if isinstance(condition, dict) and condition.get("type") == "Ready"
    ]
    taints = (node.get("spec") or {}).get("taints") or []
    kept = {
        "metadata": {key: metadata[key] for key in NODE_METADATA_KEPT if key in metadata},
        "spec": {"taints": taints} if taints else {},
        "status": {"conditions": ready},
    }
    return dict(interned(kept))


def compact_batch_job(job: dict[str, Any]) -> dict[str, Any]:
    """A batch/v1 Job of the operator's (controlled by a training job, or its pod template labelled as the
    operator's) whole but ``managedFields``, interned; any other Job only its identity.

    The operator caches every Job of the cluster, unselected: the mpi-operator labels its launcher Job only
    ``app: <job>``, which no selector can tell from anyone's. A cluster's other Jobs (CronJobs', pipelines')
    can number thousands, each with a whole pod template the operator never reads: cached as a name and an
    owner, they cost what a service does."""
    strip_managed_fields(job)
    metadata = job.get("metadata") or {}
    controlled = any(
        ref.get("controller") and str(ref.get("apiVersion", "")).split("/")[0] == GROUP
        for ref in metadata.get("ownerReferences") or ()
    )
    labelled = OPERATOR_NAME_LABEL in ((batch_job_template(job).get("metadata") or {}).get("labels") or {})
    if not (controlled or labelled):
        kept = {key: metadata[key] for key in OTHER_JOB_METADATA_KEPT if key in metadata}
        job = {"apiVersion": job.get("apiVersion"), "kind": job.get("kind"), "metadata": kept}
    return dict(interned(job))
