"""Hang detection: a running job that reported progress and then went quiet for longer than it allows.

A job opts in with ``kubetrain.dev/progress-deadline-seconds`` (the name and meaning of a Deployment's
``progressDeadlineSeconds``): the most seconds it may run without a progress report. The clock starts at the
later of its last report (``status.trainerStatus.lastUpdatedTime``) and the moment it last became Running, so
replicas restarted for any reason get the whole deadline again. A job that has never reported is never
called stalled: it may simply not be instrumented.

Past the deadline the job gets a ``Stalled`` condition and a Warning event naming the replicas still running
without reporting and the last report. With ``kubetrain.dev/progress-deadline-action: Fail`` the silent
replicas are failed instead, so that their restart policy applies: restarted (counting against
``backoffLimit``) when every one of them would be restarted after a failure (OnFailure, Always, ExitCode,
where a hang counts as retryable like a kill), otherwise the job fails. ``Stalled`` goes as soon as a report
arrives, the job restarts or it finishes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from kubetrain.api.common import ConditionType, RestartPolicy
from kubetrain.api.errors import FieldError, map_key
from kubetrain.api.jobs import TrainingJob
from kubetrain.api.progress import TrainerStatus
from kubetrain.api.validation import invalid, not_supported
from kubetrain.engine.context import ReconcileContext
from kubetrain.engine.planning import replica_policy
from kubetrain.engine.types import EventType, ObservedReplica, Phase

PROGRESS_DEADLINE_ANNOTATION = "kubetrain.dev/progress-deadline-seconds"
PROGRESS_DEADLINE_ACTION_ANNOTATION = "kubetrain.dev/progress-deadline-action"
STALLED_REASON = "ProgressDeadlineExceeded"
RESUMED_REASON = "ProgressResumed"
NAMED_REPLICAS = 8
"""Silent replicas a message names before it says how many more there are."""
SUMMARISED_METRICS = 3

_RESTARTED_AFTER_HANG = frozenset({RestartPolicy.ON_FAILURE, RestartPolicy.ALWAYS, RestartPolicy.EXIT_CODE})


class DeadlineAction(StrEnum):
    WARN = "Warn"
    """A condition and a Warning event; the replicas keep running."""
    FAIL = "Fail"
    """The silent replicas are failed, so that their restart policy applies."""


@dataclass(frozen=True)
class ProgressDeadline:
    seconds: int
    action: DeadlineAction


def _annotation_path(name: str) -> str:
    return f"metadata.annotations{map_key(name)}"


def progress_deadline_errors(job: TrainingJob) -> list[FieldError]:
    """The two annotations' values, checked in admission."""
    annotations = job.metadata.annotations or {}
    errors: list[FieldError] = []
    seconds = annotations.get(PROGRESS_DEADLINE_ANNOTATION)
    if seconds is not None and not (seconds.isdigit() and int(seconds) > 0):
        errors.append(
            invalid(
                _annotation_path(PROGRESS_DEADLINE_ANNOTATION),
                seconds,
                'must be a whole number of seconds greater than 0, e.g. "600"',
            )
        )
    action = annotations.get(PROGRESS_DEADLINE_ACTION_ANNOTATION)
    if action is not None and action not in set(DeadlineAction):
        errors.append(
            not_supported(_annotation_path(PROGRESS_DEADLINE_ACTION_ANNOTATION), action, list(DeadlineAction))
        )
    elif action is not None and seconds is None:
        errors.append(
            FieldError(
                _annotation_path(PROGRESS_DEADLINE_ACTION_ANNOTATION),
                f"Forbidden: only takes effect with {PROGRESS_DEADLINE_ANNOTATION}; set that too",
            )
        )
    return errors


def progress_deadline(job: TrainingJob) -> ProgressDeadline | None:
    """The job's deadline, or None when it has none (the annotations were checked in admission)."""
    annotations = job.metadata.annotations or {}
    seconds = annotations.get(PROGRESS_DEADLINE_ANNOTATION)
    if seconds is None or not seconds.isdigit():
        return None
    action = annotations.get(PROGRESS_DEADLINE_ACTION_ANNOTATION, DeadlineAction.WARN)
    return ProgressDeadline(int(seconds), DeadlineAction(action))


def check_progress(ctx: ReconcileContext) -> None:
    """Mark, or fail, a running job that has been silent past its deadline; clear the mark otherwise."""
    deadline = progress_deadline(ctx.job)
    report = ctx.status.trainer_status
    running = ctx.status.condition(ConditionType.RUNNING)
    if (
        deadline is None
        or report is None
        or report.last_updated_time is None
        or running is None
        or not ctx.status.is_true(ConditionType.RUNNING)
    ):
        clear_stalled(ctx, report)
        return
    since = max(report.last_updated_time, running.last_transition_time or report.last_updated_time)
    due = since + timedelta(seconds=deadline.seconds)
    if ctx.now < due:
        clear_stalled(ctx, report)
        ctx.wake_up_in((due - ctx.now).total_seconds())
        return
    silent = [r for r in ctx.observation.replicas if r.phase is Phase.RUNNING and not r.terminating]
    message = _stalled_message(ctx, deadline, report, since, silent)
    if deadline.action is DeadlineAction.FAIL and silent:
        _fail_silent_replicas(ctx, silent, message)
    else:
        ctx.set_condition(ConditionType.STALLED, STALLED_REASON, message, announce=EventType.WARNING)


def clear_stalled(ctx: ReconcileContext, report: TrainerStatus | None = None) -> None:
    """Drop ``Stalled`` (it only says something while true, and must not stay the last condition)."""
    stalled = ctx.status.condition(ConditionType.STALLED)
    if stalled is None:
        return
    ctx.status.conditions = [c for c in ctx.status.conditions if c.type != ConditionType.STALLED]
    reported = report.last_updated_time if report is not None else None
    transition = stalled.last_transition_time
    if reported is not None and transition is not None and reported >= transition:
        ctx.emit(
            EventType.NORMAL,
            RESUMED_REASON,
            f"{ctx.kind} {ctx.name} reported progress again at {_stamp(reported)}",
        )


def _fail_silent_replicas(ctx: ReconcileContext, silent: list[ObservedReplica], message: str) -> None:
    policies = {replica_policy(ctx.job, r.replica_type, ctx.framework) for r in silent}
    if not policies <= _RESTARTED_AFTER_HANG:
        failed = f"{message}; the job has failed"
        ctx.set_condition(ConditionType.FAILED, STALLED_REASON, failed, announce=EventType.WARNING)
        return
    for replica in silent:
        if ctx.delete_replica(replica, "restart"):
            counts = ctx.status.replica_statuses.get(replica.replica_type)
            if counts is not None:
                counts.restarts += replica.restart_count + 1
    clear_stalled(ctx)
    restarting = f"{message}; restarting them"
    ctx.set_condition(ConditionType.RESTARTING, STALLED_REASON, restarting, announce=EventType.WARNING)


def _stalled_message(
    ctx: ReconcileContext,
    deadline: ProgressDeadline,
    report: TrainerStatus,
    since: datetime,
    silent: list[ObservedReplica],
) -> str:
    last = f"{_stamp(report.last_updated_time or since)} ({_summary(report)})"
    if report.last_updated_time is not None and since > report.last_updated_time:
        quiet = f"no progress report since it became Running at {_stamp(since)} (last report {last})"
    else:
        quiet = f"no progress report since {last}"
    names = [ctx.framework.pod_name(ctx.job, r.replica_type, r.index) for r in silent]
    shown = ", ".join(names[:NAMED_REPLICAS])
    if len(names) > NAMED_REPLICAS:
        shown += f" and {len(names) - NAMED_REPLICAS} more"
    replicas = f"; running without reporting: {shown}" if names else "; no replica is running"
    return (
        f"{ctx.kind} {ctx.name} has had {quiet}, longer than its progress deadline of "
        f"{deadline.seconds}s ({PROGRESS_DEADLINE_ANNOTATION}){replicas}"
    )


def _summary(report: TrainerStatus) -> str:
    parts = []
    if report.progress_percentage is not None:
        parts.append(f"{report.progress_percentage}%")
    parts += [f"{m.name}={m.value}" for m in (report.metrics or [])[:SUMMARISED_METRICS]]
    return ", ".join(parts) or "no values"


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")
