"""Suspend and resume (§4.7): a suspended job keeps nothing running and restarts from scratch.

Upstream's training-operator records a ``Suspended`` event on every reconcile of a suspended job; the
mpi-operator once, when the job is suspended. Both record ``Resumed`` once."""

from __future__ import annotations

from kubetrain.api.common import ConditionStatus, ConditionType
from kubetrain.engine.conditions import condition_reason, resumed_message, suspended_message
from kubetrain.engine.context import ReconcileContext
from kubetrain.engine.types import EventType
from kubetrain.frameworks.base import EventStyle


def suspend(ctx: ReconcileContext) -> None:
    """Delete every replica and service whatever cleanPodPolicy says, and mark the job Suspended."""
    ctx.delete_everything("suspend")
    ctx.delete_pod_group()
    for replica_status in ctx.status.replica_statuses.values():
        replica_status.active = 0
    reason = condition_reason(ctx.kind, ConditionType.SUSPENDED)
    message = suspended_message(ctx.kind, ctx.name)
    if ctx.status.is_true(ConditionType.RUNNING):
        running = ctx.framework.condition_message(ctx.job, ConditionType.RUNNING, False, message)
        ctx.set_condition(ConditionType.RUNNING, reason, running, ConditionStatus.FALSE)
    suspended = ctx.framework.condition_message(ctx.job, ConditionType.SUSPENDED, True, message)
    if ctx.framework.event_style is EventStyle.MPI_OPERATOR:
        ctx.set_condition(ConditionType.SUSPENDED, reason, suspended, announce=EventType.NORMAL)
    else:
        ctx.set_condition(ConditionType.SUSPENDED, reason, suspended)
        ctx.emit(EventType.NORMAL, reason, suspended)


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
