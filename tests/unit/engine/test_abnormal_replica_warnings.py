"""Warning events for abnormal live replicas (§4.3, last paragraph): what the kubelet reports, on the job."""

from __future__ import annotations

from datetime import timedelta

from kubetrain.engine.types import EmitEvent, EventType, ObservedReplica, Phase

from .fakes import NOW, observe, replica, toy_job
from .support import actions_of, decide

CRASH_LOOP = ("CrashLoopBackOff", "container toy waiting message: back-off 10s restarting failed container")
OOM_KILLED = ("OOMKilled", "container toy exitCode: 137 terminated message: ")


def warnings_for(worker: ObservedReplica) -> list[EmitEvent]:
    """The events about ``worker``'s abnormal signs (not the job's own, such as Restarting)."""
    decision = decide(toy_job(masters=1, workers=1), observe(replica("Master", 0), worker))
    return [event for event in actions_of(decision, EmitEvent) if event.message.startswith("Error pod ")]


def test_a_running_replica_with_an_abnormal_sign_warns_with_its_reason_and_the_pod_name() -> None:
    events = warnings_for(replica("Worker", 0, warnings=(CRASH_LOOP,)))
    assert events == [
        EmitEvent(
            EventType.WARNING,
            "CrashLoopBackOff",
            "Error pod toy-worker-0 container toy waiting message: back-off 10s restarting failed container",
        )
    ]


def test_every_abnormal_sign_of_a_replica_is_its_own_warning() -> None:
    events = warnings_for(replica("Worker", 0, warnings=(OOM_KILLED, CRASH_LOOP)))
    assert [event.reason for event in events] == ["OOMKilled", "CrashLoopBackOff"]


def test_a_pending_replica_warns_as_upstream_counts_it_active() -> None:
    unschedulable = ("Unschedulable", "condition message: 0/3 nodes are available")
    events = warnings_for(replica("Worker", 0, Phase.PENDING, warnings=(unschedulable,)))
    assert [event.message for event in events] == [
        "Error pod toy-worker-0 condition message: 0/3 nodes are available"
    ]


def test_a_terminating_replica_does_not_warn() -> None:
    going = replica(
        "Worker", 0, terminating=True, deletion_timestamp=NOW + timedelta(seconds=30), warnings=(CRASH_LOOP,)
    )
    assert warnings_for(going) == []


def test_a_succeeded_replica_does_not_warn() -> None:
    assert warnings_for(replica("Worker", 0, Phase.SUCCEEDED, exit_code=0, warnings=(CRASH_LOOP,))) == []


def test_a_failed_replica_does_not_warn_about_its_containers() -> None:
    assert warnings_for(replica("Worker", 0, Phase.FAILED, exit_code=137, warnings=(OOM_KILLED,))) == []


def test_a_replica_without_abnormal_signs_does_not_warn() -> None:
    assert warnings_for(replica("Worker", 0)) == []
