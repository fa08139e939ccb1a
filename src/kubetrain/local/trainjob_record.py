"""A TrainJob's local run as the TrainJob it carries out: what listings, ``describe``, the SDK and the Jobs
view show of it, never the internal ``JobSetRun`` the runner runs.

The run's record holds the ``JobSetRun`` (v1-style conditions: Created, Running, Succeeded, Failed) with the
TrainJob as written in ``spec.trainjob``. Shown, it is that TrainJob with the status Trainer would give it:
the JobSet's ``Succeeded`` is ``Complete`` and ``Failed`` is ``Failed`` (reason and message kept: the JobSet's
``AllJobsCompleted``, ``FailedJobs``, or the local runner's own), ``Suspended`` has Trainer's reasons and
messages, kubetrain's ``Stalled`` stays, and the Created, Running and Restarting conditions a TrainJob does
not have are left out; ``jobsStatus`` counts each replicated job's Jobs from the processes, as the JobSet
controller counts them from pods; ``trainerStatus`` is the run's. The runner's events name the run's kind
(``JobSetRunSuspended``): they are told with the TrainJob's.

Plain data in and out (no models): listing local runs must stay cheap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kubetrain.api.summary import NodeTally
from kubetrain.frameworks.trainer.constants import (
    LAUNCHER,
    NODE,
    RESUMED_MESSAGE,
    RESUMED_REASON,
    SUSPENDED_MESSAGE,
    SUSPENDED_REASON,
)

JOBSET_RUN_KIND = "JobSetRun"
CONDITIONS = {"Succeeded": "Complete", "Failed": "Failed", "Suspended": "Suspended", "Stalled": "Stalled"}
"""A JobSetRun's condition → the TrainJob's (the others have no TrainJob counterpart)."""
TRAINING_JOBS = (NODE, LAUNCHER)
"""The replicated jobs whose pods are the training nodes (the Kubeflow SDK's ``node-<i>`` steps)."""
ACTIVE, RUNNING = frozenset({"Pending", "Running"}), frozenset({"Running", "Succeeded"})


class Replica(Protocol):
    """What the run's record says of one process (``local.state.ReplicaRecord``)."""

    replica_type: str
    index: int
    phase: str


def carried_trainjob(run: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The TrainJob a run's job carries out, as written; None when the run is of a v1 job."""
    if run.get("kind") != JOBSET_RUN_KIND:
        return None
    trainjob = (run.get("spec") or {}).get("trainjob")
    return trainjob if isinstance(trainjob, Mapping) else None


def trainjob_wire(
    run: Mapping[str, Any], trainjob: Mapping[str, Any], replicas: Sequence[Replica]
) -> dict[str, Any]:
    """The TrainJob with its status from the run's (``run`` is the JobSetRun, status included)."""
    run_status = run.get("status") or {}
    metadata = {**(trainjob.get("metadata") or {})}
    run_metadata = run.get("metadata") or {}
    for key in ("namespace", "creationTimestamp"):
        if run_metadata.get(key) and not metadata.get(key):
            metadata[key] = run_metadata[key]
    status: dict[str, Any] = {}
    conditions = [
        {**condition, "type": CONDITIONS[condition["type"]]}
        for condition in run_status.get("conditions") or []
        if isinstance(condition, Mapping) and condition.get("type") in CONDITIONS
    ]
    for condition in conditions:
        condition.pop("lastUpdateTime", None)  # a metav1.Condition has none
        condition["message"] = as_trainjob(str(condition.get("message", "")), str(trainjob_name(trainjob)))
        if condition["type"] == "Suspended":
            suspended = condition.get("status") == "True"
            condition["reason"] = SUSPENDED_REASON if suspended else RESUMED_REASON
            condition["message"] = SUSPENDED_MESSAGE if suspended else RESUMED_MESSAGE
    if conditions:
        status["conditions"] = conditions
    jobs = jobs_status(run, replicas)
    if jobs:
        status["jobsStatus"] = jobs
    if run_status.get("trainerStatus"):
        status["trainerStatus"] = run_status["trainerStatus"]
    wire = {
        "apiVersion": trainjob.get("apiVersion"),
        "kind": trainjob.get("kind"),
        "metadata": metadata,
        "spec": trainjob.get("spec") or {},
    }
    if status:
        wire["status"] = status
    return wire


def jobs_status(run: Mapping[str, Any], replicas: Sequence[Replica]) -> list[dict[str, Any]]:
    """Each replicated job's Jobs, counted as the JobSet controller counts them: a Job is active while a pod
    of it is Pending or Running, ready once every pod of it is Running or Succeeded, succeeded when all of
    them have, failed when one has."""
    spec = run.get("spec") or {}
    shapes = spec.get("shapes") or {}
    phases = {(r.replica_type, r.index): r.phase for r in replicas}
    suspended = bool((spec.get("runPolicy") or {}).get("suspend"))
    found = []
    for name, replica_spec in (spec.get("replicatedJobs") or {}).items():
        shape = shapes.get(name) or {}
        jobs, parallelism = int(shape.get("jobs") or 1), int(shape.get("parallelism") or 1)
        pods = int((replica_spec or {}).get("replicas") or jobs * parallelism)
        counts = dict.fromkeys(("ready", "succeeded", "failed", "active", "suspended"), 0)
        for job_index in range(jobs):
            indices = range(job_index * parallelism, min((job_index + 1) * parallelism, pods))
            job_phases = [phases.get((name, i), "Pending") for i in indices]
            if suspended:
                counts["suspended"] += 1
            elif any(p == "Failed" for p in job_phases):
                counts["failed"] += 1
            elif job_phases and all(p == "Succeeded" for p in job_phases):
                counts["succeeded"] += 1
            else:
                counts["active"] += any(p in ACTIVE for p in job_phases)
                counts["ready"] += bool(job_phases) and all(p in RUNNING for p in job_phases)
        found.append({"name": name, **counts})
    return found


def node_tally(run: Mapping[str, Any], replicas: Sequence[Replica]) -> NodeTally:
    """The run's training nodes: every process of its ``node`` and ``launcher`` jobs, started or not (none
    active while the run is suspended: its processes are gone, as a suspended JobSet's pods are)."""
    phases = [r.phase for r in replicas if r.replica_type in TRAINING_JOBS]
    if bool(((run.get("spec") or {}).get("runPolicy") or {}).get("suspend")):
        return NodeTally(seen=len(phases), active=0, running=0)
    return NodeTally(
        seen=len(phases),
        active=sum(p in ACTIVE for p in phases),
        running=sum(p in RUNNING for p in phases),
    )


def event_as_trainjob(event: Mapping[str, Any], name: str) -> dict[str, Any]:
    """One of the runner's events as the TrainJob's: ``JobSetRun <name> is suspended.`` → ``TrainJob ...``."""
    return {
        **event,
        "reason": str(event.get("reason", "")).replace(JOBSET_RUN_KIND, "TrainJob"),
        "message": as_trainjob(str(event.get("message", "")), name),
    }


def finding_as_trainjob(finding: Mapping[str, Any], name: str) -> dict[str, Any]:
    """One of the runner's findings as the TrainJob's: ``JobSetRun <name> has had no progress report ...``."""
    return {**finding, "message": as_trainjob(str(finding.get("message", "")), name)}


def as_trainjob(text: str, name: str) -> str:
    """The engine names the job it runs, ``JobSetRun <name>``: told of the TrainJob it carries out."""
    return text.replace(f"{JOBSET_RUN_KIND} {name}", f"TrainJob {name}")


def trainjob_name(trainjob: Mapping[str, Any]) -> str:
    return str((trainjob.get("metadata") or {}).get("name") or "")
