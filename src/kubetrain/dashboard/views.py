"""What the page is sent about a job: pure functions from wire forms, pods and events to JSON.

A row's cells are the CLI's (``sdk.tables``: STATE, PROGRESS, ETA, REPLICAS, RESTARTS, METRICS), so
``kubetrain get`` and the Jobs view never disagree; the raw times ride along so the page can count ages and
ETAs down between changes without asking the server.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kubetrain.api.summary import FINISHED, TRAINER_GROUP, JobSummary, NodeTally, is_trainjob
from kubetrain.dashboard.access import Attributes
from kubetrain.frameworks.labels import REPLICA_INDEX_LABEL, REPLICA_TYPE_LABEL
from kubetrain.sdk import tables
from kubetrain.sdk.kinds import KINDS, JobKind

if TYPE_CHECKING:
    from lightkube.resources.core_v1 import Pod

    from kubetrain.engine.diagnosis import Finding
    from kubetrain.engine.failures import FailureRecord, ReplicaFailure
    from kubetrain.sdk.backends.base import JobEvent

REDACTED = "<not shown: Secret data>"


def kind_slug(kind: JobKind) -> str:
    """How a kind is written in the page's URLs: ``pytorchjobs.v1``, ``mpijobs.v2beta1``."""
    return f"{kind.plural}.{kind.version}"


def kind_from_slug(slug: str) -> JobKind | None:
    return next((k for k in KINDS if kind_slug(k) == slug), None)


def kind_of_wire(wire: Mapping[str, Any]) -> JobKind | None:
    return next(
        (k for k in KINDS if (k.kind, k.api_version) == (wire.get("kind"), wire.get("apiVersion"))), None
    )


def job_id(source: str, namespace: str, kind: JobKind, name: str) -> str:
    """``<source>/<namespace>/<kind slug>/<name>``: a job's key on the page and in its URLs."""
    return f"{source}/{namespace}/{kind_slug(kind)}/{name}"


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def job_row(
    source: str,
    wire: Mapping[str, Any],
    restarts: int | None,
    now: datetime,
    nodes: NodeTally | None = None,
) -> dict[str, Any]:
    """One line of the list, as ``kubetrain get -o wide`` prints it, plus what the page counts with.
    ``nodes``: a TrainJob's training nodes, as its pods show them (its state and REPLICAS depend on them)."""
    summary = JobSummary.from_wire(wire, nodes)
    kind = kind_of_wire(wire)
    row = tables.job_row(summary, restarts or 0, now)
    suspended = _suspended(wire)
    return {
        "id": job_id(source, summary.namespace, kind, summary.name) if kind is not None else "",
        "source": source,
        "namespace": summary.namespace,
        "kind": summary.kind,
        "apiVersion": summary.api_version,
        "name": summary.name,
        "state": row.state or ("Suspended" if suspended else "Created"),
        "message": row.message,
        "progress": summary.progress,
        "progressText": row.progress,
        "eta": row.eta,
        "remainingSeconds": summary.remaining_seconds,
        "reportedAt": _iso(summary.reported_at),
        "replicas": row.replicas,
        "restarts": row.restarts if restarts is not None else None,
        "created": _iso(summary.created),
        "age": row.age,
        "metrics": [{"name": n, "value": v} for n, v in summary.metrics],
        "finished": summary.state in FINISHED,
        "suspended": suspended,
    }


def _suspended(wire: Mapping[str, Any]) -> bool:
    spec = wire.get("spec") or {}
    if is_trainjob(wire):
        return bool(spec.get("suspend"))
    run_policy = spec.get("runPolicy") or {}
    return bool(run_policy.get("suspend")) if isinstance(run_policy, Mapping) else False


def runtime_attributes(wire: Mapping[str, Any], namespace: str) -> Attributes | None:
    """Reading the runtime a TrainJob names, as a SubjectAccessReview asks it; None for a v1 job."""
    if not is_trainjob(wire):
        return None
    ref = (wire.get("spec") or {}).get("runtimeRef") or {}
    group = str(ref.get("apiGroup") or TRAINER_GROUP)
    if (ref.get("kind") or "ClusterTrainingRuntime") == "ClusterTrainingRuntime":
        return Attributes("get", "clustertrainingruntimes", "", group, str(ref.get("name") or ""))
    return Attributes("get", "trainingruntimes", namespace, group, str(ref.get("name") or ""))


def manifest(wire: Mapping[str, Any]) -> dict[str, Any]:
    """The job as its owner wrote it: the spec and the metadata people set, not the server's bookkeeping."""
    metadata = dict(wire.get("metadata") or {})
    for noise in ("managedFields", "resourceVersion", "uid", "generation", "selfLink"):
        metadata.pop(noise, None)
    annotations = dict(metadata.get("annotations") or {})
    annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)
    return {
        "apiVersion": wire.get("apiVersion"),
        "kind": wire.get("kind"),
        "metadata": metadata,
        "spec": wire.get("spec") or {},
    }


def job_detail(
    source: str,
    wire: Mapping[str, Any],
    restarts: int | None,
    now: datetime,
    nodes: NodeTally | None = None,
) -> dict[str, Any]:
    """The job page's live part: its row, conditions in order, replica statuses (a TrainJob's runtime and its
    JobSet's jobs), the latest report and the manifest. Sent again whenever the job changes."""
    status = wire.get("status") or {}
    specs: Mapping[str, Any] = next(
        (v for k, v in (wire.get("spec") or {}).items() if str(k).endswith("ReplicaSpecs")),
        {},
    )
    replica_types = []
    for replica_type, spec in (specs or {}).items():
        containers = ((spec or {}).get("template") or {}).get("spec", {}).get("containers") or [{}]
        counts = (status.get("replicaStatuses") or {}).get(replica_type) or {}
        replica_types.append(
            {
                "type": replica_type,
                "desired": (spec or {}).get("replicas", 1),
                "active": counts.get("active", 0),
                "succeeded": counts.get("succeeded", 0),
                "failed": counts.get("failed", 0),
                "restartPolicy": (spec or {}).get("restartPolicy") or "",
                "image": containers[0].get("image", ""),
            }
        )
    runtime = (wire.get("spec") or {}).get("runtimeRef") or {} if is_trainjob(wire) else {}
    return {
        "row": job_row(source, wire, restarts, now, nodes),
        "runtime": f"{runtime.get('kind') or 'ClusterTrainingRuntime'} {runtime.get('name')}"
        if runtime
        else None,
        "jobs": [
            {key: job.get(key, 0) for key in ("ready", "active", "succeeded", "failed", "suspended")}
            | {"name": job.get("name", "")}
            for job in status.get("jobsStatus") or []
            if isinstance(job, Mapping)
        ],
        "conditions": [
            {
                "type": c.get("type"),
                "status": c.get("status"),
                "reason": c.get("reason") or "",
                "message": c.get("message") or "",
                "lastTransitionTime": c.get("lastTransitionTime"),
            }
            for c in status.get("conditions") or []
            if isinstance(c, Mapping)
        ],
        "startTime": status.get("startTime"),
        "completionTime": status.get("completionTime"),
        "trainerStatus": status.get("trainerStatus"),
        "replicaTypes": replica_types,
        "manifestYaml": manifest_yaml(wire),
    }


def manifest_yaml(wire: Mapping[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(manifest(wire), sort_keys=False, default_flow_style=False)


def pod_rows(
    pods: Sequence[Pod], job_name: str, replicas: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """The replicas table: each pod's replica, phase, node, restarts, why it waits and how it last exited.
    ``replicas``: each pod's replica by name, where its labels do not say it (a TrainJob's ``node-1``)."""
    rows = []
    for pod in pods:
        metadata, status, spec = pod.metadata, pod.status, pod.spec
        labels = (metadata.labels if metadata else None) or {}
        name = (metadata.name if metadata else None) or ""
        containers = (status.containerStatuses if status else None) or []
        waiting = next((c.state.waiting.reason for c in containers if c.state and c.state.waiting), None)
        exit_codes = []
        for container in containers:
            for state in (container.state, container.lastState):
                if state is not None and state.terminated is not None:
                    exit_codes.append(state.terminated.exitCode)
                    break
        replica = (replicas or {}).get(name) or (
            f"{labels.get(REPLICA_TYPE_LABEL, '')}-{labels.get(REPLICA_INDEX_LABEL, '')}".strip("-")
        )
        rows.append(
            {
                "name": name,
                "replica": replica or name.removeprefix(f"{job_name}-"),
                "phase": (status.phase if status else None) or "Unknown",
                "node": (spec.nodeName if spec else None) or "",
                "restarts": sum(c.restartCount for c in containers),
                "ready": bool(containers) and all(c.ready for c in containers),
                "waiting": waiting or "",
                "exitCodes": exit_codes,
                "started": _iso(status.startTime)
                if status and isinstance(status.startTime, datetime)
                else None,
            }
        )
    return rows


def event_rows(events: Iterable[JobEvent]) -> list[dict[str, Any]]:
    return [
        {
            "type": e.type,
            "reason": e.reason,
            "message": e.message,
            "object": e.involved,
            "count": e.count,
            "lastSeen": _iso(e.last_seen),
        }
        for e in events
    ]


def findings(found: Iterable[Finding]) -> list[dict[str, Any]]:
    return [{"reason": f.reason, "message": f.message, "replicas": list(f.replicas)} for f in found]


def failures(record: FailureRecord | None) -> dict[str, Any] | None:
    """The job's first failure and each failed replica's latest, as the Jobs view shows them: ``how`` in the
    words ``describe`` uses."""
    if record is None:
        return None
    return {
        "first": _failure(record.first),
        "latest": [_failure(f) for f in record.latest if not f.same_run(record.first)],
        "others": record.others,
    }


def _failure(failure: ReplicaFailure) -> dict[str, Any]:
    from kubetrain.engine.failures import describe_failure

    return {
        "replica": failure.replica,
        "replicaType": failure.replica_type,
        "index": failure.index,
        "pod": failure.pod,
        "node": failure.node,
        "container": failure.container,
        "exitCode": failure.exit_code,
        "reason": failure.reason,
        "how": describe_failure(failure),
        "at": _iso(failure.at),
        "lines": failure.lines,
    }


def redact_secrets(documents: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Objects as they may be shown: a Secret keeps its name and keys, never its values."""
    shown = []
    for document in documents:
        copy = dict(document)
        if copy.get("kind") == "Secret":
            for field in ("data", "stringData"):
                if isinstance(copy.get(field), Mapping):
                    copy[field] = dict.fromkeys(copy[field], REDACTED)
        shown.append(copy)
    return shown


def plan_preview(documents: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``kubetrain plan``'s pods (or local processes) as the page lists them: name, image or command, env."""
    preview = []
    for document in documents:
        if document.get("kind") == "JobSet":  # a TrainJob's: each replicated job's pod template
            name = (document.get("metadata") or {}).get("name", "")
            for job in (document.get("spec") or {}).get("replicatedJobs") or []:
                template = (((job.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec")
                for container in (template or {}).get("containers") or []:
                    preview.append(
                        {
                            "name": f"{name}-{job.get('name', '')}",
                            "container": container.get("name", ""),
                            "image": container.get("image", ""),
                            "command": [*(container.get("command") or []), *(container.get("args") or [])],
                            "env": [_env(e) for e in container.get("env") or []],
                        }
                    )
        elif document.get("kind") == "Pod" or document.get("kind") == "Job":
            pod_spec = document.get("spec") or {}
            if document.get("kind") == "Job":
                pod_spec = ((pod_spec.get("template") or {}).get("spec")) or {}
            for container in pod_spec.get("containers") or []:
                preview.append(
                    {
                        "name": (document.get("metadata") or {}).get("name", ""),
                        "container": container.get("name", ""),
                        "image": container.get("image", ""),
                        "command": [*(container.get("command") or []), *(container.get("args") or [])],
                        "env": [_env(e) for e in container.get("env") or []],
                    }
                )
        elif "replica" in document and "env" in document:  # a local process
            env = document.get("env") or {}
            preview.append(
                {
                    "name": document.get("name", ""),
                    "container": document.get("replica", ""),
                    "image": "",
                    "command": list(document.get("command") or []),
                    "env": [{"name": k, "value": str(v)} for k, v in env.items()]
                    if isinstance(env, Mapping)
                    else [_env(e) for e in env],
                }
            )
    return preview


def _env(variable: Mapping[str, Any]) -> dict[str, str]:
    if "value" in variable:
        return {"name": str(variable.get("name", "")), "value": str(variable["value"])}
    source = variable.get("valueFrom") or {}
    if "secretKeyRef" in source:
        ref = source["secretKeyRef"] or {}
        return {
            "name": str(variable.get("name", "")),
            "value": f"<from Secret {ref.get('name')}/{ref.get('key')}>",
        }
    described = next(iter(source), "")
    return {"name": str(variable.get("name", "")), "value": f"<from {described}>" if described else ""}
