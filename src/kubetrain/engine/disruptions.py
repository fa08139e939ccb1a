"""Disruptions: a replica ended through no fault of its own is replaced without counting against backoffLimit.

Kubernetes marks a pod it ends on purpose with the ``DisruptionTarget`` condition: preempted by the scheduler,
evicted through the Eviction API (a drain, a PodDisruptionBudget-respecting eviction), deleted by the taint
manager (a ``NoExecute`` taint, an unreachable node), terminated by the kubelet (node-pressure eviction,
graceful node shutdown) or by the pod garbage collector. The engine adds its own force-deletion of a pod on a
lost node (``engine.node_loss``). Such a replica, once it has failed or is being deleted:

- is replaced, whatever its restart policy (a disruption says nothing about the program: ``Never`` means "do
  not retry my failures", and this is none);
- is not a failure: not counted in ``replicaStatuses.<type>.failed`` nor in ``backoffLimit``, and the status
  rules do not see it (so a ``Never`` job, or an MPIJob with an evicted worker, is not failed by it);
- is counted in ``replicaStatuses.<type>.disruptions`` once it is gone (the kube substrate hands the engine
  the last state of each disrupted pod its watch saw deleted: ``Observation.departed``), so each counts once;
- makes the job ``Restarting`` (the condition's message names the pod and the disruption) and raises a
  ``Disrupted`` Warning event naming them, on every reconcile while it lasts (folded into one Event).

Bounded: a job may be disrupted ``kubetrain.dev/disruption-limit`` times (default: one per replica, at least
``MIN_DISRUPTION_LIMIT``). A disruption past the limit is a failure like any other, as upstream treats every
one: its restart policy and ``backoffLimit`` decide (a ``Disrupted`` event says so). A pod disrupted again and
again for a cause that stays (evicted for its own ephemeral-storage use, preempted by a workload that keeps
coming back) is then no longer replaced for free; ``0`` is upstream's treatment from the first one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kubetrain.api.common import ConditionType
from kubetrain.engine.conditions import condition_reason
from kubetrain.engine.context import ReconcileContext, ReplicaKey
from kubetrain.engine.fault_policy import DISRUPTION_LIMIT_ANNOTATION
from kubetrain.engine.node_loss import forced_off
from kubetrain.engine.types import Disruption, EventType, ObservedReplica, Phase

DISRUPTED_REASON = "Disrupted"
"""The Warning event raised for each disrupted replica."""
NAMED_PODS = 3
"""Disrupted pods a Restarting message names before it says how many more there are."""


@dataclass(frozen=True)
class DisruptionView:
    limit: int
    counted: int
    """Disruptions counted so far: the job's, with the departures counted now."""
    tolerated: Mapping[ReplicaKey, tuple[ObservedReplica, Disruption]]
    """Replicas still present that a disruption is ending, within the limit: replaced for free."""
    exceeded: tuple[tuple[ObservedReplica, Disruption], ...]
    """Replicas still present that a disruption is ending past the limit: failures like any other."""
    departed: Mapping[str, int]
    """Per replica type, the disruptions over since the last reconcile, counted now."""
    departed_replicas: tuple[tuple[ObservedReplica, Disruption], ...] = ()
    """Those replicas, as last seen: a pod evicted and gone between two reconciles is announced by them."""

    def tolerates(self, replica: ObservedReplica) -> Disruption | None:
        found = self.tolerated.get((replica.replica_type, replica.index))
        return found[1] if found is not None and found[0] is replica else None


def disruption_of(ctx: ReconcileContext, replica: ObservedReplica) -> Disruption | None:
    """What is ending ``replica`` through no fault of its own, once it has failed or is being deleted (a pod
    marked a moment before its eviction is still running: the eviction may yet be refused)."""
    forced = forced_off(ctx, replica)
    if forced is not None:
        return forced
    if replica.disruption is not None and (replica.phase is Phase.FAILED or replica.terminating):
        return replica.disruption
    return None


def disruptions(ctx: ReconcileContext) -> DisruptionView:
    """The job's disruptions this round (computed once per reconcile)."""
    if ctx.disruption_view is not None:
        return ctx.disruption_view
    limit = ctx.fault_policy.disruption_limit
    counted = sum(status.disruptions for status in ctx.status.replica_statuses.values())
    departed: dict[str, int] = defaultdict(int)
    departed_replicas: list[tuple[ObservedReplica, Disruption]] = []
    for replica in sorted(ctx.observation.departed, key=_position(ctx)):
        gone = replica.disruption or forced_off(ctx, replica, departed=True)
        if gone is not None and replica.replica_type in ctx.job.replica_specs and counted < limit:
            counted += 1
            departed[replica.replica_type] += 1
            departed_replicas.append((replica, gone))
    tolerated: dict[ReplicaKey, tuple[ObservedReplica, Disruption]] = {}
    exceeded: list[tuple[ObservedReplica, Disruption]] = []
    room = limit - counted
    # A steady replica is not disrupted; it may be on a lost node.
    candidates = ctx.observation.replicas if ctx.lost_nodes else ctx.notable_replicas
    ending = [
        (replica, disruption)
        for replica in candidates
        if replica.replica_type in ctx.job.replica_specs
        and not ctx.retried_by_controller(replica.replica_type)
        and (disruption := disruption_of(ctx, replica)) is not None
    ]
    position = _position(ctx)
    for replica, disruption in sorted(ending, key=lambda pair: position(pair[0])):
        if room > 0:
            tolerated[(replica.replica_type, replica.index)] = (replica, disruption)
            room -= 1
        else:
            exceeded.append((replica, disruption))
    ctx.disruption_view = DisruptionView(
        limit, counted, tolerated, tuple(exceeded), dict(departed), tuple(departed_replicas)
    )
    return ctx.disruption_view


def _position(ctx: ReconcileContext) -> Callable[[ObservedReplica], tuple[int, str, int]]:
    order = {replica_type: position for position, replica_type in enumerate(ctx.job.replica_specs)}

    def position(replica: ObservedReplica) -> tuple[int, str, int]:
        return (order.get(replica.replica_type, len(order)), replica.replica_type, replica.index)

    return position


def describe(disruption: Disruption) -> str:
    """``EvictionByEvictionAPI: Eviction API: evicting``."""
    return f"{disruption.reason}: {disruption.message}" if disruption.message else disruption.reason


def announce_disruptions(ctx: ReconcileContext, *, restarting: bool) -> None:
    """A Warning event for each disrupted replica, and (``restarting``) the job's Restarting condition naming
    them; a ``Disrupted`` event for each past the limit too, saying it counts as a failure."""
    view = disruptions(ctx)
    pods = []
    # A departed one too: evicted and gone between two reconciles, it was never seen ending.
    for replica, disruption in (*view.tolerated.values(), *view.departed_replicas):
        pod = ctx.framework.pod_name(ctx.job, replica.replica_type, replica.index)
        pods.append(f"{pod} ({describe(disruption)})")
        ctx.emit(
            EventType.WARNING,
            DISRUPTED_REASON,
            f"pod {pod} was disrupted ({describe(disruption)}): it is replaced without counting against "
            f"backoffLimit (the job may be disrupted {view.limit} times: {DISRUPTION_LIMIT_ANNOTATION})",
        )
    for replica, disruption in view.exceeded:
        pod = ctx.framework.pod_name(ctx.job, replica.replica_type, replica.index)
        ctx.emit(
            EventType.WARNING,
            DISRUPTED_REASON,
            f"pod {pod} was disrupted ({describe(disruption)}) after the job's {view.limit} disruptions "
            f"({DISRUPTION_LIMIT_ANNOTATION}): it counts as a failure, which its restart policy and "
            "backoffLimit decide",
        )
    if not restarting or not pods:
        return
    named = ", ".join(pods[:NAMED_PODS]) + (
        f" and {len(pods) - NAMED_PODS} more" if len(pods) > NAMED_PODS else ""
    )
    ctx.set_condition(
        ConditionType.RESTARTING,
        condition_reason(ctx.kind, ConditionType.RESTARTING),
        f"{ctx.kind} {ctx.name} is restarting because of a disruption, not a failure: "
        f"pod{'s' if len(pods) > 1 else ''} {named}",
    )
