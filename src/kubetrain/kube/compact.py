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

The pod and service informers do not decode what is dropped at all: ``POD_KEPT`` and ``SERVICE_KEPT`` are
the same choice written as msgspec schemas (``kube.runtime.wire.KeptFields``), so the parser skips
``managedFields`` and the rest of the spec without making a Python object of them; ``compact_pod`` and
``compact_service`` remain for what those schemas refuse, and the tests hold both ways to the same dict.

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

from sys import intern as _intern
from typing import Any

import msgspec

from kubetrain.api.jobs import GROUP
from kubetrain.frameworks.labels import OPERATOR_NAME_LABEL
from kubetrain.kube.batch_jobs import batch_job_template
from kubetrain.kube.runtime.reflector import strip_managed_fields
from kubetrain.kube.runtime.wire import KeptFields

POD_SPEC_KEPT = ("nodeName", "schedulerName")
OTHER_JOB_METADATA_KEPT = ("name", "namespace", "uid", "resourceVersion", "ownerReferences")
CONTAINER_KEPT = ("name", "image", "resources")
CONTAINER_LISTS = ("initContainers", "containers")
INTERNED_LENGTH = 64
"""Longer strings (messages, long annotations) are rarely shared; interning them would only cost a lookup."""


def interned(value: Any) -> Any:
    """``value`` rebuilt with its keys and short strings interned (JSON types only: dict, list, scalars, as
    the decoders make them).

    A string, number or boolean inside a dict or list is handled in the loop over its container rather than
    by a call of its own: most of a pod's values are such leaves, and one call each made this walk a third
    slower (``bench/many_jobs.py``'s pods); it is the largest part of decoding a pod to what is kept."""
    kind = type(value)
    if kind is dict:
        rebuilt: dict[str, Any] = {}
        for key, item in value.items():
            item_kind = type(item)
            if item_kind is str:
                rebuilt[_intern(key)] = _intern(item) if len(item) <= INTERNED_LENGTH else item
            elif item_kind is dict or item_kind is list:
                rebuilt[_intern(key)] = interned(item)
            else:
                rebuilt[_intern(key)] = item
        return rebuilt
    if kind is list:
        items: list[Any] = []
        for item in value:
            item_kind = type(item)
            if item_kind is str:
                items.append(_intern(item) if len(item) <= INTERNED_LENGTH else item)
            elif item_kind is dict or item_kind is list:
                items.append(interned(item))
            else:
                items.append(item)
        return items
    if kind is str and len(value) <= INTERNED_LENGTH:
        return _intern(value)
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


# What ``compact_pod`` and ``compact_service`` keep, as schemas (fields in snake case, camel case on the
# wire). Every field is ``Any`` (decoded as the general decoder would) and absent unless sent (``UNSET``), so
# a field sent as null stays null. Where the dict keeps every field (an object's top level, its metadata), an
# unknown field makes the schema refuse the object and it goes the general way (``KeptFields``).
_Absent = msgspec.UnsetType
_ABSENT: Any = msgspec.UNSET


class _Metadata(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    """ObjectMeta: every field, ``managedFields`` only to be skipped."""

    name: Any = _ABSENT
    generate_name: Any = _ABSENT
    namespace: Any = _ABSENT
    self_link: Any = _ABSENT
    uid: Any = _ABSENT
    resource_version: Any = _ABSENT
    generation: Any = _ABSENT
    creation_timestamp: Any = _ABSENT
    deletion_timestamp: Any = _ABSENT
    deletion_grace_period_seconds: Any = _ABSENT
    labels: Any = _ABSENT
    annotations: Any = _ABSENT
    owner_references: Any = _ABSENT
    finalizers: Any = _ABSENT
    managed_fields: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


class _Container(msgspec.Struct):
    name: Any = _ABSENT
    image: Any = _ABSENT
    resources: Any = _ABSENT


class _PodSpec(msgspec.Struct, rename="camel"):
    node_name: Any = _ABSENT
    scheduler_name: Any = _ABSENT
    init_containers: list[_Container] | _Absent | None = _ABSENT
    containers: list[_Container] | _Absent | None = _ABSENT


class _Pod(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    kind: Any = _ABSENT
    api_version: Any = _ABSENT
    metadata: _Metadata | _Absent | None = _ABSENT
    spec: _PodSpec | _Absent | None = _ABSENT
    status: Any = _ABSENT


class _Service(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    kind: Any = _ABSENT
    api_version: Any = _ABSENT
    metadata: _Metadata | _Absent | None = _ABSENT
    spec: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    status: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


def _wire_names(schema: type[msgspec.Struct], *skipped: str) -> tuple[tuple[str, str], ...]:
    """(attribute, name on the wire) of each of the schema's fields but ``skipped``."""
    return tuple((f.name, f.encode_name) for f in msgspec.structs.fields(schema) if f.name not in skipped)


_METADATA_KEPT = _wire_names(_Metadata, "managed_fields")
_IDENTITY_KEPT = _wire_names(_Pod, "metadata", "spec", "status")
_POD_SPEC_KEPT = tuple((name, wire) for name, wire in _wire_names(_PodSpec) if wire in POD_SPEC_KEPT)
_CONTAINER_LISTS_KEPT = tuple((name, wire) for name, wire in _wire_names(_PodSpec) if wire in CONTAINER_LISTS)
_CONTAINER_KEPT = _wire_names(_Container)


def _present(struct: msgspec.Struct, fields: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """The fields the object was sent with, under their wire names (constants: interned already), each
    value interned as it is taken: the dict is built once, not built and then rebuilt by ``interned``."""
    kept: dict[str, Any] = {}
    for name, wire in fields:
        value = getattr(struct, name)
        if value is _ABSENT:
            continue
        kind = type(value)
        if kind is str:
            kept[wire] = _intern(value) if len(value) <= INTERNED_LENGTH else value
        elif kind is dict or kind is list:
            kept[wire] = interned(value)
        else:
            kept[wire] = value
    return kept


def _identity(obj: _Pod | _Service) -> dict[str, Any]:
    kept = _present(obj, _IDENTITY_KEPT)
    metadata = obj.metadata
    if isinstance(metadata, _Metadata):
        kept["metadata"] = _present(metadata, _METADATA_KEPT)
    elif metadata is None:
        kept["metadata"] = None
    return kept


def _kept_pod(pod: _Pod) -> dict[str, Any]:
    kept = _identity(pod)
    spec = pod.spec
    if isinstance(spec, _PodSpec):
        kept_spec = _present(spec, _POD_SPEC_KEPT)
        for name, wire in _CONTAINER_LISTS_KEPT:
            containers = getattr(spec, name)
            if isinstance(containers, list):
                kept_spec[wire] = [_present(container, _CONTAINER_KEPT) for container in containers]
        kept["spec"] = kept_spec
    elif spec is None:
        kept["spec"] = None
    if pod.status is not _ABSENT:
        kept["status"] = interned(pod.status)
    return kept


def _kept_service(service: _Service) -> dict[str, Any]:
    return _identity(service)


POD_KEPT = KeptFields(_Pod, _kept_pod, compact_pod)
"""A pod decoded straight to what ``compact_pod`` keeps of it."""
SERVICE_KEPT = KeptFields(_Service, _kept_service, compact_service)
"""A service decoded straight to what ``compact_service`` keeps of it."""
