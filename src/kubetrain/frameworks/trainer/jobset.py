"""The JobSet a TrainJob runs as (Trainer's ``JobSet`` plugin): its pods' names, the counts written into it,
the initializer and trainer overrides, the object itself, and the TrainJob status read back from it."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from kubetrain.api.errors import FieldError
from kubetrain.api.trainer import Condition, JobStatus, TrainJob
from kubetrain.frameworks.trainer.constants import (
    ANCESTOR_LABEL,
    ANCESTOR_TRAINER,
    DATASET_INITIALIZER,
    DEFAULT_JOB_REPLICAS,
    INITIALIZER_VOLUME,
    MODEL_INITIALIZER,
    NODE,
    STORAGE_URI_ENV,
)
from kubetrain.frameworks.trainer.info import Obj, RuntimeInfo, env_value, upsert_env, with_go_quantities
from kubetrain.frameworks.trainer.plugin import Addressing, Existing, RuntimePlugin

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
JOBSET_KIND = "JobSet"
PROTECTED_ENV_CONTAINERS = (DATASET_INITIALIZER, MODEL_INITIALIZER, NODE)
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_PATH = re.compile(r"^[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$")


def job_template(job: Mapping[str, Any]) -> Obj:
    template: Obj = job.get("template") or {}
    return template


def ancestor_of(job: Mapping[str, Any]) -> str | None:
    labels = (job_template(job).get("metadata") or {}).get("labels") or {}
    ancestor = labels.get(ANCESTOR_LABEL)
    return str(ancestor) if ancestor is not None else None


def pod_spec_of(job: Mapping[str, Any]) -> Obj:
    spec: Obj = ((job_template(job).get("spec") or {}).get("template") or {}).get("spec") or {}
    return spec


def subdomain_of(jobset_spec: Mapping[str, Any], trainjob: str) -> str:
    return str((jobset_spec.get("network") or {}).get("subdomain") or trainjob)


class JobSetPlugin(RuntimePlugin):
    name = "JobSet"

    def validate(self, info: RuntimeInfo, trainjob: TrainJob) -> list[FieldError]:
        containers: dict[str, set[str]] = {}
        for job in info.replicated_jobs():
            spec = pod_spec_of(job)
            containers[str(job.get("name"))] = {
                str(c.get("name"))
                for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
            }
        errors: list[FieldError] = []
        initializer = trainjob.spec.initializer
        for step, configured in (
            (DATASET_INITIALIZER, initializer is not None and initializer.dataset is not None),
            (MODEL_INITIALIZER, initializer is not None and initializer.model is not None),
        ):
            if configured:
                errors += _initializer_errors(info, containers, step)
        for patch in trainjob.spec.runtime_patches or []:
            errors += _manager_errors(patch.manager)
            spec = ((patch.training_runtime_spec or {}).get("template") or {}).get("spec") or {}
            for job_patch in spec.get("replicatedJobs") or []:
                errors += _job_patch_errors(job_patch, containers)
        return errors

    def identify_pod_network(self, info: RuntimeInfo, trainjob: TrainJob, addressing: Addressing) -> None:
        subdomain = subdomain_of(info.jobset_spec, trainjob.name)
        for pod_set in info.pod_sets:
            pod_set.endpoints = tuple(
                addressing.host(trainjob.name, pod_set.name, job_index, pod_index, subdomain)
                for job_index in range(pod_set.replicas)
                for pod_index in range(pod_set.count)
            )

    def sync_parallel_count(self, info: RuntimeInfo) -> None:
        for pod_set in info.pod_sets:
            for job in info.replicated_jobs():
                if job.get("name") == pod_set.name:
                    spec = job.setdefault("template", {}).setdefault("spec", {})
                    spec["parallelism"] = spec["completions"] = pod_set.count
                    break

    def build(self, info: RuntimeInfo, trainjob: TrainJob, existing: Existing) -> list[Obj]:
        if existing.jobset_suspended is False and not trainjob.spec.suspend:
            return []  # a running JobSet is never re-applied: its pods would not follow anyway
        spec = info.jobset_spec
        for job in spec.get("replicatedJobs") or []:
            ancestor = ancestor_of(job)
            if ancestor in (DATASET_INITIALIZER, MODEL_INITIALIZER):
                job["replicas"] = 1
                _initializer(job, trainjob, ancestor)
            if ancestor == ANCESTOR_TRAINER:
                job["replicas"] = 1
                _trainer_overrides(job, info)
            launcher_as_node = bool(
                info.ml_policy and info.ml_policy.mpi and info.ml_policy.mpi.run_launcher_as_node
            )
            if (ancestor == ANCESTOR_TRAINER or (launcher_as_node and job.get("name") == NODE)) and (
                trainjob.spec.trainer is not None
            ):
                for container in pod_spec_of(job).get("containers") or []:
                    if container.get("name") == NODE:
                        upsert_env(container, *(trainjob.spec.trainer.env or []))
            with_go_quantities(pod_spec_of(job))
            template = job_template(job).setdefault("spec", {}).setdefault("template", {})
            if info.pod_labels:
                pod_meta = template.setdefault("metadata", {})
                pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **info.pod_labels}
            if info.pod_annotations:
                pod_meta = template.setdefault("metadata", {})
                pod_meta["annotations"] = {**(pod_meta.get("annotations") or {}), **info.pod_annotations}
        if trainjob.spec.suspend is not None:
            spec["suspend"] = trainjob.spec.suspend
        if existing.jobset_volume_claim_policies is not None:
            # Immutable: JobSet takes an apply of them only as it stored them, its defaults included
            # (``retentionPolicy``, an empty claim ``status``). Trainer v2.3.0 applies the runtime's
            # instead, so its TrainJob on a torchtune runtime, once suspended, is never resumed.
            spec["volumeClaimPolicies"] = copy.deepcopy(list(existing.jobset_volume_claim_policies))
        metadata: Obj = {"name": trainjob.name}
        if info.labels:
            metadata["labels"] = dict(info.labels)
        if info.annotations:
            metadata["annotations"] = dict(info.annotations)
        return [{"apiVersion": JOBSET_API, "kind": JOBSET_KIND, "metadata": metadata, "spec": spec}]


def _initializer(job: Obj, trainjob: TrainJob, step: str) -> None:
    initializer = trainjob.spec.initializer
    config = None
    if initializer is not None:
        config = initializer.dataset if step == DATASET_INITIALIZER else initializer.model
    if config is None:
        return
    for container in pod_spec_of(job).get("containers") or []:
        if container.get("name") != step:
            continue
        if config.storage_uri is not None:
            upsert_env(container, env_value(STORAGE_URI_ENV, config.storage_uri))
        upsert_env(container, *(config.env or []))
        if config.secret_ref is not None:
            container["envFrom"] = [
                *(container.get("envFrom") or []),
                {"secretRef": {"name": config.secret_ref.name}},
            ]


def _trainer_overrides(job: Obj, info: RuntimeInfo) -> None:
    trainer = info.trainjob.spec.trainer
    if trainer is None:
        return
    for container in pod_spec_of(job).get("containers") or []:
        if container.get("name") != NODE:
            continue
        if trainer.image is not None:
            container["image"] = trainer.image
        if info.trainer_command is not None:
            container["command"] = list(info.trainer_command)
        if trainer.args is not None:
            container["args"] = list(trainer.args)


def _initializer_errors(info: RuntimeInfo, containers: dict[str, set[str]], step: str) -> list[FieldError]:
    config = "datasetConfig" if step == DATASET_INITIALIZER else "modelConfig"
    if step not in containers:
        return [
            FieldError(
                "spec.runtimeRef", f"must have {step} job when trainJob is configured with input {config}"
            )
        ]
    if step not in containers[step]:
        return [FieldError("spec.runtimeRef", f"must have container with name - {step} in the {step} job")]
    for job in info.replicated_jobs():
        if job.get("name") != step:
            continue
        for container in pod_spec_of(job).get("containers") or []:
            mounts = container.get("volumeMounts") or []
            if container.get("name") == step and any(m.get("name") == INITIALIZER_VOLUME for m in mounts):
                return []
    return [
        FieldError(
            "spec.runtimeRef",
            f"must have volumeMount with name - {INITIALIZER_VOLUME} in container {step} of the {step} job",
        )
    ]


def _manager_errors(manager: str) -> list[FieldError]:
    """Kubernetes' ``IsDomainPrefixedPath``: ``<DNS subdomain>/<path>``."""
    path = "spec.runtimePatches.manager"
    domain, slash, rest = manager.partition("/")
    if not slash or not domain or not rest:
        return [FieldError(path, 'Invalid value: must be a domain-prefixed path (such as "acme.io/foo")')]
    errors = []
    if len(domain) > 253 or not _DNS1123_SUBDOMAIN.match(domain):
        errors.append(FieldError(path, f"Invalid value: {domain!r}: must be a lowercase RFC 1123 subdomain"))
    if not _PATH.match(rest):
        errors.append(FieldError(path, f"Invalid value: {rest!r}: must be a valid path"))
    return errors


def _job_patch_errors(job_patch: Mapping[str, Any], containers: dict[str, set[str]]) -> list[FieldError]:
    path = "spec.runtimePatches"
    name = str(job_patch.get("name"))
    if name not in containers:
        return [
            FieldError(path, "must not have replicated job that doesn't exist in the runtime job template")
        ]
    pod_spec = (
        (((job_patch.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec")
    ) or {}
    errors = [
        FieldError(path, f"must not have initContainer that doesn't exist in the runtime job {name}")
        for container in pod_spec.get("initContainers") or []
        if container.get("name") not in containers[name]
    ]
    for container in pod_spec.get("containers") or []:
        if container.get("name") not in containers[name]:
            errors.append(
                FieldError(path, f"must not have container that doesn't exist in the runtime job {name}")
            )
        elif container.get("env") and container.get("name") in PROTECTED_ENV_CONTAINERS:
            errors.append(
                FieldError(
                    path, f"must not have envs for the {', '.join(PROTECTED_ENV_CONTAINERS)} containers"
                )
            )
    return errors


def replicas_of(job: Mapping[str, Any]) -> int:
    replicas = job.get("replicas")
    return int(replicas) if isinstance(replicas, int) else DEFAULT_JOB_REPLICAS


# --- status -------------------------------------------------------------------------------------------


def finished_conditions(jobset: Mapping[str, Any]) -> list[Condition]:
    """The JobSet's ``Completed`` (as ``Complete``) and ``Failed``, when True, copied as they are."""
    found = []
    for condition in (jobset.get("status") or {}).get("conditions") or []:
        kind = {"Completed": "Complete", "Failed": "Failed"}.get(str(condition.get("type")))
        if kind is not None and condition.get("status") == "True":
            found.append(Condition.model_validate({**condition, "type": kind}))
    return found


def jobs_status(jobset: Mapping[str, Any]) -> list[JobStatus]:
    """The JobSet's ``replicatedJobsStatus``, one for one."""
    return [
        JobStatus.model_validate(entry)
        for entry in (jobset.get("status") or {}).get("replicatedJobsStatus") or []
        if isinstance(entry, Mapping) and entry.get("name")
    ]
