"""A finished job (Succeeded or Failed): cleanPodPolicy, PodGroup removal and TTL (§4.6)."""

from __future__ import annotations

from datetime import timedelta

from kubetrain.api.common import CleanPodPolicy, ConditionType
from kubetrain.engine.context import ReconcileContext
from kubetrain.engine.progress import clear_stalled
from kubetrain.engine.types import DeleteJob, EventType, Phase

_STILL_RUNNING = frozenset({Phase.RUNNING, Phase.PENDING})


def finish(ctx: ReconcileContext) -> None:
    """Everything a finished job still needs; safe to run on every reconcile after it finished."""
    if ctx.status.completion_time is None:
        ctx.status.completion_time = ctx.now
    clear_stalled(ctx)
    clean_replicas(ctx)
    ctx.delete_pod_group()
    if ctx.status.is_true(ConditionType.SUCCEEDED):
        for replica_status in ctx.status.replica_statuses.values():
            replica_status.succeeded += replica_status.active
            replica_status.active = 0
    expire(ctx)


def clean_replicas(ctx: ReconcileContext) -> None:
    """``Running`` also removes ``Pending`` replicas: they would start, for a job that is over."""
    policy = ctx.job.run_policy.clean_pod_policy or CleanPodPolicy.NONE
    if policy is CleanPodPolicy.NONE:
        return
    for replica in ctx.observation.replicas:
        if ctx.retried_by_controller(replica.replica_type):
            continue  # a batch Job is never deleted by the operator; its own TTL removes it
        if policy is CleanPodPolicy.ALL or replica.phase in _STILL_RUNNING:
            ctx.delete_replica_and_service(replica, "clean-pod-policy")


def expire(ctx: ReconcileContext) -> None:
    """TTL: delete the job ``ttlSecondsAfterFinished`` after it finished; suspended jobs are kept."""
    ttl = ctx.job.run_policy.ttl_seconds_after_finished
    finished_at = ctx.status.completion_time
    if ttl is None or finished_at is None or ctx.job.run_policy.suspend:
        return
    if ctx.run_policy_carried_by_batch_job():
        return  # the TTL is the batch Job's; the job object itself stays (as mpi-operator)
    remaining = (finished_at + timedelta(seconds=ttl) - ctx.now).total_seconds()
    if remaining <= 0:
        ctx.actions.append(DeleteJob())
        ctx.emit(EventType.NORMAL, ctx.framework.deleted_job_reason, f"Deleted job: {ctx.name}")
    else:
        ctx.wake_up_in(remaining)
