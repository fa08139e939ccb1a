"""Suspend and resume (§4.7): a suspended job keeps nothing running and restarts from scratch.

Upstream's training-operator records a ``Suspended`` event on every reconcile of a suspended job; the
mpi-operator once, when the job is suspended. Both record ``Resumed`` once."""

from __future__ import annotations

from kubetrain.api.common import ConditionStatus, ConditionType, ReplicaStatus
from kubetrain.engine.conditions import condition_reason, resumed_message, suspended_message
from kubetrain.engine.context import ReconcileContext
from kubetrain.engine.planning import replica_count
from kubetrain.engine.types import EventType
from kubetrain.frameworks.base import EventStyle


def suspend(ctx: ReconcileContext) -> None:
    """Delete every replica and service whatever cleanPodPolicy says, and mark the job Suspended.

    The training-operator sets ``Running`` False (when it was True), then ``Suspended``. The mpi-operator
    sets ``Suspended``, then ``Running`` False whether or not the job ran, lists every replica type with no
    counts, and makes the launcher Job at once, suspended (a queue such as Kueue admits the job by
    unsuspending it)."""
    ctx.delete_everything("suspend")
    ctx.delete_pod_group()
    for replica_status in ctx.status.replica_statuses.values():
        replica_status.active = 0
    reason = condition_reason(ctx.kind, ConditionType.SUSPENDED)
    message = suspended_message(ctx.kind, ctx.name)
    running = ctx.framework.condition_message(ctx.job, ConditionType.RUNNING, False, message)
    suspended = ctx.framework.condition_message(ctx.job, ConditionType.SUSPENDED, True, message)
    if ctx.framework.event_style is EventStyle.MPI_OPERATOR:
        _create_batch_jobs_suspended(ctx)
        for replica_type in ctx.job.replica_specs:
            ctx.status.replica_statuses.setdefault(replica_type, ReplicaStatus())
        ctx.set_condition(ConditionType.SUSPENDED, reason, suspended, announce=EventType.NORMAL)
        ctx.set_condition(ConditionType.RUNNING, reason, running, ConditionStatus.FALSE)
        return
    if ctx.status.is_true(ConditionType.RUNNING):
        ctx.set_condition(ConditionType.RUNNING, reason, running, ConditionStatus.FALSE)
    ctx.set_condition(ConditionType.SUSPENDED, reason, suspended)
    ctx.emit(EventType.NORMAL, reason, suspended)


def _create_batch_jobs_suspended(ctx: ReconcileContext) -> None:
    """The batch-Job replicas that do not exist yet (the substrate makes them suspended, as the job is)."""
    existing = ctx.observed_by_key()
    for replica_type in ctx.job.replica_specs:
        if not ctx.retried_by_controller(replica_type):
            continue
        for index in range(replica_count(ctx.job, replica_type)):
            if (replica_type, index) not in existing:
                ctx.create_replica((replica_type, index))


def resume_if_suspended(ctx: ReconcileContext) -> None:
    """A job leaving suspension starts its clock again: activeDeadlineSeconds counts from now."""
    if not ctx.status.is_true(ConditionType.SUSPENDED):
        return
    reason = condition_reason(ctx.kind, "Resumed")
    message = resumed_message(ctx.kind, ctx.name)
    message = ctx.framework.condition_message(ctx.job, ConditionType.SUSPENDED, False, message)
    ctx.set_condition(
        ConditionType.SUSPENDED, reason, message, ConditionStatus.FALSE, announce=EventType.NORMAL
    )
    ctx.status.start_time = ctx.now
