"""The events a reconcile records, as the operator that defines the kind records them (upstream's
training-operator for v1 kinds, the mpi-operator for MPIJob v2beta1): what ``kubectl describe`` and alerts on
event reasons read. The conformance tier (tests/peers) checks the same against the real operators."""

from __future__ import annotations

from datetime import timedelta

from builders import job
from kubetrain.api.common import ConditionType
from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.reconciler import reconcile
from kubetrain.engine.types import Decision, EmitEvent, EventType, Observation, Phase

from .fakes import NOW, observe, replica
from .support import KUBE, actions_of

NO_SERVICES: frozenset[tuple[str, int]] = frozenset()


def _reconcile(job_: TrainingJob, observation: Observation, at: timedelta = timedelta()) -> Decision:
    return reconcile(job_, observation, NOW + at, KUBE)


def _events(decision: Decision) -> list[tuple[EventType, str, str]]:
    return [(e.type, e.reason, e.message) for e in actions_of(decision, EmitEvent)]


def _settled(job_: TrainingJob, observation: Observation) -> TrainingJob:
    return job_.with_status(_reconcile(job_, observation).status)


def _pytorch(**options: object) -> TrainingJob:
    return job("PyTorchJob", {"Master": 1, "Worker": 2}, name="mnist", namespace="ns", **options)


def _mpi(**options: object) -> TrainingJob:
    return job(
        "MPIJob",
        {"Launcher": 1, "Worker": 1},
        name="pi",
        namespace="ns",
        api_version="kubeflow.org/v2beta1",
        **options,
    )


def test_a_v1_job_records_no_event_when_it_is_created_or_starts_running() -> None:
    created = _reconcile(_pytorch(), observe(services=NO_SERVICES))
    running = _reconcile(_settled(_pytorch(), observe()), observe(replica("Master", 0), replica("Worker", 0)))
    reasons = [reason for _, reason, _ in _events(created) + _events(running)]
    assert "PyTorchJobCreated" not in reasons and "PyTorchJobRunning" not in reasons


def test_an_mpi_v2beta1_job_records_its_creation_as_the_mpi_operator_does() -> None:
    decision = _reconcile(_mpi(), observe(services=NO_SERVICES))
    assert (EventType.NORMAL, "MPIJobCreated", "MPIJob ns/pi is created.") in _events(decision)


def test_every_pod_that_ended_is_recorded_with_its_exit_code_on_every_reconcile() -> None:
    ended = observe(
        replica("Master", 0),
        replica("Worker", 0, Phase.SUCCEEDED, exit_code=0),
        replica("Worker", 1, Phase.SUCCEEDED, exit_code=0),
    )
    job_ = _settled(_pytorch(), ended)
    again = _reconcile(job_, ended, timedelta(seconds=5))
    exited = [message for _, reason, message in _events(again) if reason == "ExitedWithCode"]
    assert exited == [
        "Pod: ns.mnist-worker-0 exited with code 0",
        "Pod: ns.mnist-worker-1 exited with code 0",
    ]


def test_a_running_pod_after_an_in_place_restart_is_not_recorded_as_exited() -> None:
    restarted = observe(replica("Master", 0), replica("Worker", 0, restart_count=1), replica("Worker", 1))
    assert "ExitedWithCode" not in [reason for _, reason, _ in _events(_reconcile(_pytorch(), restarted))]


def test_an_mpi_job_records_no_exit_codes_as_neither_mpi_controller_does() -> None:
    done = observe(replica("Launcher", 0, Phase.SUCCEEDED, exit_code=0), replica("Worker", 0))
    assert "ExitedWithCode" not in [reason for _, reason, _ in _events(_reconcile(_mpi(), done))]


def test_a_restart_records_the_pod_reconcilers_event_and_the_status_updates_one() -> None:
    killed = observe(
        replica("Master", 0, Phase.FAILED, exit_code=137), replica("Worker", 0), replica("Worker", 1)
    )
    events = _events(_reconcile(_pytorch(restart_policy="ExitCode"), killed))
    assert (
        EventType.WARNING,
        "PyTorchJobRestarting",
        "job mnist is restarting because Master replica(s) failed.",
    ) in events
    assert (
        EventType.WARNING,
        "PyTorchJobRestarting",
        "PyTorchJob mnist is restarting because 1 Master replica(s) failed.",
    ) in events


def test_a_failure_by_exit_code_still_records_the_status_updates_restarting_event() -> None:
    """Upstream's status update runs after the pod reconciler failed the job, and records its Restarting
    event though the condition, Failed, no longer changes."""
    failed = observe(
        replica("Master", 0), replica("Worker", 0, Phase.FAILED, exit_code=1), replica("Worker", 1)
    )
    decision = _reconcile(_pytorch(restart_policy="ExitCode"), failed)
    assert decision.status.is_true(ConditionType.FAILED)
    assert (
        EventType.WARNING,
        "PyTorchJobFailed",
        'job "mnist" is failing because "Worker" replica(s) failed.',
    ) in _events(decision)
    assert any(reason == "PyTorchJobRestarting" for _, reason, _ in _events(decision))


def test_a_v1_failure_by_its_status_rules_is_a_normal_event_as_upstream_records_it() -> None:
    failed = observe(
        replica("Master", 0), replica("Worker", 0, Phase.FAILED, exit_code=1), replica("Worker", 1)
    )
    events = _events(_reconcile(_pytorch(restart_policy="Never"), failed))
    assert (
        EventType.NORMAL,
        "PyTorchJobFailed",
        "PyTorchJob mnist is failed because 1 Worker replica(s) failed.",
    ) in events


def test_a_suspended_v1_job_records_suspended_on_every_reconcile() -> None:
    suspended = _pytorch(spec={"runPolicy": {"suspend": True}})
    first = _reconcile(suspended, observe(services=NO_SERVICES))
    again = _reconcile(
        suspended.with_status(first.status), observe(services=NO_SERVICES), timedelta(seconds=1)
    )
    for decision in (first, again):
        assert (EventType.NORMAL, "PyTorchJobSuspended", "PyTorchJob mnist is suspended.") in _events(
            decision
        )


def test_a_suspended_mpi_v2beta1_job_records_suspended_once() -> None:
    suspended = _mpi(spec={"runPolicy": {"suspend": True}})
    first = _reconcile(suspended, observe(services=NO_SERVICES))
    again = _reconcile(
        suspended.with_status(first.status), observe(services=NO_SERVICES), timedelta(seconds=1)
    )
    assert (EventType.NORMAL, "MPIJobSuspended", "MPIJob suspended") in _events(first)
    assert "MPIJobSuspended" not in [reason for _, reason, _ in _events(again)]


def test_the_mpi_operators_running_event_is_recorded_on_every_reconcile_without_a_full_stop() -> None:
    running = observe(replica("Launcher", 0), replica("Worker", 0))
    job_ = _settled(_mpi(), running)
    events = _events(_reconcile(job_, running, timedelta(seconds=5)))
    assert (EventType.NORMAL, "MPIJobRunning", "MPIJob ns/pi is running") in events


def test_a_pytorchjob_deleted_by_its_ttl_is_recorded_with_the_pod_reason_upstream_reuses() -> None:
    done = observe(
        replica("Master", 0, Phase.SUCCEEDED, exit_code=0), replica("Worker", 0), replica("Worker", 1)
    )
    finished = _settled(_pytorch(spec={"runPolicy": {"ttlSecondsAfterFinished": 0}}), done)
    events = _events(_reconcile(finished, done, timedelta(seconds=1)))
    assert (EventType.NORMAL, "SuccessfulDeletePod", "Deleted job: mnist") in events


def test_a_tfjob_deleted_by_its_ttl_is_recorded_as_a_deleted_job() -> None:
    tfjob = job(
        "TFJob",
        {"Worker": 1},
        name="dist",
        namespace="ns",
        spec={"runPolicy": {"ttlSecondsAfterFinished": 0}},
    )
    done = observe(replica("Worker", 0, Phase.SUCCEEDED, exit_code=0))
    finished = _settled(tfjob, done)
    assert (EventType.NORMAL, "SuccessfulDeleteJob", "Deleted job: dist") in _events(
        _reconcile(finished, done, timedelta(seconds=1))
    )
