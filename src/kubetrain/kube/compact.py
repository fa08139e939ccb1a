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
identity from its labels and deletes it by name). ``tests/unit/kube/test_compact.py`` holds ``observe`` to
seeing a compacted pod exactly as the whole one.
"""

from __future__ import annotations

from typing import Any

from kubetrain.kube.runtime.reflector import strip_managed_fields

POD_SPEC_KEPT = ("nodeName", "schedulerName")
CONTAINER_KEPT = ("name", "image", "resources")
CONTAINER_LISTS = ("initContainers", "containers")


def compact_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod with only what the operator reads (in place: the object is fresh from the wire)."""
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
    return pod


def compact_service(service: dict[str, Any]) -> dict[str, Any]:
    """The service's metadata, less managedFields: its spec and status are never read."""
    strip_managed_fields(service)
    for key in ("spec", "status"):
        service.pop(key, None)
    return service
