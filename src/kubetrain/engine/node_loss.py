"""Lost nodes: pods on a node that stopped reporting are replaced elsewhere, when the job asks or the node's
administrator says it is down.

A node whose kubelet stops reporting turns ``Ready`` ``Unknown`` (or ``False``); its pods still read Running,
and once deleted they stay Terminating, since no kubelet confirms it (upstream #2072, #2185). Kubernetes
deletes them after their ``node.kubernetes.io/unreachable`` toleration (300 s by default) and the engine
force-deletes them once stuck terminating (``replicas.force_stuck_replicas``): minutes of a wedged job. Two
ways shorten it:

- ``kubetrain.dev/node-loss-timeout-seconds: N`` on the job: N seconds after its node's ``Ready`` left
  ``True``, the job's pods there are force-deleted, so their replacements can be created (on another node);
- the ``node.kubernetes.io/out-of-service`` taint on the node, always: its administrator declared it down, so
  the pods there are force-deleted at once (as Kubernetes' own non-graceful node shutdown does for
  StatefulSets).

Either way it is a disruption (``NodeLost``, ``NodeOutOfService``), counted as such (``engine.disruptions``).
The risk: a node that is only cut off from the control plane (a network partition) may still be running the
old pod while its replacement starts elsewhere. The timeout is how long the job waits to rule that out.
"""

from __future__ import annotations

from datetime import timedelta

from kubetrain.engine.context import ReconcileContext
from kubetrain.engine.fault_policy import NODE_LOSS_TIMEOUT_ANNOTATION
from kubetrain.engine.types import Disruption, ObservedNode, ObservedReplica, Phase

NODE_LOST = "NodeLost"
NODE_OUT_OF_SERVICE = "NodeOutOfService"
OUT_OF_SERVICE_TAINT = "node.kubernetes.io/out-of-service"
FORCED_REASONS = frozenset({NODE_LOST, NODE_OUT_OF_SERVICE})
"""Disruptions the engine itself ends by force-deleting the pod."""


def lost_nodes(nodes: tuple[ObservedNode, ...]) -> dict[str, ObservedNode]:
    return {node.name: node for node in nodes if node.lost}


def node_state(node: ObservedNode) -> str:
    """``Ready Unknown since 2026-03-01T12:00:00Z (NodeStatusUnknown: Kubelet stopped posting ...)``."""
    if node.ready == "True" and node.out_of_service:
        return f"tainted {OUT_OF_SERVICE_TAINT}"
    since = f" since {node.since.strftime('%Y-%m-%dT%H:%M:%SZ')}" if node.since is not None else ""
    why = ": ".join(part for part in (node.reason, node.message) if part)
    state = f"Ready {node.ready}{since}" + (f" ({why})" if why else "")
    return f"{state}, tainted {OUT_OF_SERVICE_TAINT}" if node.out_of_service else state


def forced_off(
    ctx: ReconcileContext, replica: ObservedReplica, *, departed: bool = False
) -> Disruption | None:
    """The disruption that takes ``replica`` off its lost node now, if it is due: the node is out of service,
    or stopped reporting longer ago than the job's node-loss timeout. A finished replica runs nothing to
    replace (unless it is gone already: ``departed``)."""
    if replica.node is None or not ctx.observation.nodes:
        return None
    node = ctx.lost_nodes.get(replica.node)
    if node is None:
        return None
    if not departed and not replica.terminating and replica.phase in (Phase.SUCCEEDED, Phase.FAILED):
        return None
    if node.out_of_service:
        return Disruption(NODE_OUT_OF_SERVICE, f"node {node.name} is {node_state(node)}")
    timeout = ctx.fault_policy.node_loss_timeout
    if timeout is None or node.since is None or ctx.now < node.since + timedelta(seconds=timeout):
        return None
    return Disruption(
        NODE_LOST, f"node {node.name} is {node_state(node)}, past {NODE_LOSS_TIMEOUT_ANNOTATION}: {timeout}"
    )


def wake_up_for_node_loss(ctx: ReconcileContext) -> None:
    """Look again when the node-loss timeout of a node the job's replicas are on runs out."""
    timeout = ctx.fault_policy.node_loss_timeout
    lost = ctx.lost_nodes
    if timeout is None or not lost:
        return
    on = {replica.node for replica in ctx.observation.replicas if replica.node is not None}
    for name in on & lost.keys():
        since = lost[name].since
        if since is not None and not lost[name].out_of_service:
            due = since + timedelta(seconds=timeout)
            if due > ctx.now:
                ctx.wake_up_in((due - ctx.now).total_seconds())
