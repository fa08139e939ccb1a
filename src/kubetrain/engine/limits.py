"""backoffLimit and activeDeadlineSeconds (§4.5), with kubetrain's two deliberate improvements.

- backoffLimit counts **every** restart: in-place restarts of live replicas (their restart count)
  plus the restarts of replicas already replaced, which the engine keeps in
  ``ReplicaStatus.restarts`` because a recreated pod starts again from ``restartCount`` 0. Upstream
  only sums the restart counts of Running pods, so ``ExitCode`` recreations never count (#2045).
  The comparison is upstream's: with ``backoffLimit: 0`` the first restart fails the job; otherwise
  the job fails once ``restarts >= backoffLimit`` ("backoffLimit 2 stops after 2 restarts").
  A recreation counts when the engine decides it (the failed replica is deleted), an in-place
  restart when it is observed. Both policies therefore fail the job on the same failure, the
  ``backoffLimit``-th one that needed a restart, and report the same restart count: a replica the
  kubelet already restarted in place is stopped, a replica awaiting recreation is not recreated.
- Under restart scope Job (``engine.restart_scope``) a job restart counts once, however many replicas the
  kubelet restarted in place before the engine stopped them all, and not at all when a disruption caused it.
- activeDeadlineSeconds has a real timer: while the job runs, ``requeue_after`` is the time left,
  so the deadline fires even when nothing else happens (upstream #3358).
"""

from __future__ import annotations

from kubetrain.api.common import ConditionType, RestartPolicy
from kubetrain.engine.completion import expire
from kubetrain.engine.conditions import backoff_limit_message, condition_reason, deadline_message
from kubetrain.engine.context import ReconcileContext
from kubetrain.engine.planning import replica_policy
from kubetrain.engine.restart_scope import job_scope, pending_restarts
from kubetrain.engine.types import EventType

_RESTARTING_POLICIES = frozenset({RestartPolicy.ON_FAILURE, RestartPolicy.ALWAYS, RestartPolicy.EXIT_CODE})


def total_restarts(ctx: ReconcileContext) -> int:
    """Restarts of replaced replicas plus in-place restarts of live ones.

    Terminating replicas are left out: a replica the engine deleted for restart already had its
    restarts moved into ``ReplicaStatus.restarts`` when it was deleted.
    """
    replaced = sum(status.restarts for status in ctx.status.replica_statuses.values())
    if job_scope(ctx):
        return replaced + pending_restarts(ctx)
    in_place = sum(
        replica.restart_count
        for replica in ctx.observation.replicas
        if not replica.terminating
        and replica.replica_type in ctx.job.replica_specs
        and not ctx.retried_by_controller(replica.replica_type)
        and replica_policy(ctx.job, replica.replica_type, ctx.framework) in _RESTARTING_POLICIES
    )
    return replaced + in_place


def backoff_limit_exceeded(ctx: ReconcileContext) -> bool:
    limit = ctx.job.run_policy.backoff_limit
    if limit is None:
        return False
    restarts = total_restarts(ctx)
    return restarts > 0 if limit == 0 else restarts >= limit


def deadline_remaining(ctx: ReconcileContext) -> float | None:
    """Seconds until activeDeadlineSeconds passes, measured from ``startTime``; None when unset."""
    deadline = ctx.job.run_policy.active_deadline_seconds
    started = ctx.status.start_time
    if deadline is None or started is None:
        return None
    return deadline - (ctx.now - started).total_seconds()


def failure_from_limits(ctx: ReconcileContext) -> str | None:
    """The failure message when a limit is exceeded, else None.

    A run policy copied onto a batch Job is that Job's to enforce: its failure reaches the job through
    the observed replica, with the Job's own reason (``BackoffLimitExceeded``, ``DeadlineExceeded``)."""
    if ctx.run_policy_carried_by_batch_job():
        return None
    if backoff_limit_exceeded(ctx):
        return backoff_limit_message(ctx.name)
    remaining = deadline_remaining(ctx)
    if remaining is not None and remaining <= 0:
        return deadline_message(ctx.name)
    return None


def fail_for_limit(ctx: ReconcileContext, message: str) -> None:
    """Stop everything at once: the job is not finished yet, so cleanPodPolicy does not apply."""
    if ctx.status.completion_time is None:
        ctx.status.completion_time = ctx.now
    ctx.delete_everything("failed")
    ctx.delete_pod_group()
    reason, message = ctx.framework.limit_failure(
        ctx.job, condition_reason(ctx.kind, ConditionType.FAILED), message
    )
    ctx.set_condition(ConditionType.FAILED, reason, message, announce=EventType.NORMAL)
    expire(ctx)
