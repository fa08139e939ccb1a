"""Gang scheduling (§4.9): keep the PodGroup in sync; under Volcano, wait for it to be admitted."""

from __future__ import annotations

from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.context import ReconcileContext
from kubetrain.engine.planning import replica_count
from kubetrain.engine.types import SyncPodGroup

VOLCANO = "volcano"
GANG_WAIT_SECONDS = 5.0
"""How soon to look again while Volcano has not admitted the PodGroup (its events may be missed)."""

_NOT_ADMITTED = frozenset({"", "Pending"})


def min_member_of(job: TrainingJob) -> int:
    """The PodGroup's ``minMember``: ``schedulingPolicy.minAvailable``, else every replica."""
    policy = job.run_policy.scheduling_policy
    if policy is not None and policy.min_available is not None:
        return policy.min_available
    return sum(replica_count(job, replica_type) for replica_type in job.replica_specs)


def min_member(ctx: ReconcileContext) -> int:
    return min_member_of(ctx.job)


def sync_pod_group(ctx: ReconcileContext) -> bool:
    """Sync the PodGroup; True when replicas may be created now."""
    scheduler = ctx.traits.gang_scheduler
    if scheduler is None:
        return True
    ctx.actions.append(SyncPodGroup(min_member(ctx)))
    if scheduler.lower() != VOLCANO or ctx.framework.mpi_operator_gang:
        return True
    group = ctx.observation.pod_group
    if group is not None and group.exists and (group.phase or "") not in _NOT_ADMITTED:
        return True
    ctx.status.last_reconcile_time = ctx.now
    ctx.wake_up_in(GANG_WAIT_SECONDS)
    return False
