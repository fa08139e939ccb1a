"""Restart scope ``Job``: when one replica fails, every replica is stopped and all start again together.

A non-elastic job (torchrun's static rendezvous, an MPI world, a TF cluster spec) cannot take a rank back on
its own: restarted alone, it finds its peers blocked in a collective (NCCL can sit there until its watchdog
fires, tens of minutes) or waiting at a rendezvous that already closed (kubeflow/trainer#2000, #2269). With
``kubetrain.dev/restart-scope: Job`` the engine restarts the job instead of the replica:

- an incident is a replica that needs restarting: one the kubelet (or the local runner) already restarted in
  place (its restart count went up: the container exited under ``OnFailure``/``Always`` before the engine saw
  it), a pod that failed where its restart policy would replace it (``OnFailure``, ``Always``, ``ExitCode``
  with a retryable code), a disrupted one (``engine.disruptions``), one deleted by someone else while the
  others run;
- every replica is then deleted together, each given its ``terminationGracePeriodSeconds`` after SIGTERM to
  write a checkpoint (the kube substrate deletes pods with their own grace period; the local runner gives
  each process its template's), and none is created again until all of them are gone: then all at once;
- one job restart counts once against ``backoffLimit``, however many replicas failed in it (the peers of a
  dead rank crash too); one caused by a disruption (within the job's disruption limit) not at all, the peers'
  crashes included;
- the job is ``Restarting``; a Warning event names the replica and the exit code that triggered it.

Failures that end the job under its policy (``Never``, ``ExitCode`` with a code under 128) still end it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from kubetrain.api.common import ConditionType, RestartPolicy
from kubetrain.engine.conditions import condition_reason
from kubetrain.engine.context import ReconcileContext
from kubetrain.engine.disruptions import describe, disruption_of, disruptions
from kubetrain.engine.fault_policy import RESTART_SCOPE_ANNOTATION, RestartScope
from kubetrain.engine.node_loss import FORCED_REASONS
from kubetrain.engine.planning import replica_count, replica_policy
from kubetrain.engine.types import EventType, ObservedReplica, Phase

IN_PLACE_POLICIES = frozenset({RestartPolicy.ON_FAILURE, RestartPolicy.ALWAYS})
UNKNOWN_EXIT_CODE = 0xBEEF
"""Upstream's stand-in when a failed replica has no exit code; it is >= 128, so retryable."""


def is_retryable(exit_code: int | None) -> bool:
    """ExitCode policy: 128-255 (killed by a signal, OOM) are retried, 1-127 are permanent."""
    return (UNKNOWN_EXIT_CODE if exit_code is None else exit_code) >= 128


def restarted_after_failure(ctx: ReconcileContext, replica: ObservedReplica) -> bool:
    """Whether the replica's restart policy replaces it now that it failed (the framework's policies)."""
    policy = replica_policy(ctx.job, replica.replica_type, ctx.framework)
    if policy not in ctx.framework.replaces_failed_replicas:
        return False
    return policy in IN_PLACE_POLICIES or (
        policy is RestartPolicy.EXIT_CODE and is_retryable(replica.exit_code)
    )


@dataclass(frozen=True)
class Incident:
    replica: ObservedReplica
    cause: str
    """What happened to it, after its pod's name: ``exited with code 137``."""
    counted: bool = False
    """It counts against ``backoffLimit`` (unless a disruption in the same restart explains it)."""
    disruption: bool = False
    """A disruption within the job's limit."""
    in_place: bool = False
    """Restarted in place already: counted as it is observed, as every in-place restart is."""
    ended_at: datetime | None = None
    """When its container's run ended, where known: the first to end triggered the others (a rank killed,
    then its peers crashing on the broken connection)."""


def job_scope(ctx: ReconcileContext) -> bool:
    return ctx.fault_policy.restart_scope is RestartScope.JOB


def in_scope(ctx: ReconcileContext, replica: ObservedReplica) -> bool:
    """A replica the engine runs (not a batch Job's), of a type it wants, at an index it wants."""
    replica_type = replica.replica_type
    return (
        replica_type in ctx.job.replica_specs
        and replica.index < replica_count(ctx.job, replica_type)
        and not ctx.retried_by_controller(replica_type)
    )


def incidents(ctx: ReconcileContext) -> list[Incident]:
    """What calls for a job restart now (nothing while one is under way: every replica is then going)."""
    if not job_scope(ctx):
        return []
    view = disruptions(ctx)
    scoped = [replica for replica in ctx.observation.replicas if in_scope(ctx, replica)]
    running = any(not replica.terminating for replica in scoped)
    found: list[Incident] = []
    for replica in scoped:
        disruption = view.tolerates(replica)
        if disruption is not None:
            found.append(Incident(replica, f"was disrupted ({describe(disruption)})", disruption=True))
            continue
        exceeded = disruption_of(ctx, replica)
        if exceeded is not None:
            cause = f"was disrupted ({describe(exceeded)}) past the job's {view.limit} disruptions"
            if running and (replica.terminating or exceeded.reason in FORCED_REASONS):
                found.append(Incident(replica, cause, counted=True))
                continue
        if replica.terminating:
            if running:
                found.append(Incident(replica, "was deleted"))
            continue
        policy = replica_policy(ctx.job, replica.replica_type, ctx.framework)
        if replica.restart_count > 0 and policy in IN_PLACE_POLICIES:
            cause = f"{_last_exit(replica)} and was restarted in place"
            found.append(Incident(replica, cause, True, in_place=True, ended_at=_ended_at(replica)))
        elif replica.phase is Phase.FAILED and restarted_after_failure(ctx, replica):
            found.append(Incident(replica, _failure(replica), counted=True, ended_at=_ended_at(replica)))
    if running:
        found += _vanished(ctx, scoped)
    return found


def _vanished(ctx: ReconcileContext, scoped: list[ObservedReplica]) -> list[Incident]:
    """Replicas gone without being seen going (force-deleted, deleted while the operator was away) while their
    peers run: fewer of a type are there than the last status counted (Pending ones are not counted, so a
    replica not yet created, or not yet started, is never taken for one that vanished)."""
    found: list[Incident] = []
    for replica_type in ctx.job.replica_specs:
        if ctx.retried_by_controller(replica_type):
            continue
        previous = ctx.job.status.replica_statuses.get(replica_type)
        if previous is None:
            continue
        wanted = replica_count(ctx.job, replica_type)
        present = {replica.index for replica in scoped if replica.replica_type == replica_type}
        if len(present) >= min(previous.active + previous.succeeded + previous.failed, wanted):
            continue
        index = min(i for i in range(wanted) if i not in present)
        found.append(Incident(ObservedReplica(replica_type, index, Phase.PENDING), "is gone"))
    return found


def pending_restarts(ctx: ReconcileContext) -> int:
    """The job restart an in-place restart already made, before the engine stops the job: 1, however many
    replicas were restarted in place (a disruption in the same restart: 0)."""
    found = incidents(ctx)
    if any(incident.disruption for incident in found):
        return 0
    return 1 if any(incident.in_place for incident in found) else 0


def restart_in_progress(ctx: ReconcileContext) -> bool:
    """Under restart scope Job: a replica is going, or is about to, so none may be created yet."""
    if not job_scope(ctx):
        return False
    return bool(incidents(ctx)) or any(
        replica.terminating for replica in ctx.observation.replicas if in_scope(ctx, replica)
    )


def restart_job(ctx: ReconcileContext) -> bool:
    """Delete every replica when an incident calls for it; True when the job restarts now."""
    found = incidents(ctx)
    if not found:
        return False
    trigger = next((i for i in found if i.disruption), None) or min(
        found, key=lambda i: (not i.counted, i.ended_at is None, i.ended_at or ctx.now)
    )
    for replica in ctx.observation.replicas:
        if not in_scope(ctx, replica):
            continue
        disruption = disruption_of(ctx, replica)
        if disruption is not None and disruption.reason in FORCED_REASONS:
            ctx.delete_replica(replica, "node-lost", force=True)
        elif disruption is not None:
            ctx.delete_replica(replica, "disruption")
        else:
            ctx.delete_replica(replica, "job-restart")
    if trigger.disruption:
        charge = "; a disruption does not count against backoffLimit"
    elif any(incident.counted for incident in found):
        charge = "; this counts once against backoffLimit"
        counts = ctx.status.replica_statuses.get(trigger.replica.replica_type)
        if counts is not None:
            counts.restarts += 1
    else:
        charge = ""
    pod = ctx.framework.pod_name(ctx.job, trigger.replica.replica_type, trigger.replica.index)
    others = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    message = (
        f"{ctx.kind} {ctx.name} is restarting every replica together ({RESTART_SCOPE_ANNOTATION}: Job) "
        f"because {trigger.replica.replica_type} replica {trigger.replica.index} (pod {pod}) {trigger.cause}"
        f"{others}{charge}"
    )
    reason = condition_reason(ctx.kind, ConditionType.RESTARTING)
    ctx.emit(EventType.WARNING, reason, message)
    ctx.set_condition(ConditionType.RESTARTING, reason, message)
    return True


def _ended_at(replica: ObservedReplica) -> datetime | None:
    """When the replica's first container to end last ended."""
    ended = [c.last_finished_at for c in replica.containers if not c.init and c.last_finished_at is not None]
    return min(ended, default=None)


def _last_exit(replica: ObservedReplica) -> str:
    """``container pytorch exited with code 137 (OOMKilled)``: its restarted container's last run."""
    container = next((c for c in replica.containers if not c.init and c.restart_count > 0), None)
    if container is None or container.last_exit_code is None:
        return "exited"
    why = f" ({container.last_reason})" if container.last_reason and container.last_reason != "Error" else ""
    return f"container {container.name} exited with code {container.last_exit_code}{why}"


def _failure(replica: ObservedReplica) -> str:
    if replica.exit_code is not None:
        return f"exited with code {replica.exit_code}" + (f" ({replica.reason})" if replica.reason else "")
    return f"failed ({replica.reason})" if replica.reason else "failed"
