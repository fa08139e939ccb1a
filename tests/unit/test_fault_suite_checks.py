"""The fault suite's fencing check (tests/fault_suite/audit_checks.py) tells a leader's writes from those of a
replica that no longer holds the Lease, from the audit log alone: a check that never fails proves nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fault_suite import audit_checks
from kubetrain.envtest.audit import AuditEvent

START = datetime(2026, 11, 26, 5, 0, tzinfo=UTC)
LEASE = "kubetrain-faults"


def event(
    seconds: float,
    agent: str,
    resource: str = "pods",
    holder: str | None = None,
    name: str = "p",
    code: int = 201,
) -> AuditEvent:
    at = START + timedelta(seconds=seconds)
    body = {"spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}} if holder is not None else None
    return AuditEvent(
        verb="update" if holder is not None else "create",
        group="",
        resource=resource,
        subresource="",
        namespace="ns",
        name=LEASE if holder is not None else name,
        user="admin",
        user_agent=agent,
        code=code,
        received=at,
        completed=at + timedelta(milliseconds=5),
        request_object=body,
    )


A = "kubetrain-operator/0.1.0 (a_1)"
B = "kubetrain-operator/0.1.0 (b_2)"


def unfenced(events: list[AuditEvent]) -> list[str]:
    history = audit_checks.lease_history(events, LEASE)
    writes = audit_checks.operator_writes(events, LEASE)
    return [found.write.identity for found in audit_checks.unfenced_writes(writes, history)]


def test_a_write_while_its_replica_holds_the_lease_is_fenced() -> None:
    events = [
        event(0, A, "leases", holder="a_1"),
        event(1, A),
        event(2, A, "leases", holder="a_1"),
        event(16, A),
    ]
    assert unfenced(events) == []


def test_a_write_after_another_replica_took_the_lease_is_found() -> None:
    events = [event(0, A, "leases", holder="a_1"), event(20, B, "leases", holder="b_2"), event(21, A)]
    assert unfenced(events) == ["a_1"]


def test_a_write_after_the_replicas_own_lease_expired_is_found() -> None:
    events = [event(0, A, "leases", holder="a_1"), event(15.5, A)]
    assert unfenced(events) == ["a_1"]


def test_a_write_after_the_lease_was_released_is_found() -> None:
    events = [event(0, A, "leases", holder="a_1"), event(5, A, "leases", holder=""), event(6, A)]
    assert unfenced(events) == ["a_1"]


def test_the_status_endpoints_writes_are_every_replicas_and_not_checked() -> None:
    events = [event(0, A, "leases", holder="a_1"), event(1, f"{B} status-endpoint", "pytorchjobs")]
    assert unfenced(events) == []


def test_other_clients_are_not_the_operator() -> None:
    events = [event(0, A, "leases", holder="a_1"), event(1, "kube-scheduler/v1.34.4")]
    assert unfenced(events) == []


def test_the_operator_is_back_at_work_at_the_first_write_of_a_replica_other_than_those_it_lost() -> None:
    """A killed replica's last write may land just after the kill: it is not the replacement at work."""
    writes = audit_checks.operator_writes([event(1, A), event(10.2, A), event(14, B)], LEASE)
    killed_at = START + timedelta(seconds=10)
    assert audit_checks.first_write_after(writes, killed_at) == START + timedelta(seconds=10.2)
    assert audit_checks.first_write_after(writes, killed_at, other_than={"a_1"}) == START + timedelta(
        seconds=14
    )


def _paused_a_writes(*received: float) -> list[audit_checks.UnfencedWrite]:
    """a_1 leads, is paused, b_2 takes the Lease at 20 s, a_1 resumes at 25 s and writes at ``received``."""
    events = [event(0, A, "leases", holder="a_1"), event(20, B, "leases", holder="b_2")]
    events += [event(seconds, A, name=f"p{index}") for index, seconds in enumerate(received)]
    history = audit_checks.lease_history(events, LEASE)
    return audit_checks.unfenced_writes(audit_checks.operator_writes(events, LEASE), history)


RESUMED = START + timedelta(seconds=25)


def test_one_write_a_paused_replica_sends_at_its_resume_is_excused_as_in_its_fence_to_socket_step() -> None:
    [write] = _paused_a_writes(25.05)

    left, excused = audit_checks.sent_at_resume([write], "a_1", RESUMED)

    assert (left, excused) == ([], write)


def test_a_second_write_a_paused_replica_sends_at_its_resume_is_unfenced() -> None:
    first, second = _paused_a_writes(25.05, 25.06)

    left, _ = audit_checks.sent_at_resume([first, second], "a_1", RESUMED)

    assert left == [second]


def test_a_write_received_while_the_replica_was_stopped_is_not_excused() -> None:
    [write] = _paused_a_writes(21)

    assert audit_checks.sent_at_resume([write], "a_1", RESUMED) == ([write], None)
