"""Replica reconciliation (§4.3): create what is missing, restart what failed, count what is there.

Deliberate improvement: a replica stuck terminating (its node is gone, so nothing confirms the
deletion) would otherwise keep its slot forever and wedge the job in ``Restarting`` (upstream
#2072, #2185). Once it is ``STUCK_GRACE_SECONDS`` past its ``deletionTimestamp`` the engine asks
for a forced deletion; until then it is counted as failed, as upstream counts terminating pods,
and nothing new is created in its place.

A disrupted replica (``engine.disruptions``) is replaced whatever its policy and is not counted; under restart
scope Job (``engine.restart_scope``) a failure restarts every replica together, and nothing is created while
any of them is still going.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from kubetrain.api.common import ConditionType, ReplicaStatus, RestartPolicy
from kubetrain.engine.conditions import condition_reason, exit_code_failure_message, restarting_message
from kubetrain.engine.context import ReconcileContext
from kubetrain.engine.disruptions import DisruptionView, disruptions
from kubetrain.engine.node_loss import FORCED_REASONS
from kubetrain.engine.planning import fills_selector, replica_count, replica_policy, replica_type_selector
from kubetrain.engine.restart_scope import (
    UNKNOWN_EXIT_CODE,
    is_retryable,
    job_scope,
    restart_in_progress,
    restart_job,
    restarted_after_failure,
)
from kubetrain.engine.types import EventType, ObservedReplica, Phase
from kubetrain.frameworks.base import ReplicaPhase

__all__ = ["UNKNOWN_EXIT_CODE", "force_stuck_replicas", "is_retryable", "reconcile_replicas"]

STUCK_GRACE_SECONDS = 60.0
"""How long past its deletion deadline a terminating replica may linger before it is force-deleted."""


def force_stuck_replicas(ctx: ReconcileContext) -> None:
    grace = timedelta(seconds=STUCK_GRACE_SECONDS)
    for replica in ctx.notable_replicas:  # a steady one is not terminating
        if not replica.terminating or replica.deletion_timestamp is None:
            continue
        stuck_at = replica.deletion_timestamp + grace
        if ctx.now >= stuck_at:
            ctx.delete_replica(replica, "stuck", force=True)
        else:
            ctx.wake_up_in((stuck_at - ctx.now).total_seconds())


def reconcile_replicas(ctx: ReconcileContext) -> list[ReplicaPhase]:
    """Actions and replica counts for every materialised type; returns what the status rules see."""
    observed = ctx.observed_by_key()
    materialised = ctx.framework.materialised_replica_types(ctx.job, ctx.traits.colocated)
    wanted = {replica_type: replica_count(ctx.job, replica_type) for replica_type in materialised}
    # One look at every key for those the job does not want (a type it does not materialise, an index past
    # its count), rather than one per type.
    misplaced = [key for key in observed if not 0 <= key[1] < wanted.get(key[0], 0)]
    misplaced_services = [
        key for key in ctx.observation.services or () if not 0 <= key[1] < wanted.get(key[0], 0)
    ]
    # Then every service wanted is there, the common case: none is looked up.
    all_services = not misplaced_services and len(ctx.observation.services or ()) == sum(wanted.values())
    seen: list[ReplicaPhase] = []
    holding = restart_in_progress(ctx)
    for replica_type in materialised:
        unwanted = {i for (t, i) in (*misplaced, *misplaced_services) if t == replica_type}
        seen.extend(
            _reconcile_type(
                ctx, replica_type, observed, holding, wanted[replica_type], unwanted, all_services
            )
        )
    restart_job(ctx)
    for key in misplaced:
        if key[0] not in materialised:
            for replica in observed[key]:
                ctx.delete_replica_and_service(replica, "scale-down")
    for key in sorted(misplaced_services):
        if key[0] not in materialised:
            ctx.delete_service(key)
    return seen


def _reconcile_type(
    ctx: ReconcileContext,
    replica_type: str,
    observed: dict[tuple[str, int], tuple[ObservedReplica, ...]],
    holding: bool,
    wanted: int,
    unwanted: set[int],
    all_services: bool,
) -> list[ReplicaPhase]:
    """``holding``: a job restart is under way (restart scope Job), so nothing is created; ``wanted``: the
    replicas the job asks for; ``unwanted``: the indices of its children past that (or negative);
    ``all_services``: the service of each replica the job wants is there."""
    previous = ctx.status.replica_statuses.get(replica_type)
    view = disruptions(ctx)
    counts = ReplicaStatus(
        restarts=previous.restarts if previous is not None else 0,
        disruptions=(previous.disruptions if previous is not None else 0)
        + view.departed.get(replica_type, 0),
    )
    if fills_selector(ctx.framework):
        counts.selector = replica_type_selector(ctx.job, replica_type, ctx.framework)
    ender = ctx.framework.counts_end_with
    if previous is not None or replica_type != ender or any(t == replica_type for (t, _) in observed):
        # The replica type that ends the counting (the mpi-operator's launcher) is listed once it exists.
        ctx.status.replica_statuses[replica_type] = counts
    counted = ender is None or replica_type == ender or not _has_ended(ctx, ender)

    seen: list[ReplicaPhase] = []
    restarting_together = job_scope(ctx)
    tally = _Tally()
    services = ctx.observation.services if ctx.framework.per_replica_services and not all_services else None
    # A steady replica alone at its index, with its service, while no disruption is ending any replica: it is
    # counted active and shown to the status rules, and nothing else (no event, no failure, no creation).
    settled = counted and not view.tolerated and not view.exceeded
    steady = 0
    for index in range(wanted):
        key = (replica_type, index)
        replicas = observed.get(key, ())
        if settled and len(replicas) == 1:
            replica = replicas[0]
            if replica.steady and (services is None or key in services):
                steady += 1
                seen.append(replica)
                continue
        if services is not None and key not in services:
            ctx.create_service(key)
        if not replicas:
            if not holding and _awaited_replicas_ready(ctx, replica_type, observed):
                ctx.create_replica(key)
                _warn_about_template_overrides(ctx, replica_type)
            continue
        for replica in replicas:
            _record_exit_code(ctx, replica)
            if _replace_disrupted(ctx, view, replica, counts, restarting_together):
                continue  # replaced for free: neither counted nor shown to the status rules
            if counted and not (replica.terminating and restarting_together):
                # Under restart scope Job a terminating replica is one the job restart stops: neither a
                # failure nor a success of this run.
                tally.count(replica)
            _warn_if_abnormal(ctx, replica)
            seen.append(replica)
            if (
                replica.phase is Phase.FAILED
                and not replica.terminating
                and not ctx.retried_by_controller(replica_type)
                and not (restarting_together and restarted_after_failure(ctx, replica))
            ):
                _handle_failure(ctx, replica, counts)
    # Children at an index the job does not want (past its count, or a label's negative number) are deleted.
    for index in sorted(unwanted):
        key = (replica_type, index)
        for replica in observed.get(key, ()):
            ctx.delete_replica(replica, "scale-down")
        ctx.delete_service(key)
    tally.active += steady
    tally.add_to(counts)
    return seen


def _replace_disrupted(
    ctx: ReconcileContext,
    view: DisruptionView,
    replica: ObservedReplica,
    counts: ReplicaStatus,
    restarting_together: bool,
) -> bool:
    """Delete a replica a disruption is ending, when it is the engine's to delete: one on a lost node
    (forced), one that failed (evicted by the kubelet, its node shut down). True when it is replaced for free
    (within the job's disruption limit); a forced one past the limit counts as a failure. Under restart scope
    Job (``restarting_together``) the job restart deletes it, with every other replica."""
    if not view.tolerated and not view.exceeded:
        return False  # no disruption this round: the common case, asked for each of a big job's replicas
    tolerated = view.tolerates(replica) is not None
    forced = next(
        (
            d
            for r, d in (*view.tolerated.values(), *view.exceeded)
            if r is replica and d.reason in FORCED_REASONS
        ),
        None,
    )
    if restarting_together:
        return tolerated
    if forced is not None:
        if ctx.delete_replica(replica, "node-lost", force=True) and not replica.terminating:
            # Its in-place restarts stay counted once it is gone; past the limit, so does this failure.
            counts.restarts += replica.restart_count + (0 if tolerated else 1)
    elif (
        tolerated
        and replica.phase is Phase.FAILED
        and not replica.terminating
        and ctx.delete_replica(replica, "disruption")
    ):
        counts.restarts += replica.restart_count
    return tolerated


def _awaited_replicas_ready(
    ctx: ReconcileContext, replica_type: str, observed: dict[tuple[str, int], tuple[ObservedReplica, ...]]
) -> bool:
    """Whether every replica of each type ``replica_type`` waits for is Ready (WaitForWorkersReady, JobSet's
    ``dependsOn: Ready``) or has succeeded (``dependsOn: Complete``).

    A type that is not materialised here (locally, MPI's workers) is not waited for."""
    materialised = ctx.framework.materialised_replica_types(ctx.job, ctx.traits.colocated)
    for awaited, status in ctx.framework.startup_dependencies(ctx.job, replica_type):
        if awaited not in materialised:
            continue
        for index in range(replica_count(ctx.job, awaited)):
            replicas = observed.get((awaited, index), ())
            succeeded = any(r.phase is Phase.SUCCEEDED for r in replicas)
            ready = any(r.ready and not r.terminating for r in replicas)
            done = {"Complete": succeeded, "Ready": ready, "ReadyOrSucceeded": ready or succeeded}[status]
            if not done:
                return False
    return True


def _warn_about_template_overrides(ctx: ReconcileContext, replica_type: str) -> None:
    """Upstream warns on every creation from a template whose settings kubetrain overrides."""
    pod_spec = ctx.job.replica_specs[replica_type].template.get("spec")
    if not isinstance(pod_spec, dict):
        return
    if pod_spec.get("restartPolicy") is not None:
        ctx.emit(
            EventType.WARNING,
            "SetPodTemplateRestartPolicy",
            "Restart policy in pod template will be overwritten by restart policy in replica spec",
        )
    scheduler = ctx.traits.gang_scheduler
    wanted = pod_spec.get("schedulerName")
    forced = ctx.framework.mpi_operator_gang
    if scheduler is not None and wanted is not None and wanted != scheduler and not forced:
        ctx.emit(
            EventType.WARNING,
            "SetPodTemplateSchedulerName",
            "Another scheduler is specified when gang-scheduling is enabled and it will not be overwritten",
        )


def _has_ended(ctx: ReconcileContext, replica_type: str) -> bool:
    """Whether a replica of ``replica_type`` succeeded or failed for good (an ended one is not steady)."""
    return any(
        replica.replica_type == replica_type and replica.phase in (Phase.SUCCEEDED, Phase.FAILED)
        for replica in ctx.notable_replicas
    )


def _record_exit_code(ctx: ReconcileContext, replica: ObservedReplica) -> None:
    """Upstream records how each pod's default container ended on every reconcile while it stays ended
    (succeeded or failed, terminating or not); the recorder folds the repeats into one Event's count."""
    if not ctx.framework.exit_code_events or replica.exit_code is None or replica.phase is Phase.RUNNING:
        return
    pod = ctx.framework.pod_name(ctx.job, replica.replica_type, replica.index)
    ctx.emit(
        EventType.NORMAL,
        "ExitedWithCode",
        f"Pod: {ctx.job.namespace}.{pod} exited with code {replica.exit_code}",
    )


def _warn_if_abnormal(ctx: ReconcileContext, replica: ObservedReplica) -> None:
    """A live replica's abnormal signs become Warning events on the job, on every reconcile as upstream
    (the kube substrate's recorder folds the repeats into one Event with a growing count).

    Live as upstream's ``FilterActivePods`` means it: neither finished nor terminating. That includes
    Pending replicas, where an image that cannot be pulled or an unschedulable pod shows.
    """
    if not replica.warnings or replica.terminating or replica.phase in (Phase.SUCCEEDED, Phase.FAILED):
        return
    pod = ctx.framework.pod_name(ctx.job, replica.replica_type, replica.index)
    for reason, detail in replica.warnings:
        ctx.emit(EventType.WARNING, reason, f"Error pod {pod} {detail}")


@dataclass
class _Tally:
    """A replica type's active, succeeded and failed replicas, counted in plain integers and added to its
    status once: a validated model's assignment per replica cost a big job's reconcile 10 %."""

    active: int = 0
    succeeded: int = 0
    failed: int = 0

    def count(self, replica: ObservedReplica) -> None:
        self.failed += replica.retried_failures
        if replica.phase is Phase.RUNNING:
            # A Running replica that is terminating is lost (its node is gone), not active.
            if replica.terminating:
                self.failed += 1
            else:
                self.active += 1
        elif replica.phase is Phase.SUCCEEDED:
            self.succeeded += 1
        elif replica.phase is Phase.FAILED:
            self.failed += 1

    def add_to(self, counts: ReplicaStatus) -> None:
        counts.active += self.active
        counts.succeeded += self.succeeded
        counts.failed += self.failed


def _handle_failure(ctx: ReconcileContext, replica: ObservedReplica, counts: ReplicaStatus) -> None:
    policy = replica_policy(ctx.job, replica.replica_type, ctx.framework)
    if policy not in ctx.framework.replaces_failed_replicas:
        return  # left failed: the framework's status rules decide what that means for the job
    if restarted_after_failure(ctx, replica):
        reason = condition_reason(ctx.kind, ConditionType.RESTARTING)
        message = restarting_message(ctx.name, replica.replica_type)
        if ctx.delete_replica(replica, "restart"):
            # The recreated replica starts again from restart count 0: keep what this one used.
            counts.restarts += replica.restart_count + 1
            # One event per replaced replica, as upstream, even while the job is already Restarting.
            ctx.emit(EventType.WARNING, reason, message)
        ctx.set_condition(ConditionType.RESTARTING, reason, message)
    elif policy is RestartPolicy.EXIT_CODE:
        reason = condition_reason(ctx.kind, ConditionType.FAILED)
        message = exit_code_failure_message(ctx.name, replica.replica_type)
        ctx.emit(EventType.WARNING, reason, message)
        ctx.set_condition(ConditionType.FAILED, reason, message)
