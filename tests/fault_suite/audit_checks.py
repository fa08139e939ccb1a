"""What the API server's audit log proves about a scenario: who wrote what, how often each child was created,
and whether every write of the operator's own came from the replica holding the Lease at that moment.

Replicas are told apart by their User-Agent, ``kubetrain-operator/<version> (<identity>)``; the status
endpoint's requests add `` status-endpoint`` and are every replica's by design (docs/progress.md), so they
are left out of the fencing check, as are the Lease's own requests. The Lease's history is read from the
bodies of its successful writes: who each names as holder, and for how long.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from kubetrain.envtest.audit import AuditEvent

_OPERATOR_AGENT = re.compile(r"^kubetrain-operator/\S+ \((?P<identity>[^)]+)\)(?P<suffix> \S+)?$")


@dataclass(frozen=True)
class OperatorWrite:
    identity: str
    event: AuditEvent

    def describe(self) -> str:
        e = self.event
        target = f"{e.resource}/{e.subresource}" if e.subresource else e.resource
        return f"{e.verb} {target} {e.name or '(collection)'} -> {e.code} at {e.received.isoformat()}"


@dataclass(frozen=True)
class LeaseWrite:
    """A successful write of the Lease: who it names as holder (empty: released), for how long, when."""

    holder: str
    duration: timedelta
    at: datetime
    """When the write was committed (its answer complete)."""
    by: str
    """The identity of the replica that wrote it."""


@dataclass(frozen=True)
class UnfencedWrite:
    write: OperatorWrite
    reason: str

    def __str__(self) -> str:
        return f"{self.write.identity}: {self.write.describe()}: {self.reason}"


def identity_of(event: AuditEvent) -> tuple[str, bool] | None:
    """The operator replica that sent it and whether it was its status endpoint; None for any other client."""
    match = _OPERATOR_AGENT.match(event.user_agent)
    if match is None:
        return None
    return match.group("identity"), match.group("suffix") is not None


def in_namespace(events: Iterable[AuditEvent], namespace: str) -> list[AuditEvent]:
    return [event for event in events if event.namespace == namespace]


def lease_history(events: Iterable[AuditEvent], lease_name: str) -> list[LeaseWrite]:
    history = []
    for event in events:
        if event.resource != "leases" or event.name != lease_name or not event.succeeded:
            continue
        spec = (event.request_object or {}).get("spec") or {}
        sender = identity_of(event)
        history.append(
            LeaseWrite(
                holder=str(spec.get("holderIdentity") or ""),
                duration=timedelta(seconds=int(spec.get("leaseDurationSeconds") or 0)),
                at=event.completed,
                by=sender[0] if sender else event.user_agent,
            )
        )
    return sorted(history, key=lambda write: write.at)


def operator_writes(events: Iterable[AuditEvent], lease_name: str) -> list[OperatorWrite]:
    """The writes of the operator's own work: not its status endpoint's, not the Lease's."""
    writes = []
    for event in events:
        sender = identity_of(event)
        if sender is None or sender[1]:
            continue
        if event.resource == "leases" and event.name == lease_name:
            continue
        writes.append(OperatorWrite(sender[0], event))
    return writes


def unfenced_writes(writes: Iterable[OperatorWrite], history: list[LeaseWrite]) -> list[UnfencedWrite]:
    """Writes received when their sender did not hold an unexpired Lease, as the server recorded it: the last
    Lease write committed before the write arrived must name the sender as holder and be younger than its
    duration. Refused writes count too: the sender should not have tried."""
    found = []
    for write in writes:
        arrived = write.event.received
        before = [lease for lease in history if lease.at <= arrived]
        if not before:
            found.append(UnfencedWrite(write, "before anyone held the Lease"))
            continue
        last = before[-1]
        if last.holder != write.identity:
            held = f"held by {last.holder}" if last.holder else "released"
            found.append(UnfencedWrite(write, f"the Lease was {held} since {last.at.isoformat()}"))
        elif arrived > last.at + last.duration:
            found.append(
                UnfencedWrite(write, f"its Lease expired at {(last.at + last.duration).isoformat()}")
            )
    return found


def sent_at_resume(
    unfenced: list[UnfencedWrite], identity: str, resumed: datetime
) -> tuple[list[UnfencedWrite], UnfencedWrite | None]:
    """``unfenced`` less the first write of ``identity`` (a replica paused past its Lease) received once it
    was resumed, and that write. One write can be between its fence's check and the socket when a process
    is stopped: the operator asks the fence and hands the bytes to the kernel in one step of its one event
    loop, with nothing awaited between, but a SIGSTOP (or a preemption it lands in) can fall between any
    two instructions, and no fence asked by a client closes that. A second such write (a fence asked before
    an await), or one received while the replica was stopped, is not excused."""
    excused = next(
        (
            found
            for found in unfenced
            if found.write.identity == identity and found.write.event.received >= resumed
        ),
        None,
    )
    return [found for found in unfenced if found is not excused], excused


def tenures(history: list[LeaseWrite]) -> list[tuple[str, datetime]]:
    """Each change of holder: (new holder, when); releases show as an empty holder."""
    changes: list[tuple[str, datetime]] = []
    for write in history:
        if not changes or changes[-1][0] != write.holder:
            changes.append((write.holder, write.at))
    return changes


def successful_creations(events: Iterable[AuditEvent], resource: str) -> collections.Counter[str]:
    """How often each object of ``resource`` was created (answer 201), by name; a subresource's create (a
    pod's binding, by the scheduler) is not the object's."""
    return collections.Counter(
        event.name
        for event in events
        if event.resource == resource and not event.subresource and event.verb == "create" and event.succeeded
    )


def successful_deletions(events: Iterable[AuditEvent], resource: str) -> list[str]:
    return [
        event.name
        for event in events
        if event.resource == resource
        and not event.subresource
        and event.verb in ("delete", "deletecollection")
        and event.succeeded
    ]


def first_write_after(
    writes: Iterable[OperatorWrite], moment: datetime, *, other_than: Collection[str] = ()
) -> datetime | None:
    """When the operator's work next reached the server after ``moment`` (by a replica not in
    ``other_than``, when given): a successful write's arrival."""
    times = [
        write.event.received
        for write in writes
        if write.event.received > moment and write.event.succeeded and write.identity not in other_than
    ]
    return min(times, default=None)
