"""What every kind's migration shares: the run policy, restart policies, metadata and the pod templates.

The mapping (docs/migration.md, "From v1 jobs to TrainJob"):

- ``runPolicy.suspend`` and ``activeDeadlineSeconds`` are the TrainJob's own fields; ``managedBy`` carries
  over for MultiKueue (the only other value v1 allows, its own operator's name, becomes Trainer's default).
- A replica's ``restartPolicy`` becomes its pod template's, and how often a failed pod comes back becomes the
  Job's ``backoffLimit``: ``Never`` never (0), ``OnFailure`` up to ``runPolicy.backoffLimit`` (v1 had no limit
  when it was unset), ``ExitCode`` through a ``podFailurePolicy`` that fails the TrainJob on exit codes 1-127
  and retries the rest, as v1 did; ``Always`` is ``OnFailure`` (a Job's pods may not restart after success).
- ``ttlSecondsAfterFinished`` becomes the JobSet's, ``schedulingPolicy`` the runtime's ``podGroupPolicy``;
  ``cleanPodPolicy`` has no field: a JobSet deletes its running pods when it finishes, as ``Running`` did.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api.common import CleanPodPolicy, RestartPolicy, RunPolicy
from kubetrain.api.jobs import TrainingJob
from kubetrain.api.trainer import MULTIKUEUE_CONTROLLER, PodGroupPolicy
from kubetrain.frameworks.migration.result import Note
from kubetrain.frameworks.trainer.constants import NODE, VOLCANO_QUEUE_ANNOTATION

Obj = dict[str, Any]

UNLIMITED_RETRIES = 2**31 - 1
"""A Job's ``backoffLimit`` standing for v1's "no limit" (the largest the field takes)."""
DEFAULT_JOB_BACKOFF_LIMIT = 6
"""A Job's ``backoffLimit`` when its template sets none (Kubernetes' default): what a built-in runtime "
"gives."""
RETRYABLE_EXIT_CODE = 128
"""v1's ``ExitCode`` policy recreates a pod whose container exited with a code at or above this."""
V1_CONTROLLERS = ("kubeflow.org/training-operator", "kubeflow.org/mpi-operator")
"""``runPolicy.managedBy`` values naming the v1 operators themselves: Trainer's controller takes their "
"place."""
DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)
"""Annotations that describe the v1 object rather than the job, left behind."""


def trainjob_metadata(job: TrainingJob) -> Obj:
    """The v1 job's name, namespace, labels and annotations (Kueue's queue label among them)."""
    metadata: Obj = {"name": job.name}
    if job.metadata.namespace:
        metadata["namespace"] = job.metadata.namespace
    if job.metadata.labels:
        metadata["labels"] = dict(job.metadata.labels)
    annotations = {k: v for k, v in (job.metadata.annotations or {}).items() if k not in DROPPED_ANNOTATIONS}
    if annotations:
        metadata["annotations"] = annotations
    return metadata


def runtime_metadata(job: TrainingJob, framework_label: str) -> Obj:
    """A namespaced runtime named after the job, beside it, labelled as the Kubeflow SDK requires."""
    from kubetrain.frameworks.trainer.constants import FRAMEWORK_LABEL

    metadata: Obj = {"name": job.name, "labels": {FRAMEWORK_LABEL: framework_label}}
    if job.metadata.namespace:
        metadata["namespace"] = job.metadata.namespace
    return metadata


# --- restart policies -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Retries:
    """How one replica type's pods restart and come back, as a Job says it."""

    pod_restart_policy: str
    """The pod template's ``restartPolicy`` (``Never`` or ``OnFailure``: what a Job accepts)."""
    job_fields: Obj
    """``backoffLimit`` and, for ``ExitCode``, ``podFailurePolicy``."""
    notes: tuple[Note, ...] = ()

    @property
    def backoff_limit(self) -> int:
        return int(self.job_fields.get("backoffLimit", DEFAULT_JOB_BACKOFF_LIMIT))


def retries(policy: RestartPolicy, backoff_limit: int | None, path: str, container: str = NODE) -> Retries:
    """``policy`` (a replica's, at ``path``) and the run policy's ``backoffLimit`` as a Job's retries."""
    limit = backoff_limit if backoff_limit is not None else UNLIMITED_RETRIES
    if policy is RestartPolicy.NEVER:
        # v1 never restarted or recreated a Never replica, whatever backoffLimit said.
        return Retries("Never", {"backoffLimit": 0})
    if policy is RestartPolicy.EXIT_CODE:
        permanent = list(range(1, RETRYABLE_EXIT_CODE))
        rule = {
            "action": "FailJob",
            "onExitCodes": {"containerName": container, "operator": "In", "values": permanent},
        }
        note = Note(
            path,
            "ExitCode becomes restartPolicy Never and a podFailurePolicy on the Job: exit codes 1-127 fail "
            "the TrainJob, any other failure recreates the pod, within backoffLimit",
        )
        return Retries("Never", {"backoffLimit": limit, "podFailurePolicy": {"rules": [rule]}}, (note,))
    notes: tuple[Note, ...] = ()
    if policy is RestartPolicy.ALWAYS:
        notes = (
            Note(
                path,
                "Always becomes OnFailure: a Job's pods may not restart after they succeed, so a pod that "
                "exits 0 now stays done",
            ),
        )
    return Retries("OnFailure", {"backoffLimit": limit}, notes)


# --- the run policy -------------------------------------------------------------------------------------


@dataclass
class RunPolicyMapping:
    """The run policy, split between the TrainJob, the runtime and the notes."""

    trainjob_spec: Obj = field(default_factory=dict)
    """``suspend``, ``activeDeadlineSeconds``, ``managedBy``."""
    jobset_spec: Obj = field(default_factory=dict)
    """The runtime's JobSet fields: ``ttlSecondsAfterFinished``."""
    pod_group_policy: PodGroupPolicy | None = None
    template_annotations: dict[str, str] = field(default_factory=dict)
    """The JobSet's annotations (Volcano's queue)."""
    notes: list[Note] = field(default_factory=list)

    @property
    def needs_runtime(self) -> bool:
        """Whether only a runtime of the job's own can carry it (a built-in one has none of these)."""
        return bool(self.jobset_spec or self.pod_group_policy or self.template_annotations)


def run_policy(written: RunPolicy, path: str = "spec.runPolicy") -> RunPolicyMapping:
    """``written`` (the run policy as the user wrote it, before defaulting) as TrainJob and runtime fields."""
    mapping = RunPolicyMapping()
    if written.suspend:
        mapping.trainjob_spec["suspend"] = True
    if written.active_deadline_seconds is not None:
        mapping.trainjob_spec["activeDeadlineSeconds"] = written.active_deadline_seconds
    if written.managed_by == MULTIKUEUE_CONTROLLER:
        mapping.trainjob_spec["managedBy"] = MULTIKUEUE_CONTROLLER
    if written.ttl_seconds_after_finished is not None:
        mapping.jobset_spec["ttlSecondsAfterFinished"] = written.ttl_seconds_after_finished
        mapping.notes.append(
            Note(
                f"{path}.ttlSecondsAfterFinished",
                "becomes the JobSet's: it deletes the JobSet and its pods once finished, but the TrainJob "
                "stays (a TrainJob has no TTL, kubeflow/trainer#2899)",
            )
        )
    if written.clean_pod_policy in (CleanPodPolicy.NONE, CleanPodPolicy.ALL):
        mapping.notes.append(
            Note(
                f"{path}.cleanPodPolicy",
                f"{written.clean_pod_policy.value} has no TrainJob field: when the JobSet finishes it "
                "deletes the pods still running and keeps the finished ones until the TrainJob is deleted "
                "(as Running did)",
            )
        )
    if written.scheduling_policy is not None:
        _gang(written, f"{path}.schedulingPolicy", mapping)
    return mapping


def _gang(written: RunPolicy, path: str, mapping: RunPolicyMapping) -> None:
    policy = written.scheduling_policy
    assert policy is not None
    if policy.queue is not None or policy.priority_class is not None:
        mapping.pod_group_policy = PodGroupPolicy.model_validate({"volcano": {}})
        chosen = "volcano (the policy names a queue or priority class, which only Volcano reads)"
        if policy.queue is not None:
            mapping.template_annotations[VOLCANO_QUEUE_ANNOTATION] = policy.queue
    else:
        coscheduling: Obj = {}
        if policy.schedule_timeout_seconds is not None:
            coscheduling["scheduleTimeoutSeconds"] = policy.schedule_timeout_seconds
        mapping.pod_group_policy = PodGroupPolicy.model_validate({"coscheduling": coscheduling})
        chosen = "coscheduling"
    mapping.notes.append(
        Note(
            path,
            f"becomes the runtime's podGroupPolicy, {chosen}; a v1 operator chose its gang scheduler by flag "
            "(--gang-scheduler-name), so change it if your cluster runs the other",
        )
    )
    if policy.min_available is not None:
        mapping.notes.append(
            Note(f"{path}.minAvailable", "is dropped: Trainer's PodGroup waits for every pod of the TrainJob")
        )
    if policy.min_resources is not None:
        mapping.notes.append(
            Note(f"{path}.minResources", "is dropped: Trainer's PodGroup sums every pod's requests")
        )
    if policy.priority_class is not None:
        mapping.notes.append(
            Note(
                f"{path}.priorityClass",
                "is dropped: Trainer's Volcano PodGroup takes the pod template's priorityClassName; set "
                "that in the runtime (it also gives the pods that priority)",
            )
        )


# --- pod templates --------------------------------------------------------------------------------------


def pod_template(template: Mapping[str, Any]) -> Obj:
    """A copy of a v1 pod template, without the empty metadata an API server stores in one
    (``creationTimestamp: null``): a job read back with ``kubectl get -o yaml`` migrates as written."""
    copied = copy.deepcopy(dict(template))
    metadata = {k: v for k, v in (copied.pop("metadata", None) or {}).items() if v not in (None, {}, [])}
    return {"metadata": metadata, **copied} if metadata else copied


def main_container_index(template: Mapping[str, Any], name: str | None) -> int:
    """The container a v1 operator treats as the job's: the one named ``name``, else the first."""
    containers = (template.get("spec") or {}).get("containers") or []
    for position, container in enumerate(containers):
        if name is not None and container.get("name") == name:
            return position
    return 0


def differences(left: Any, right: Any, path: str = "") -> list[str]:
    """The paths (``spec.containers[0].args``) where two templates differ."""
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        found: list[str] = []
        for key in [*left, *(k for k in right if k not in left)]:
            found += differences(left.get(key), right.get(key), f"{path}.{key}" if path else str(key))
        return found
    if isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        return [
            d
            for i, (a, b) in enumerate(zip(left, right, strict=True))
            for d in differences(a, b, f"{path}[{i}]")
        ]
    return [] if left == right else [path]


def without_port(container: Obj, port_name: str | None) -> tuple[Obj, Obj | None]:
    """``container`` without the v1 kind's rendezvous port (Trainer's policy adds its own), and that port."""
    ports = container.get("ports") or []
    found = next((p for p in ports if port_name is not None and p.get("name") == port_name), None)
    if found is None:
        return container, None
    rest = [p for p in ports if p is not found]
    stripped = {k: v for k, v in container.items() if k != "ports"}
    if rest:
        stripped["ports"] = rest
    return stripped, found


def node_container(container: Obj) -> Obj:
    """The v1 container as the runtime's ``node``: Trainer's policies and the TrainJob's fields find it by
    that name. Its program (command, args, env) moves to the TrainJob."""
    moved = ("name", "command", "args", "env")
    return {"name": NODE, **{k: copy.deepcopy(v) for k, v in container.items() if k not in moved}}


def with_env(env: list[Obj], *added: Obj) -> list[Obj]:
    """``env`` with each of ``added`` appended unless the user set that name already."""
    names = {e.get("name") for e in env}
    return [*env, *(e for e in added if e.get("name") not in names)]


def without_reserved(
    env: list[Obj], reserved: frozenset[str], path: str, who: str
) -> tuple[list[Obj], list[Note]]:
    """``env`` without the names Trainer's webhook refuses in ``spec.trainer.env`` (its policy sets them)."""
    kept = [e for e in env if e.get("name") not in reserved]
    dropped = sorted(str(e.get("name")) for e in env if e.get("name") in reserved)
    notes = (
        [
            Note(
                f"{path}.env",
                f"{', '.join(dropped)} dropped: {who} sets them, and refuses them in a TrainJob",
            )
        ]
        if dropped
        else []
    )
    return kept, notes


def exporting(exports: Mapping[str, str], command: list[str]) -> list[str]:
    """``command`` started by ``sh``, which first exports each name with the value of its shell expression:
    how a program that reads v1's env names finds its peers in the env Trainer's policy sets."""
    assignments = " ".join(f"{name}={value}" for name, value in exports.items())
    return ["sh", "-c", f'export {assignments}; exec "$@"', "sh", *command]
