"""MPIJob v2beta1 lifecycle conditions in mpi-operator's words (§4.12)."""

from __future__ import annotations

from datetime import timedelta

from builders import job
from kubetrain.api.common import ConditionStatus, ConditionType
from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.reconciler import reconcile
from kubetrain.engine.types import Observation, Traits

from .fakes import NOW, observe, replica

KUBE = Traits(colocated=False, batch_jobs=True)


def _mpijob(suspend: bool = False) -> TrainingJob:
    spec = {"runPolicy": {"suspend": True}} if suspend else None
    return job(
        "MPIJob", {"Launcher": 1, "Worker": 1}, name="pi", api_version="kubeflow.org/v2beta1", spec=spec
    )


def _message(job_: TrainingJob, type_: ConditionType, status: ConditionStatus) -> str | None:
    found = [c for c in job_.status.conditions if c.type == type_ and c.status == status]
    return found[-1].message if found else None


def test_created_names_the_job_with_its_namespace() -> None:
    status = reconcile(_mpijob(), Observation(), NOW, KUBE).status
    created = status.condition(ConditionType.CREATED)
    assert created is not None and created.message == "MPIJob default/pi is created."


def test_suspending_a_running_job_says_suspended_in_both_conditions_as_upstream() -> None:
    running = observe(replica("Launcher", 0), replica("Worker", 0))
    started = _mpijob().with_status(reconcile(_mpijob(), running, NOW, KUBE).status)
    suspended = _mpijob(suspend=True).with_status(started.status)
    after = suspended.with_status(reconcile(suspended, running, NOW + timedelta(seconds=1), KUBE).status)
    assert _message(after, ConditionType.SUSPENDED, ConditionStatus.TRUE) == "MPIJob suspended"
    assert _message(after, ConditionType.RUNNING, ConditionStatus.FALSE) == "MPIJob default/pi is suspended."


def test_resuming_says_mpijob_resumed() -> None:
    suspended = _mpijob(suspend=True)
    status = reconcile(suspended, Observation(), NOW, KUBE).status
    resumed = _mpijob().with_status(status)
    after = resumed.with_status(reconcile(resumed, Observation(), NOW + timedelta(seconds=1), KUBE).status)
    assert _message(after, ConditionType.SUSPENDED, ConditionStatus.FALSE) == "MPIJob resumed"
