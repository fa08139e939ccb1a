"""Scheduling timeout: a job fails when one of its pods is still not running N seconds after it was created.

"99 of 100 workers running, 1 pending forever" (kubeflow/trainer#1282): the only timeout until now was Kueue's
``waitForPodsReady``. A job that sets ``kubetrain.dev/scheduling-timeout-seconds: N`` fails, with a ``Failed``
condition (reason ``SchedulingTimeoutExceeded``) and a Warning event that name the pod and quote why it waits,
once any pod of its is N seconds old and still:

- not scheduled: the scheduler's reason (``0/4 nodes are available: 4 Insufficient nvidia.com/gpu``), or no
  scheduler placed it at all (a gang scheduler holding it, a ``schedulerName`` nobody serves);
- or placed, but its image cannot be pulled (the kubelet's ``ErrImagePull``/``ImagePullBackOff`` and message).

A pod placed and starting (pulling a large image, mounting volumes, its init containers running) is not
waiting for scheduling. The engine's clock makes it fire without any other event: ``requeue_after`` is the
first pod's due time. Failing stops everything at once, as a backoffLimit failure does.
"""

from __future__ import annotations

from datetime import timedelta

from kubetrain.api.common import ConditionType
from kubetrain.engine.completion import expire
from kubetrain.engine.context import ReconcileContext
from kubetrain.engine.diagnosis import IMAGE_PULL_REASONS
from kubetrain.engine.fault_policy import SCHEDULING_TIMEOUT_ANNOTATION
from kubetrain.engine.types import EventType, ObservedReplica, Phase

SCHEDULING_TIMEOUT_REASON = "SchedulingTimeoutExceeded"
QUOTED_CHARACTERS = 300
"""Longer scheduler or kubelet messages are cut."""


def waiting_for(ctx: ReconcileContext, replica: ObservedReplica) -> tuple[str, str] | None:
    """What a pending replica waits for and why (the scheduler's or the kubelet's words): None when it is
    starting. (Locally nothing schedules: only an image can be waited for.)"""
    if replica.unschedulable:
        return "not scheduled", _cut(replica.unschedulable)
    if not replica.placed and not ctx.traits.colocated:
        return "not scheduled", "no scheduler has placed it"
    for container in replica.containers:
        if container.waiting_reason in IMAGE_PULL_REASONS:
            detail = f": {_cut(container.waiting_message)}" if container.waiting_message else ""
            return "waiting for its image", f"image {container.image} {container.waiting_reason}{detail}"
    return None


def check_scheduling_timeout(ctx: ReconcileContext) -> bool:
    """Fail the job when a pod waited past the timeout; else look again when the first one would. True when it
    failed."""
    timeout = ctx.fault_policy.scheduling_timeout
    if timeout is None:
        return False
    late: list[tuple[ObservedReplica, tuple[str, str]]] = []
    for replica in ctx.observation.replicas:
        if replica.terminating or replica.phase is not Phase.PENDING or replica.created_at is None:
            continue
        cause = waiting_for(ctx, replica)
        if cause is None:
            continue
        due = replica.created_at + timedelta(seconds=timeout)
        if ctx.now >= due:
            late.append((replica, cause))
        else:
            ctx.wake_up_in((due - ctx.now).total_seconds())
    if not late:
        return False
    replica, (state, why) = late[0]
    pod = ctx.framework.pod_name(ctx.job, replica.replica_type, replica.index)
    others = f"; {len(late) - 1} more pods waited as long" if len(late) > 1 else ""
    message = (
        f"{ctx.kind} {ctx.name} has failed because pod {pod} is still {state} {timeout}s after it was "
        f"created ({SCHEDULING_TIMEOUT_ANNOTATION}: {timeout}): {why}{others}"
    )
    if ctx.status.completion_time is None:
        ctx.status.completion_time = ctx.now
    ctx.delete_everything("failed")
    ctx.delete_pod_group()
    ctx.set_condition(ConditionType.FAILED, SCHEDULING_TIMEOUT_REASON, message, announce=EventType.WARNING)
    expire(ctx)
    return True


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= QUOTED_CHARACTERS else text[: QUOTED_CHARACTERS - 3] + "..."
