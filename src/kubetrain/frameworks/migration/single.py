"""The kinds whose replicas all become one replicated job ``node`` of the TrainJob (PyTorchJob, XGBoostJob,
JAXJob): their pods take ranks in one order (the Master first), so ``numNodes`` is the sum of the replica
types' counts and node 0 is the former rank 0, where Trainer's policies put the rendezvous.

One template runs every node: the first replica type's (the Master's). Where the others' differ, a note says
where. The program (image, command, args, env) goes into the TrainJob, adapted to Trainer's rendezvous by the
kind's ``Rendezvous``; the rest of the pod stays in a TrainingRuntime of the job's own, unless nothing is left
that a built-in runtime lacks: then the TrainJob names the built-in one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from kubetrain.api.errors import FieldError
from kubetrain.api.jobs import TrainingJob
from kubetrain.api.trainer import TRAINING_RUNTIME, TrainingRuntime, TrainJob
from kubetrain.frameworks.migration.common import (
    DEFAULT_JOB_BACKOFF_LIMIT,
    Obj,
    differences,
    main_container_index,
    node_container,
    pod_template,
    retries,
    run_policy,
    runtime_metadata,
    trainjob_metadata,
    without_port,
    without_reserved,
)
from kubetrain.frameworks.migration.result import Migration, Note, NotMigratableError
from kubetrain.frameworks.registry import framework_for
from kubetrain.frameworks.trainer.constants import ANCESTOR_LABEL, ANCESTOR_TRAINER, NODE

BUILTIN_CONTAINER_FIELDS = frozenset({"name", "image", "resources"})
"""What a built-in runtime's ``node`` container can take from a TrainJob besides the program."""
BUILTIN_POD_FIELDS = frozenset({"containers", "restartPolicy"})


@dataclass(frozen=True)
class Program:
    """What the training container runs, adapted to Trainer's rendezvous."""

    command: list[str] | None
    args: list[str] | None
    env: list[Obj] = field(default_factory=list)
    num_proc_per_node: int | None = None
    notes: tuple[Note, ...] = ()


class Rendezvous(Protocol):
    """One kind's part: how its program finds its peers under Trainer's ML policy."""

    policy: ClassVar[str]
    """The runtime's ``mlPolicy`` field (``torch``, ``xgboost``, ``jax``)."""
    builtin_runtime: ClassVar[str]
    """Trainer's built-in ClusterTrainingRuntime for it."""
    framework_label: ClassVar[str]
    rank_order: ClassVar[tuple[str, ...]]
    """The replica types, in the order their pods take ranks."""
    reserved_env: ClassVar[frozenset[str]]
    """Env Trainer's policy sets and refuses in a TrainJob."""

    def program(self, job: Any, container: Obj, nodes: int, path: str) -> Program:
        """The container's program (at ``path`` in the v1 job) for ``nodes`` nodes."""
        ...


def migrate_single(job: TrainingJob, rendezvous: Rendezvous) -> Migration:
    framework = framework_for(job)
    defaulted = framework.set_defaults(job)
    specs = defaulted.replica_specs
    types = [t for t in rendezvous.rank_order if t in specs]
    first = types[0]
    nodes = sum(specs[t].replicas or 0 for t in types)
    if nodes < 1:
        raise NotMigratableError(
            [FieldError(f"{job.replica_specs_path}.{first}.replicas", "a TrainJob needs at least one node")]
        )
    notes = _template_notes(defaulted, types)
    template = pod_template(specs[first].template)
    pod_spec: Obj = template.get("spec") or {}
    containers: list[Obj] = pod_spec.get("containers") or []
    index = main_container_index(template, framework.default_container)
    path = f"{job.replica_specs_path}.{first}.template.spec.containers[{index}]"
    container, _ = without_port(containers[index], framework.default_port_name)

    program = rendezvous.program(defaulted, container, nodes, path)
    env, dropped = without_reserved(
        program.env, rendezvous.reserved_env, path, f"Trainer's {rendezvous.policy} policy"
    )
    notes += [*program.notes, *dropped]
    restarts = retries(
        specs[first].restart_policy or framework.default_restart_policy,
        job.run_policy.backoff_limit,
        f"{job.replica_specs_path}.{first}.restartPolicy",
    )
    notes += restarts.notes
    policy = run_policy(job.run_policy)
    notes += policy.notes

    node = node_container(container)
    trainer: Obj = {"image": container.get("image"), "command": program.command, "args": program.args}
    trainer |= {"env": env or None, "numNodes": nodes, "numProcPerNode": program.num_proc_per_node}
    spec: Obj = {**policy.trainjob_spec}
    other_pod_fields = set(pod_spec) - BUILTIN_POD_FIELDS
    builtin = (
        not template.get("metadata")
        and not other_pod_fields
        and len(containers) == 1
        and set(node) <= BUILTIN_CONTAINER_FIELDS
        and restarts.pod_restart_policy == "OnFailure"
        and job.run_policy.backoff_limit in (None, DEFAULT_JOB_BACKOFF_LIMIT)
        and not policy.needs_runtime
    )
    runtime: TrainingRuntime | None = None
    if builtin:
        spec["runtimeRef"] = {"name": rendezvous.builtin_runtime}
        trainer["resourcesPerNode"] = node.get("resources")
        if job.run_policy.backoff_limit is None:
            notes.append(
                Note(
                    "spec.runPolicy.backoffLimit",
                    "unset: v1 restarted failed pods without limit; the Job of the built-in runtime "
                    f"{rendezvous.builtin_runtime} retries them {DEFAULT_JOB_BACKOFF_LIMIT} times "
                    "(Kubernetes' default backoffLimit)",
                )
            )
    else:
        spec["runtimeRef"] = {"name": job.name, "kind": TRAINING_RUNTIME}
        containers[index] = node
        pod = {**template, "spec": {**pod_spec, "restartPolicy": restarts.pod_restart_policy}}
        replicated = {
            "name": NODE,
            "template": {
                "metadata": {"labels": {ANCESTOR_LABEL: ANCESTOR_TRAINER}},
                "spec": {**restarts.job_fields, "template": pod},
            },
        }
        jobset_template: Obj = {"spec": {"replicatedJobs": [replicated], **policy.jobset_spec}}
        if policy.template_annotations:
            jobset_template["metadata"] = {"annotations": policy.template_annotations}
        runtime_spec: Obj = {
            "mlPolicy": {"numNodes": nodes, rendezvous.policy: {}},
            "template": jobset_template,
        }
        if policy.pod_group_policy is not None:
            runtime_spec["podGroupPolicy"] = policy.pod_group_policy.to_wire()
        runtime = TrainingRuntime.model_validate(
            {"metadata": runtime_metadata(job, rendezvous.framework_label), "spec": runtime_spec}
        )
    spec["trainer"] = {k: v for k, v in trainer.items() if v is not None}
    trainjob = TrainJob.model_validate({"metadata": trainjob_metadata(job), "spec": spec})
    return Migration(trainjob, runtime, tuple(notes))


def _template_notes(job: TrainingJob, types: list[str]) -> list[Note]:
    """Where the other replica types' templates and restart policies differ from the first's."""
    first, specs = types[0], job.replica_specs
    notes: list[Note] = []
    for other in types[1:]:
        path = f"{job.replica_specs_path}.{other}"
        found = differences(specs[first].template, specs[other].template)
        if found:
            shown = ", ".join(found[:4]) + (f" and {len(found) - 4} more" if len(found) > 4 else "")
            notes.append(
                Note(
                    f"{path}.template",
                    f"differs from the {first}'s at {shown}: every node of a TrainJob runs one template, the "
                    f"{first}'s",
                )
            )
        if specs[other].restart_policy != specs[first].restart_policy:
            mine, theirs = specs[other].restart_policy, specs[first].restart_policy
            notes.append(
                Note(
                    f"{path}.restartPolicy",
                    f"{mine} differs from the {first}'s {theirs}: every node restarts as the {first} did",
                )
            )
    return notes
