"""Planning a TrainJob: its runtime and the TrainJob in, every object Trainer v2.3 would apply out.

Pure: what the cluster already holds comes in as ``Existing``, addresses from an ``Addressing``. The steps are
Trainer's (``pkg/runtime/core/trainingruntime.go``): the runtime's JobSet template with the TrainJob's
runtime patches and ``resourcesPerNode`` merged in, one pod set per replicated job, then the plugins' phases
(validation, ML policy, gang policy, pod network, counts, build). ``kubetrain plan``, the operator and the
local runner all plan through here, so what a user previews is what runs.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api.errors import FieldError, InvalidJobError
from kubetrain.api.trainer import (
    API_VERSION,
    CLUSTER_TRAINING_RUNTIME,
    GROUP,
    TRAINING_RUNTIME,
    TrainingRuntime,
    TrainingRuntimeSpec,
    TrainJob,
)
from kubetrain.frameworks.trainer.constants import (
    ANCESTOR_TRAINER,
    NODE,
    SNAPSHOT_KEY,
    SNAPSHOT_SUFFIX,
)
from kubetrain.frameworks.trainer.info import Obj, PodSet, RuntimeInfo, pod_requests
from kubetrain.frameworks.trainer.jobset import ancestor_of, pod_spec_of, replicas_of
from kubetrain.frameworks.trainer.patches import apply_runtime_patches, merge_resources
from kubetrain.frameworks.trainer.plugin import Addressing, ClusterAddressing, Existing, RuntimePlugin
from kubetrain.frameworks.trainer.registry import plugins as default_plugins

RUNTIME_KINDS = (CLUSTER_TRAINING_RUNTIME, TRAINING_RUNTIME)

BUILD_ORDER = ("MPI", "CoScheduling", "Volcano", "JobSet")
"""The objects in apply order: what pods mount (Secrets, ConfigMaps) and the PodGroup before the JobSet."""


@dataclass(frozen=True)
class TrainJobPlan:
    info: RuntimeInfo
    """The runtime as planned: pod sets with their counts and endpoints."""
    objects: tuple[Obj, ...] = field(default=())
    """What to server-side apply, in order, each with the TrainJob's namespace and as its controller owner."""

    @property
    def jobset(self) -> Obj | None:
        return next((o for o in self.objects if o.get("kind") == "JobSet"), None)


def runtime_key(trainjob: TrainJob) -> tuple[str, str]:
    """The (group, kind) of the TrainJob's runtime, defaulted as the CRD defaults it."""
    ref = trainjob.spec.runtime_ref
    return ref.api_group or GROUP, ref.kind or CLUSTER_TRAINING_RUNTIME


def unsupported_runtime(trainjob: TrainJob) -> str | None:
    """``unsupported runtime: <Kind>.<group>`` when the runtime reference names no kind Trainer knows."""
    group, kind = runtime_key(trainjob)
    if group == GROUP and kind in RUNTIME_KINDS:
        return None
    return f"unsupported runtime: {kind}.{group}"


def runtime_info(trainjob: TrainJob, spec: TrainingRuntimeSpec) -> RuntimeInfo:
    """The runtime with the TrainJob's patches and resources merged, one pod set per replicated job."""
    template_meta = spec.template.metadata
    labels = dict((template_meta.labels if template_meta else None) or {})
    annotations = dict((template_meta.annotations if template_meta else None) or {})
    patches: list[Mapping[str, Any]] = []
    for patch in trainjob.spec.runtime_patches or []:
        template = (patch.training_runtime_spec or {}).get("template") or {}
        metadata = template.get("metadata") or {}
        labels.update(metadata.get("labels") or {})
        annotations.update(metadata.get("annotations") or {})
        patches.append({"template": template})
    jobset_spec = apply_runtime_patches(copy.deepcopy(spec.template.spec), patches)
    ml_policy = spec.ml_policy.model_copy(deep=True) if spec.ml_policy else None
    info = RuntimeInfo(
        trainjob=trainjob,
        labels=labels,
        annotations=annotations,
        ml_policy=ml_policy,
        pod_group_policy=spec.pod_group_policy.model_copy(deep=True) if spec.pod_group_policy else None,
        jobset_spec=jobset_spec,
        pod_sets=[],
        trainer_command=list(trainjob.spec.trainer.command)
        if trainjob.spec.trainer and trainjob.spec.trainer.command is not None
        else None,
    )
    trainer = trainjob.spec.trainer
    launcher_as_node = bool(ml_policy and ml_policy.mpi and ml_policy.mpi.run_launcher_as_node)
    for job in jobset_spec.get("replicatedJobs") or []:
        ancestor = ancestor_of(job)
        parallelism = (job.get("template") or {}).get("spec", {}).get("parallelism")
        count = parallelism if isinstance(parallelism, int) else 1
        if ancestor == ANCESTOR_TRAINER and ml_policy is not None:
            count = ml_policy.num_nodes if ml_policy.num_nodes is not None else 1
        pod_spec = pod_spec_of(job)
        if not pod_spec:
            pod_spec = job.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
            pod_spec = pod_spec.setdefault("spec", {})
        trainer_job = ancestor == ANCESTOR_TRAINER and ml_policy is not None
        if (
            trainer is not None
            and trainer.resources_per_node is not None
            and (trainer_job or (launcher_as_node and job.get("name") == NODE))
        ):
            for container in pod_spec.get("containers") or []:
                if container.get("name") == NODE:
                    container["resources"] = merge_resources(
                        container.get("resources"), trainer.resources_per_node
                    )
                    break
        requests, formats = pod_requests(pod_spec)
        info.pod_sets.append(
            PodSet(
                name=str(job.get("name")),
                ancestor=ancestor,
                count=max(count, 1),
                replicas=replicas_of(job),
                pod_spec=pod_spec,
                single_pod_requests=requests,
                request_formats=formats,
            )
        )
    return info


def validate(
    trainjob: TrainJob, spec: TrainingRuntimeSpec, plugins: Sequence[RuntimePlugin] | None = None
) -> list[FieldError]:
    """What Trainer's admission webhook refuses of this TrainJob on this runtime."""
    info = runtime_info(trainjob, spec)
    errors: list[FieldError] = []
    if spec.ml_policy is not None and spec.ml_policy.flux is not None:
        errors.append(
            FieldError(
                "spec.runtimeRef",
                "the runtime's mlPolicy.flux is not supported by kubetrain; use a runtime with torch, mpi, "
                "jax, xgboost or no mlPolicy",
            )
        )
    for plugin in plugins or default_plugins():
        errors += plugin.validate(info, trainjob)
    return errors


def plan(
    trainjob: TrainJob,
    spec: TrainingRuntimeSpec,
    *,
    existing: Existing | None = None,
    addressing: Addressing | None = None,
    plugins: Sequence[RuntimePlugin] | None = None,
) -> TrainJobPlan:
    """Every object the TrainJob needs now, or ``InvalidJobError`` naming what its runtime refuses."""
    plugins = tuple(plugins or default_plugins())
    errors = validate(trainjob, spec, plugins)
    if errors:
        raise InvalidJobError(errors)
    existing = existing or Existing()
    addressing = addressing or ClusterAddressing()
    info = runtime_info(trainjob, spec)
    for plugin in plugins:
        plugin.enforce_ml_policy(info, trainjob, addressing)
    for plugin in plugins:
        plugin.enforce_pod_group_policy(info, trainjob)
    for plugin in plugins:
        plugin.identify_pod_network(info, trainjob, addressing)
    for plugin in plugins:
        plugin.sync_parallel_count(info)
    by_name = {plugin.name: plugin for plugin in plugins}
    objects = [
        obj
        for name in BUILD_ORDER
        if name in by_name
        for obj in by_name[name].build(info, trainjob, existing)
    ]
    return TrainJobPlan(info, tuple(owned(obj, trainjob) for obj in objects))


def owned(obj: Obj, trainjob: TrainJob) -> Obj:
    """``obj`` in the TrainJob's namespace, the TrainJob its controller."""
    metadata = dict(obj.get("metadata") or {})
    metadata["namespace"] = trainjob.namespace
    metadata["ownerReferences"] = [owner_reference(trainjob)]
    return {**obj, "metadata": metadata}


def owner_reference(trainjob: TrainJob) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": trainjob.KIND,
        "name": trainjob.name,
        "uid": trainjob.metadata.uid or "",
        "controller": True,
        "blockOwnerDeletion": True,
    }


# --- the runtime snapshot -------------------------------------------------------------------------------


def snapshot_name(trainjob: str) -> str:
    return f"{trainjob}{SNAPSHOT_SUFFIX}"


def _yaml_codec() -> tuple[Any, Any]:
    """libyaml's safe dumper and loader where PyYAML was built with them (the same text both ways, 4 and 8
    times faster than pure Python): a snapshot is written once per TrainJob and read at each of its
    reconciles, and in pure Python that was most of a reconcile's CPU (docs/benchmarks.md, TrainJobs beside
    Trainer)."""
    import yaml

    return getattr(yaml, "CSafeDumper", yaml.SafeDumper), getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def snapshot_configmap(trainjob: TrainJob, runtime: Mapping[str, Any]) -> Obj:
    """The ConfigMap keeping the runtime as it was when the TrainJob first ran (Trainer's KEP-2599), so that
    later edits of the runtime do not change a running job."""
    import yaml

    dumper, _ = _yaml_codec()
    return owned(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": snapshot_name(trainjob.name)},
            "data": {SNAPSHOT_KEY: yaml.dump(dict(runtime), Dumper=dumper, sort_keys=True)},
        },
        trainjob,
    )


def runtime_from_snapshot(trainjob: TrainJob, configmap: Mapping[str, Any]) -> TrainingRuntime:
    """The runtime a snapshot holds; ``ValueError`` saying why it cannot be used, in Trainer's words."""
    import yaml

    owners = (configmap.get("metadata") or {}).get("ownerReferences") or []
    controller = next((o for o in owners if o.get("controller")), None)
    if controller is None or controller.get("uid") != trainjob.metadata.uid:
        raise ValueError(
            "invalid runtime snapshot: a snapshot configmap exists but is owned by another object"
        )
    text = (configmap.get("data") or {}).get(SNAPSHOT_KEY)
    if text is None:
        raise ValueError(f"invalid runtime snapshot: snapshot ConfigMap missing {SNAPSHOT_KEY!r} data key")
    _, loader = _yaml_codec()
    try:
        stored = yaml.load(text, Loader=loader)
    except yaml.YAMLError as error:
        raise ValueError(f"invalid runtime snapshot: unable to unmarshal the snapshot: {error}") from None
    if not isinstance(stored, dict):
        raise ValueError("invalid runtime snapshot: unable to unmarshal the snapshot: not a mapping")
    group, kind = runtime_key(trainjob)
    found_group = (
        str(stored.get("apiVersion", "")).rsplit("/", 1)[0] if "/" in str(stored.get("apiVersion")) else ""
    )
    found_kind, found_name = str(stored.get("kind", "")), str((stored.get("metadata") or {}).get("name", ""))
    if (found_kind, found_group, found_name) != (kind, group, trainjob.spec.runtime_ref.name):
        raise ValueError(
            "invalid runtime snapshot: the snapshot refers to the wrong runtime: expecting a runtime with "
            f'name, api group and kind of "{trainjob.spec.runtime_ref.name}", "{group}", "{kind}" but found '
            f'runtime with name, api group and kind of "{found_name}", "{found_group}", "{found_kind}"'
        )
    return TrainingRuntime.model_validate(stored)
