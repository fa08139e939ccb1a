"""The job's HorizontalPodAutoscaler (§4.10): kept in step while the job runs, removed while suspended."""

from __future__ import annotations

from kubetrain.engine.context import ReconcileContext
from kubetrain.engine.types import DeleteAutoscaler, SyncAutoscaler


def sync_autoscaler(ctx: ReconcileContext) -> None:
    spec = ctx.framework.autoscaling(ctx.job)
    if spec is not None and ctx.observation.autoscaler is not None:
        ctx.actions.append(SyncAutoscaler(spec))


def delete_autoscaler(ctx: ReconcileContext) -> None:
    if ctx.observation.autoscaler:
        ctx.actions.append(DeleteAutoscaler())
