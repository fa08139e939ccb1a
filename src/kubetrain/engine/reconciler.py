"""``reconcile``: one job, what is observed of it and the time in; the complete Decision out.

The steps follow upstream's reconcile order (upstream-behaviour §4.1 step 7):

1. ``managedBy`` names another controller → nothing at all;
2. ``Created`` on first sight; replicas stuck terminating are force-deleted;
3. defaults and validation → an invalid spec fails the job with reason ``InvalidSpec``;
4. a finished job only gets cleanPodPolicy, PodGroup removal and TTL;
5. a suspended job gets everything deleted; a resumed one restarts its clock;
6. backoffLimit / activeDeadlineSeconds exceeded, or a pod waiting to be scheduled past the job's scheduling
   timeout → Failed, everything deleted;
7. gang scheduling: sync the PodGroup (under Volcano wait until it is admitted);
8. replicas: create, restart (one replica, or under restart scope Job all of them), replace the disrupted and
   those on lost nodes, scale down, count;
9. the framework's success / failure rules (a job whose replicas a disruption is replacing stays
   ``Restarting``), then startTime / completionTime;
10. a running job silent past its progress deadline is marked Stalled (or failed, if it asks);
11. the failure modes it shows (``engine.diagnosis``) become the Decision's findings, for the substrates to
    raise as Warning events; also in the reconcile where it fails, which they explain.

A job that finishes in step 8 or 9 is cleaned up in the same Decision (and nothing is created for
it), rather than on the next reconcile as upstream does.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from kubetrain.api.common import ConditionType
from kubetrain.api.errors import InvalidJobError
from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.admission import admit
from kubetrain.engine.autoscaling import delete_autoscaler, sync_autoscaler
from kubetrain.engine.completion import finish
from kubetrain.engine.conditions import condition_reason, created_message
from kubetrain.engine.context import ReconcileContext
from kubetrain.engine.diagnosis import diagnose
from kubetrain.engine.disruptions import announce_disruptions, disruptions
from kubetrain.engine.gang import sync_pod_group
from kubetrain.engine.limits import deadline_remaining, fail_for_limit, failure_from_limits
from kubetrain.engine.node_loss import wake_up_for_node_loss
from kubetrain.engine.progress import check_progress, clear_stalled
from kubetrain.engine.replicas import force_stuck_replicas, reconcile_replicas
from kubetrain.engine.restart_scope import restart_in_progress
from kubetrain.engine.scheduling_timeout import check_scheduling_timeout
from kubetrain.engine.suspension import resume_if_suspended, suspend
from kubetrain.engine.types import Decision, EventType, Observation, Traits
from kubetrain.frameworks.base import ConditionProposal, EventStyle, Framework, StatusContext
from kubetrain.frameworks.registry import framework_for

INVALID_SPEC_REASON = "InvalidSpec"


def reconcile(
    job: TrainingJob,
    observation: Observation,
    now: datetime,
    traits: Traits,
    framework: Framework[Any] | None = None,
) -> Decision:
    """Decide everything about ``job`` (as stored, defaults not yet applied) at time ``now``."""
    framework = framework or framework_for(job)
    managed_by = job.run_policy.managed_by
    if managed_by is not None and managed_by != framework.managed_by_self:
        return Decision(status=job.status)

    ctx = ReconcileContext.start(job, framework, observation, now, traits)
    if not ctx.status.conditions:
        # First sight. Only then: a late Created would become the last condition, the job's state.
        message = created_message(ctx.kind, ctx.name)
        ctx.set_condition(
            ConditionType.CREATED,
            condition_reason(ctx.kind, ConditionType.CREATED),
            framework.condition_message(job, ConditionType.CREATED, True, message),
            announce=EventType.NORMAL if framework.event_style is EventStyle.MPI_OPERATOR else None,
        )
    force_stuck_replicas(ctx)

    try:
        ctx.job = admit(job, framework, traits.limits)
    except InvalidJobError as error:
        _fail_invalid(ctx, error)
        return ctx.decision()
    ctx.admitted = True

    if ctx.status.is_finished:
        finish(ctx)
    elif ctx.job.run_policy.suspend:
        clear_stalled(ctx)
        suspend(ctx)
        delete_autoscaler(ctx)
    else:
        _run(ctx)
    return ctx.decision()


def reject(
    job: TrainingJob,
    error: InvalidJobError,
    now: datetime,
    traits: Traits,
    framework: Framework[Any] | None = None,
) -> Decision:
    """The Decision for a job whose spec the model cannot even read: Failed, reason ``InvalidSpec``.

    ``job`` is what could be read of it (identity, status, managedBy; see ``api.manifest.job_shell``).
    The failure is final at once: retrying cannot make the spec readable, and a job that sits at
    ``Created`` while the operator logs errors tells its author nothing."""
    framework = framework or framework_for(job)
    managed_by = job.run_policy.managed_by
    if (managed_by is not None and managed_by != framework.managed_by_self) or job.status.is_finished:
        return Decision(status=job.status)
    ctx = ReconcileContext.start(job, framework, observation=Observation(), now=now, traits=traits)
    if not ctx.status.conditions:
        ctx.set_condition(
            ConditionType.CREATED,
            condition_reason(ctx.kind, ConditionType.CREATED),
            created_message(ctx.kind, ctx.name),
            announce=EventType.NORMAL if framework.event_style is EventStyle.MPI_OPERATOR else None,
        )
    _fail_invalid(ctx, error)
    return ctx.decision()


def _fail_invalid(ctx: ReconcileContext, error: InvalidJobError) -> None:
    """A spec that bypassed validation fails the job before anything is created for it."""
    ctx.set_condition(
        ConditionType.FAILED,
        INVALID_SPEC_REASON,
        f"{ctx.kind} {ctx.name} has an invalid spec: {error}",
        announce=EventType.WARNING,
    )
    finish(ctx)


def _run(ctx: ReconcileContext) -> None:
    _run_replicas(ctx)
    _diagnose(ctx)


def _diagnose(ctx: ReconcileContext) -> None:
    """What the job's replicas show now, seen before this Decision's actions (which may be the restart or
    the failure a finding explains); look again when a time-based one may appear or go."""
    diagnosis = diagnose(
        ctx.job, ctx.framework, ctx.observation.replicas, ctx.now, ctx.status, ctx.observation.nodes
    )
    ctx.findings = diagnosis.findings
    if diagnosis.recheck_in is not None and not ctx.status.is_finished:
        ctx.wake_up_in(diagnosis.recheck_in)


def _run_replicas(ctx: ReconcileContext) -> None:
    resume_if_suspended(ctx)
    failure = failure_from_limits(ctx)
    if failure is not None:
        fail_for_limit(ctx, failure)
        return
    if check_scheduling_timeout(ctx):
        return
    wake_up_for_node_loss(ctx)
    sync_autoscaler(ctx)
    if not sync_pod_group(ctx):
        return

    observed = reconcile_replicas(ctx)
    if ctx.status.start_time is None:
        ctx.status.start_time = ctx.now
    # The rules see this round's conditions (TF keeps a Restarting set while replicas were restarted).
    current = ctx.job.with_status(ctx.status)
    retried = frozenset(t for t in ctx.job.replica_specs if ctx.retried_by_controller(t))
    context = StatusContext(current, ctx.status.replica_statuses, observed, ctx.traits.colocated, retried)
    restarting = bool(disruptions(ctx).tolerated) or restart_in_progress(ctx)
    for proposal in ctx.framework.status_rules(context):
        if restarting and isinstance(proposal, ConditionProposal) and proposal.type is ConditionType.RUNNING:
            continue  # Restarting until the disrupted replicas are replaced, or the job restart is over
        ctx.propose(proposal)
    announce_disruptions(ctx, restarting=not ctx.status.is_finished)
    if not ctx.status.is_finished:
        check_progress(ctx)

    if ctx.status.is_finished:
        ctx.drop_creations()
        finish(ctx)
        return
    remaining = deadline_remaining(ctx)
    if remaining is not None and not ctx.run_policy_carried_by_batch_job():
        # A deadline carried by a batch Job is the Job controller's to enforce, from the Job's own start:
        # a wake-up at the job's would come back "now" on every reconcile after it, until the Job fails.
        ctx.wake_up_in(remaining)
