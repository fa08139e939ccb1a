"""The §4.2 condition state machine."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kubetrain.api.common import ConditionStatus, ConditionType, JobStatus
from kubetrain.engine.conditions import update_conditions

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = T0 + timedelta(minutes=1)
TRUE, FALSE = ConditionStatus.TRUE, ConditionStatus.FALSE


def _with(status: JobStatus, type_: ConditionType, reason: str, at: datetime = T0) -> JobStatus:
    return update_conditions(status, type_, TRUE, reason, f"{reason} message", at)


def test_a_new_condition_is_appended_with_both_times_now() -> None:
    status = update_conditions(JobStatus(), ConditionType.CREATED, TRUE, "ToyJobCreated", "created", T0)
    (created,) = status.conditions
    assert (created.type, created.status, created.reason, created.message) == (
        ConditionType.CREATED,
        TRUE,
        "ToyJobCreated",
        "created",
    )
    assert created.last_update_time == T0
    assert created.last_transition_time == T0


def test_the_latest_condition_is_last() -> None:
    status = _with(_with(JobStatus(), ConditionType.RUNNING, "Running"), ConditionType.CREATED, "Created")
    status = _with(status, ConditionType.RUNNING, "RunningAgain")
    assert [c.type for c in status.conditions] == [ConditionType.CREATED, ConditionType.RUNNING]


def test_failed_is_terminal_no_condition_changes_afterwards() -> None:
    failed = _with(_with(JobStatus(), ConditionType.RUNNING, "Running"), ConditionType.FAILED, "Failed")
    for type_ in ConditionType:
        assert _with(failed, type_, "Other", T1) == failed


def test_same_status_and_reason_is_a_no_op() -> None:
    status = _with(JobStatus(), ConditionType.RUNNING, "Running")
    again = update_conditions(status, ConditionType.RUNNING, TRUE, "Running", "a new message", T1)
    assert again == status


def test_same_status_with_a_different_reason_keeps_last_transition_time() -> None:
    status = _with(JobStatus(), ConditionType.RUNNING, "Running")
    updated = _with(status, ConditionType.RUNNING, "StillRunning", T1)
    (running,) = updated.conditions
    assert running.reason == "StillRunning"
    assert running.last_transition_time == T0
    assert running.last_update_time == T1


def test_a_status_change_moves_last_transition_time() -> None:
    status = _with(JobStatus(), ConditionType.SUSPENDED, "Suspended")
    resumed = update_conditions(status, ConditionType.SUSPENDED, FALSE, "Resumed", "resumed", T1)
    (suspended,) = resumed.conditions
    assert suspended.status == FALSE
    assert suspended.last_transition_time == T1


def test_setting_running_removes_restarting() -> None:
    status = _with(JobStatus(), ConditionType.RESTARTING, "Restarting")
    status = _with(status, ConditionType.RUNNING, "Running", T1)
    assert [c.type for c in status.conditions] == [ConditionType.RUNNING]


def test_setting_restarting_removes_running() -> None:
    status = _with(JobStatus(), ConditionType.RUNNING, "Running")
    status = _with(status, ConditionType.RESTARTING, "Restarting", T1)
    assert [c.type for c in status.conditions] == [ConditionType.RESTARTING]


def test_succeeded_flips_running_to_false_and_keeps_it_in_the_list() -> None:
    status = _with(JobStatus(), ConditionType.RUNNING, "Running")
    status = _with(status, ConditionType.SUCCEEDED, "Succeeded", T1)
    running = status.condition(ConditionType.RUNNING)
    assert running is not None
    assert running.status == FALSE
    assert [c.type for c in status.conditions] == [ConditionType.RUNNING, ConditionType.SUCCEEDED]


def test_failed_flips_running_to_false() -> None:
    status = _with(JobStatus(), ConditionType.RUNNING, "Running")
    status = _with(status, ConditionType.FAILED, "Failed", T1)
    assert not status.is_true(ConditionType.RUNNING)
    assert status.is_true(ConditionType.FAILED)


def test_update_conditions_leaves_its_input_unchanged() -> None:
    status = _with(JobStatus(), ConditionType.RUNNING, "Running")
    before = status.model_copy(deep=True)
    _with(status, ConditionType.SUCCEEDED, "Succeeded", T1)
    assert status == before
