"""What ``get``, ``describe`` and the Jobs view show of a job: pure functions from jobs, pods, events and
findings to rows and text. Here, below both front ends, so the CLI and the dashboard print the same cells from
one code.

Columns follow the CRDs' printer columns (NAME, STATE, PROGRESS, AGE) with ETA (the training's own estimate
of the time left, counted down since it reported), REPLICAS (``Worker 2/3``: active of desired, per replica
type) and RESTARTS added, as ``kubectl get pytorchjobs`` users expect to read them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from kubetrain.api.summary import NODES, JobSummary

if TYPE_CHECKING:
    # Only for the annotations: lightkube's import pulls in its HTTP client, the job models pydantic, and
    # `get` lists jobs from their wire form without either.
    from lightkube.resources.core_v1 import Pod

    from kubetrain.api.common import JobCondition
    from kubetrain.api.jobs import TrainingJob
    from kubetrain.api.trainer import Condition, Trainer, TrainJob
    from kubetrain.engine.diagnosis import Finding
    from kubetrain.engine.failures import FailureRecord
    from kubetrain.sdk.backends.base import JobEvent


def age(since: datetime | None, now: datetime) -> str:
    """kubectl's short ages: ``45s``, ``12m``, ``5h``, ``3d``."""
    if since is None:
        return "<unknown>"
    return duration((now - since).total_seconds())


UNKNOWN = "-"
"""A cell the job has no value for (it never reported progress)."""


def duration(seconds: float) -> str:
    """``45s``, ``12m``, ``5h``, ``3d``: kubectl's short ages, for a span of time."""
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 2 * 86400:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def progress(job: JobSummary) -> str:
    return UNKNOWN if job.progress is None else f"{job.progress}%"


def eta(job: JobSummary, now: datetime) -> str:
    remaining = job.remaining_at(now)
    return UNKNOWN if remaining is None else duration(remaining)


def metrics(job: JobSummary) -> str:
    """``loss=0.23,acc=0.91``: the latest reported metrics."""
    return ",".join(f"{name}={value}" for name, value in job.metrics) or UNKNOWN


def replicas(job: JobSummary) -> str:
    """``Master 1/1 Worker 2/3``: active of desired replicas per type, in the spec's order (a TrainJob's
    training nodes: ``node 2/2``)."""
    return " ".join(f"{r.replica_type} {r.active}/{r.desired}" for r in job.replicas)


def nodes(job: JobSummary) -> str:
    """``2/2``: a TrainJob's active training nodes of its ``numNodes``; ``-`` when neither is known yet."""
    found = next((r for r in job.replicas if r.replica_type == NODES), None)
    return UNKNOWN if found is None else f"{found.active}/{found.desired}"


def restarts(job: JobSummary, live_restarts: int) -> int:
    """Restarts of live pods plus those of pods already replaced (kept in the job's status)."""
    return live_restarts + job.replaced_restarts


def qualified_name(job: TrainingJob | TrainJob | JobSummary) -> str:
    """``-o name``: ``pytorchjob.kubeflow.org/<name>``."""
    kind, api_version = (
        (job.kind, job.api_version) if isinstance(job, JobSummary) else (job.KIND, job.API_VERSION)
    )
    return f"{kind.lower()}.{api_version.partition('/')[0]}/{job.name}"


@dataclass(frozen=True)
class JobRow:
    namespace: str
    kind: str
    name: str
    state: str
    progress: str
    eta: str
    replicas: str
    restarts: int
    age: str
    message: str
    created: str
    metrics: str
    nodes: str = UNKNOWN


def job_row(job: JobSummary, live_restarts: int, now: datetime) -> JobRow:
    created = job.created
    return JobRow(
        namespace=job.namespace,
        kind=job.kind,
        name=job.name,
        state=job.state,
        progress=progress(job),
        eta=eta(job, now),
        replicas=replicas(job),
        restarts=restarts(job, live_restarts),
        age=age(created, now),
        message=job.message,
        created=created.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if created else "",
        metrics=metrics(job),
        nodes=nodes(job),
    )


def columns(*, all_namespaces: bool, several_kinds: bool, wide: bool, nodes: bool = False) -> list[str]:
    """``nodes``: TrainJobs only, whose REPLICAS are their training nodes (NODES)."""
    names = ["NAME", "STATE", "PROGRESS", "ETA", "NODES" if nodes else "REPLICAS", "RESTARTS", "AGE"]
    if several_kinds:
        names.insert(1, "KIND")
    if all_namespaces:
        names.insert(0, "NAMESPACE")
    if wide:
        names += ["CREATED", "METRICS", "MESSAGE"]
    return names


def cells(row: JobRow, names: Sequence[str]) -> list[str]:
    values = {
        "NAMESPACE": row.namespace,
        "KIND": row.kind,
        "NAME": row.name,
        "STATE": row.state,
        "PROGRESS": row.progress,
        "ETA": row.eta,
        "REPLICAS": row.replicas,
        "NODES": row.nodes,
        "RESTARTS": str(row.restarts),
        "AGE": row.age,
        "CREATED": row.created,
        "METRICS": row.metrics,
        "MESSAGE": row.message,
    }
    return [values[name] for name in names]


def plain_table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "") -> str:
    """Columns padded to their widest cell and separated by three spaces, as kubectl prints them."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        lines.append(indent + "   ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def describe(
    job: TrainingJob | TrainJob,
    pods: Sequence[Pod],
    events: Sequence[JobEvent],
    now: datetime,
    findings: Sequence[Finding] = (),
    state: str | None = None,
    failures: FailureRecord | None = None,
) -> str:
    """``kubectl describe``-style text: what is wrong now (when anything is), which replica failed first (when
    one did), summary, run policy, replicas, pods, conditions, events. A TrainJob's: its runtime, trainer,
    progress and its JobSet's jobs instead of the run policy and replicas; ``state`` is its state
    (``get_job_state``)."""
    from kubetrain.api.trainer import TrainJob  # pydantic: not for the listings this module serves

    if isinstance(job, TrainJob):
        return describe_trainjob(job, pods, events, now, findings, state)
    policy = job.run_policy
    created = job.metadata.creation_timestamp
    state = str(job.status.conditions[-1].type) if job.status.conditions else ""
    lines = diagnosis(findings)
    lines += first_failure(failures, job.name, now)
    lines += [
        f"Name:          {job.name}",
        f"Namespace:     {job.namespace}",
        f"Kind:          {job.KIND} ({job.API_VERSION})",
        f"Created:       {created.isoformat() if created else '<unknown>'} ({age(created, now)} ago)",
        f"State:         {state or '<none>'}",
        f"Labels:        {_pairs(job.metadata.labels)}",
        "Run Policy:",
        f"  Clean Pod Policy:         {policy.clean_pod_policy or '<default>'}",
        f"  Backoff Limit:            {_or_none(policy.backoff_limit)}",
        f"  Active Deadline Seconds:  {_or_none(policy.active_deadline_seconds)}",
        f"  TTL After Finished:       {_or_none(policy.ttl_seconds_after_finished)}",
        f"  Suspend:                  {bool(policy.suspend)}",
        "Replicas:",
    ]
    replica_rows = []
    for replica_type, spec in job.replica_specs.items():
        status = job.status.replica_statuses.get(replica_type)
        containers = (spec.template.get("spec") or {}).get("containers") or [{}]
        replica_rows.append(
            [
                replica_type,
                str(spec.replicas if spec.replicas is not None else 1),
                str(status.active if status else 0),
                str(status.succeeded if status else 0),
                str(status.failed if status else 0),
                str(spec.restart_policy or "<default>"),
                str(containers[0].get("image", "")),
            ]
        )
    header = ["TYPE", "DESIRED", "ACTIVE", "SUCCEEDED", "FAILED", "RESTART POLICY", "IMAGE"]
    lines.append(plain_table(header, replica_rows, "  "))
    lines += _pods(pods)
    lines += _conditions(job.status.conditions, now)
    lines += _events(events, now)
    return "\n".join(lines)


def describe_trainjob(
    job: TrainJob,
    pods: Sequence[Pod],
    events: Sequence[JobEvent],
    now: datetime,
    findings: Sequence[Finding] = (),
    state: str | None = None,
) -> str:
    """A TrainJob as ``describe`` shows it: what is wrong now, its runtime and trainer, its progress, its
    JobSet's replicated jobs (``jobsStatus``, counted in Jobs), pods by node, conditions and events."""
    from kubetrain.sdk import trainjobs

    spec, status = job.spec, job.status
    created = job.metadata.creation_timestamp
    ref = spec.runtime_ref
    trainer = spec.trainer
    lines = diagnosis(findings)
    lines += [
        f"Name:          {job.name}",
        f"Namespace:     {job.namespace}",
        f"Kind:          {job.KIND} ({job.API_VERSION})",
        f"Created:       {created.isoformat() if created else '<unknown>'} ({age(created, now)} ago)",
        f"State:         {state or trainjobs.state(job, None)}",
        f"Labels:        {_pairs(job.metadata.labels)}",
        f"Runtime:       {ref.kind or 'ClusterTrainingRuntime'} {ref.name}",
        "Trainer:",
        f"  Image:                    {_or_runtime(trainer.image if trainer else None)}",
        f"  Command:                  {_or_runtime(_words(trainer.command if trainer else None))}",
        f"  Args:                     {_or_runtime(_words(trainer.args if trainer else None))}",
        f"  Nodes:                    {_or_runtime(trainer.num_nodes if trainer else None)}",
        f"  Processes per Node:       {_or_runtime(trainer.num_proc_per_node if trainer else None)}",
        f"  Resources per Node:       {_or_runtime(_resources(trainer) if trainer else None)}",
    ]
    if spec.initializer is not None:
        lines.append("Initializer:")
        for step, source in (("Dataset", spec.initializer.dataset), ("Model", spec.initializer.model)):
            if source is not None:
                lines.append(f"  {step + ':':<25} {_or_runtime(source.storage_uri)}")
    lines += [
        f"Suspend:                    {bool(spec.suspend)}",
        f"Active Deadline Seconds:    {_or_none(spec.active_deadline_seconds)}",
        f"Managed By:                 {spec.managed_by or '<default>'}",
        f"Runtime Patches:            {', '.join(p.manager for p in spec.runtime_patches or []) or '<none>'}",
    ]
    lines += _progress(job, now)
    lines.append("Jobs:")
    if status.jobs_status:
        job_rows = [
            [j.name, str(j.ready), str(j.active), str(j.succeeded), str(j.failed), str(j.suspended)]
            for j in status.jobs_status
        ]
        header = ["NAME", "READY", "ACTIVE", "SUCCEEDED", "FAILED", "SUSPENDED"]
        lines.append(plain_table(header, job_rows, "  "))
    else:
        lines.append("  <none>")
    replicas = trainjobs.replicas(
        trainjobs.PodSeen(
            (pod.metadata.name if pod.metadata else None) or "",
            (pod.metadata.labels if pod.metadata else None) or {},
            "",
        )
        for pod in pods
    )
    lines += _pods(pods, {name: trainjobs.replica_name(r) for name, r in replicas.items()})
    lines += _conditions(status.conditions or [], now)
    lines += _events(events, now)
    return "\n".join(lines)


def _progress(job: TrainJob, now: datetime) -> list[str]:
    reported = job.status.trainer_status
    if reported is None:
        return ["Progress:      <none reported>"]
    summary = JobSummary.from_wire(job.to_wire())
    return [
        "Progress:",
        f"  Progress:                 {progress(summary)}",
        f"  ETA:                      {eta(summary, now)}",
        f"  Metrics:                  {metrics(summary)}",
        f"  Last Report:              {age(summary.reported_at, now)} ago",
    ]


def _pods(pods: Sequence[Pod], replicas: Mapping[str, str] | None = None) -> list[str]:
    lines = ["Pods:"]
    if not pods:
        return [*lines, "  <none>"]
    rows = []
    for pod in pods:
        name = (pod.metadata.name or "") if pod.metadata else ""
        row = [
            name,
            (pod.status.phase or "") if pod.status else "",
            str(sum(s.restartCount for s in (pod.status.containerStatuses or []))) if pod.status else "0",
            (pod.spec.nodeName or "") if pod.spec else "",
        ]
        rows.append(row if replicas is None else [row[0], replicas.get(name, ""), *row[1:]])
    header = ["NAME", "PHASE", "RESTARTS", "NODE"]
    return [*lines, plain_table(header if replicas is None else ["NAME", "REPLICA", *header[1:]], rows, "  ")]


def _conditions(conditions: Sequence[JobCondition | Condition], now: datetime) -> list[str]:
    if not conditions:
        return ["Conditions:", "  <none>"]
    rows = [
        [str(c.type), str(c.status), c.reason or "", age(c.last_transition_time, now), c.message or ""]
        for c in conditions
    ]
    return ["Conditions:", plain_table(["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"], rows, "  ")]


def _events(events: Sequence[JobEvent], now: datetime) -> list[str]:
    if not events:
        return ["Events:", "  <none>"]
    rows = [[e.type, e.reason, age(e.last_seen, now), e.involved, e.message] for e in events[-20:]]
    return ["Events:", plain_table(["TYPE", "REASON", "AGE", "OBJECT", "MESSAGE"], rows, "  ")]


def _or_runtime(value: object) -> str:
    return "<runtime's>" if value is None or value == "" else str(value)


def _words(values: Sequence[str] | None) -> str | None:
    return None if values is None else " ".join(values)


def _resources(trainer: Trainer) -> str | None:
    resources = trainer.resources_per_node
    if not resources:
        return None
    return ", ".join(
        f"{kind} {','.join(f'{k}={v}' for k, v in sorted((amounts or {}).items()))}"
        for kind, amounts in resources.items()
        if isinstance(amounts, Mapping)
    )


def diagnosis(findings: Sequence[Finding]) -> list[str]:
    """``Diagnosis:`` and one ``<reason>: <message>`` line per finding; nothing at all when there is none, so
    a resolved finding leaves no trace at the top (its Warning event stays under Events)."""
    if not findings:
        return []
    return ["Diagnosis:", *(f"  {finding.reason}: {finding.message}" for finding in findings)]


DESCRIBED_LINES = 10
"""Last lines of the first failure that ``describe`` shows (``kubetrain logs`` shows every one kept)."""


def first_failure(failures: FailureRecord | None, job_name: str, now: datetime) -> list[str]:
    """``First Failure:`` (the replica, its pod and node, how and when it failed, its last lines) and, when
    other replicas failed too or it failed again, each kept replica's latest failure; nothing while none
    failed."""
    if failures is None:
        return []
    from kubetrain.engine.failures import describe_failure

    first = failures.first
    node = f" on node {first.node}" if first.node else ""
    lines = [
        "First Failure:",
        f"  Replica:    {first.replica_type} {first.index} (pod {first.pod}{node})",
        f"  How:        {describe_failure(first)}",
        f"  When:       {_wire_time(first.at)} ({age(first.at, now)} ago)",
    ]
    kept = (first.lines or "").splitlines()
    if kept:
        shown = kept[-DESCRIBED_LINES:]
        more = (
            f" (the last {len(shown)} of {len(kept)} kept: kubetrain logs {job_name} --replica "
            f"{first.replica} prints them all)"
            if len(shown) < len(kept)
            else ""
        )
        lines += [f"  Last Lines:{more}", *(f"    {line}" for line in shown)]
    else:
        lines.append("  Last Lines: <none kept>")
    later = [f for f in failures.latest if not f.same_run(first)]
    if later or failures.others:
        rows = [[f.replica, f.node or "", age(f.at, now), describe_failure(f)] for f in later]
        lines.append("Failed Replicas (each one's latest failure):")
        if rows:
            lines += plain_table(["REPLICA", "NODE", "AGE", "HOW"], rows, "  ").splitlines()
        if failures.others:
            lines.append(f"  and {failures.others} more replica(s) failed, not kept")
    return lines


def _wire_time(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _or_none(value: object) -> str:
    return "<none>" if value is None else str(value)


def _pairs(values: dict[str, str] | None) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted((values or {}).items())) or "<none>"
