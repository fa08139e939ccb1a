"""The job condition state machine (upstream ``UpdateJobConditions``, upstream-behaviour §4.2).

Rules, in the order they are checked:

- once ``Failed=True`` is present nothing changes any more (Failed is terminal);
- a condition of the same type with the same status and reason makes the update a no-op;
- the same status with a different reason replaces the condition but keeps its
  ``lastTransitionTime``;
- ``Running`` and ``Restarting`` exclude each other: setting one removes the other;
- setting ``Succeeded`` or ``Failed`` flips an existing ``Running`` to ``False``;
- the new condition is appended at the end, so the last condition is the job's current state.
"""

from __future__ import annotations

from datetime import datetime

from kubetrain.api.common import ConditionStatus, ConditionType, JobCondition, JobStatus

_EXCLUDES: dict[ConditionType, ConditionType] = {
    ConditionType.RUNNING: ConditionType.RESTARTING,
    ConditionType.RESTARTING: ConditionType.RUNNING,
}
_ENDS_RUNNING = frozenset({ConditionType.SUCCEEDED, ConditionType.FAILED})


def condition_reason(kind: str, type_: ConditionType | str) -> str:
    """Upstream's ``<Kind><Reason>`` reasons: ``PyTorchJobRunning``, ``TFJobSuspended``."""
    return f"{kind}{type_}"


def set_condition(
    status: JobStatus,
    type_: ConditionType,
    value: ConditionStatus,
    reason: str,
    message: str,
    now: datetime,
) -> bool:
    """Apply one condition to ``status`` in place; True when the conditions changed."""
    if status.is_true(ConditionType.FAILED):
        return False
    current = status.condition(type_)
    if current is not None and current.status == value and current.reason == reason:
        return False
    transition = current.last_transition_time if current is not None and current.status == value else now
    kept: list[JobCondition] = []
    for condition in status.conditions:
        if condition.type == type_ or condition.type == _EXCLUDES.get(type_):
            continue
        if (
            type_ in _ENDS_RUNNING
            and condition.type == ConditionType.RUNNING
            and condition.status != ConditionStatus.FALSE
        ):
            condition = condition.model_copy(
                update={
                    "status": ConditionStatus.FALSE,
                    "last_update_time": now,
                    "last_transition_time": now,
                }
            )
        kept.append(condition)
    kept.append(
        JobCondition(
            type=type_,
            status=value,
            reason=reason,
            message=message,
            last_update_time=now,
            last_transition_time=transition,
        )
    )
    status.conditions = kept
    return True


def update_conditions(
    status: JobStatus,
    type_: ConditionType,
    status_value: ConditionStatus,
    reason: str,
    message: str,
    now: datetime,
) -> JobStatus:
    """The status with one condition applied by the state machine; the input is not modified."""
    updated = status.model_copy(deep=True)
    set_condition(updated, type_, status_value, reason, message, now)
    return updated


def created_message(kind: str, name: str) -> str:
    return f"{kind} {name} is created."


def suspended_message(kind: str, name: str) -> str:
    return f"{kind} {name} is suspended."


def resumed_message(kind: str, name: str) -> str:
    return f"{kind} {name} is resumed."


def backoff_limit_message(name: str) -> str:
    return f"Job {name} has failed because it has reached the specified backoff limit"


def deadline_message(name: str) -> str:
    return f"Job {name} has failed because it was active longer than specified deadline"


def restarting_message(name: str, replica_type: str) -> str:
    return f"job {name} is restarting because {replica_type} replica(s) failed."


def exit_code_failure_message(name: str, replica_type: str) -> str:
    return f'job "{name}" is failing because "{replica_type}" replica(s) failed.'
