"""A TrainJob's ``runtimePatches`` over its runtime's JobSet spec, and ``resourcesPerNode`` over the ``node``
container's resources: Kubernetes' strategic merge patch, as Trainer applies them.

Maps merge key by key (``null`` removes one); lists whose Go field carries a ``patchMergeKey`` merge item by
item on that key (a patch item with a new key is appended, in the patch's order); every other list is
replaced. Only the lists a runtime patch may reach are listed: the JobSet's replicated jobs and the pod spec
fields of ``PodSpecPatch``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kubetrain.frameworks.trainer.info import Obj

_MERGE_KEYS: dict[str, str] = {
    "replicatedJobs": "name",
    "dependsOn": "name",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "imagePullSecrets": "name",
    "schedulingGates": "name",
    "hostAliases": "ip",
    "env": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
}
"""Lists merged item by item, by their field name (as ``patchStrategy:"merge"`` in the Go types)."""


def strategic_merge(original: Any, patch: Any) -> Any:
    """``patch`` merged over ``original`` (neither is modified)."""
    if not isinstance(patch, Mapping) or not isinstance(original, Mapping):
        return copy.deepcopy(patch)
    merged: Obj = copy.deepcopy(dict(original))
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, list) and key in _MERGE_KEYS and isinstance(merged.get(key), list):
            merged[key] = _merge_list(merged[key], value, _MERGE_KEYS[key])
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = strategic_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _merge_list(original: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    merged = list(original)
    for item in patch:
        if not isinstance(item, Mapping) or merge_key not in item:
            merged.append(copy.deepcopy(item))
            continue
        for index, existing in enumerate(merged):
            if isinstance(existing, Mapping) and existing.get(merge_key) == item[merge_key]:
                merged[index] = strategic_merge(existing, item)
                break
        else:
            merged.append(copy.deepcopy(item))
    return merged


def apply_runtime_patches(jobset_spec: Obj, patches: list[Mapping[str, Any]]) -> Obj:
    """Each patch's ``template.spec`` merged over the JobSet spec in turn, the runtime's order of replicated
    jobs kept (Trainer's ``mergeRuntimePatches``)."""
    order = {job.get("name"): index for index, job in enumerate(jobset_spec.get("replicatedJobs") or [])}
    merged = jobset_spec
    for patch in patches:
        spec = ((patch.get("template") or {}) if isinstance(patch, Mapping) else {}).get("spec")
        if isinstance(spec, Mapping):
            merged = strategic_merge(merged, spec)
    jobs = merged.get("replicatedJobs")
    if isinstance(jobs, list):
        merged["replicatedJobs"] = sorted(jobs, key=lambda job: order.get(job.get("name"), len(order)))
    return merged


def merge_resources(base: Mapping[str, Any] | None, override: Mapping[str, Any]) -> Obj:
    """``resourcesPerNode`` over a container's resources: per resource name within requests, limits and
    claims (Trainer's ``MergeResourceRequirements``)."""
    merged: Obj = strategic_merge(dict(base or {}), dict(override))
    return merged
