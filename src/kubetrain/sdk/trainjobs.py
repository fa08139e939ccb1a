"""What the SDK reads of a Kubeflow Trainer v2 TrainJob beside its object: its pods (the JobSet's), which of
them is which node, and the state the Kubeflow SDK gives it.

A TrainJob's pods are made by the JobSet and Job controllers, so they carry JobSet's labels, not kubetrain's
replica labels: ``jobset.sigs.k8s.io/jobset-name=<trainjob>``, ``jobset.sigs.k8s.io/replicatedjob-name``
(``node``, ``launcher``, ``dataset-initializer``, ...), ``jobset.sigs.k8s.io/job-index`` and
``batch.kubernetes.io/job-completion-index``. A replica here is ``<replicated job>-<i>`` with ``i = job index
* parallelism + completion index``, as a TrainJob's local run numbers its processes (``node-0``, ``node-1``):
Trainer's runtimes run one Job per replicated job, so ``i`` is the completion index, the ``node-<i>`` step
of the Kubeflow SDK.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kubetrain.api.summary import NodeTally, trainjob_state
from kubetrain.api.trainer import TrainJob
from kubetrain.frameworks.jobset_run import (
    COMPLETION_INDEX_LABEL,
    JOB_INDEX_LABEL,
    JOBSET_NAME_LABEL,
    REPLICATED_JOB_LABEL,
)
from kubetrain.frameworks.trainer.constants import LAUNCHER, NODE

STATES = ("Created", "Running", "Complete", "Failed", "Suspended")
"""What ``wait_for_job_conditions`` waits for on a TrainJob: the Kubeflow SDK's statuses, and Suspended."""
V1_NAMES = {"Succeeded": "Complete"}
"""A v1 condition that means a TrainJob's state (so the default ``{"Succeeded"}`` waits for Complete)."""
TRAINING_JOBS = (NODE, LAUNCHER)
"""Replicated jobs whose pods are the training nodes (the Kubeflow SDK's ``node-<i>`` steps)."""
ACTIVE = frozenset({"Pending", "Running"})
RUNNING = frozenset({"Running", "Succeeded"})


@dataclass(frozen=True)
class PodSeen:
    """What this module needs of a pod: name, labels and phase (from a Pod model or a wire dict alike)."""

    name: str
    labels: Mapping[str, str]
    phase: str


def pod_selector(name: str, replica_type: str | None = None) -> dict[str, str]:
    """The labels of a TrainJob's pods (of one replicated job)."""
    labels = {JOBSET_NAME_LABEL: name}
    if replica_type is not None:
        labels[REPLICATED_JOB_LABEL] = replica_type
    return labels


def replicas(pods: Iterable[PodSeen]) -> dict[str, tuple[str, int]]:
    """Each pod's replica, ``(replicated job, index)``; pods without JobSet labels are left out. A replicated
    job's parallelism is read from its pods (the highest completion index seen, plus one)."""
    found: dict[str, tuple[str, int, int]] = {}
    parallelism: dict[str, int] = {}
    for pod in pods:
        job = pod.labels.get(REPLICATED_JOB_LABEL)
        try:
            job_index = int(pod.labels.get(JOB_INDEX_LABEL, "0"))
            completion = int(pod.labels[COMPLETION_INDEX_LABEL])
        except (KeyError, ValueError):
            continue
        if not job:
            continue
        found[pod.name] = (job, job_index, completion)
        parallelism[job] = max(parallelism.get(job, 0), completion + 1)
    return {name: (job, j * parallelism[job] + c) for name, (job, j, c) in found.items()}


def container_of(replicated_job: str | None) -> str:
    """The container a step's logs are read from: ``node`` for the training nodes (an MPI launcher's too),
    else the replicated job's name (``dataset-initializer``), as the Kubeflow SDK reads them."""
    if replicated_job is None or replicated_job in TRAINING_JOBS:
        return NODE
    return replicated_job


def replica_name(replica: tuple[str, int]) -> str:
    return f"{replica[0]}-{replica[1]}"


def node_tally(pods: Iterable[PodSeen]) -> NodeTally:
    """The TrainJob's training nodes as its pods show them."""
    phases = [p.phase for p in pods if p.labels.get(REPLICATED_JOB_LABEL) in TRAINING_JOBS]
    return NodeTally(
        seen=len(phases),
        active=sum(p in ACTIVE for p in phases),
        running=sum(p in RUNNING for p in phases),
    )


def state(trainjob: TrainJob, nodes: NodeTally | None) -> str:
    """The TrainJob's state (``api.summary.trainjob_state``): Complete, Failed, Suspended, Running or
    Created."""
    true_conditions = tuple(c.type for c in trainjob.status.conditions or () if c.status == "True")
    num_nodes = trainjob.spec.trainer.num_nodes if trainjob.spec.trainer is not None else None
    return trainjob_state(true_conditions, nodes, num_nodes)


def wanted_states(expected: Iterable[str]) -> set[str]:
    """The TrainJob states ``expected`` names (v1's ``Succeeded`` is ``Complete``); else ``ValueError``."""
    wanted = {V1_NAMES.get(name, name) for name in expected}
    unknown = wanted - set(STATES)
    if unknown or not wanted:
        raise ValueError(
            f"Expected conditions: {sorted(expected)} must be a subset of {sorted(STATES)} for a TrainJob "
            "(Succeeded means Complete)"
        )
    return wanted
