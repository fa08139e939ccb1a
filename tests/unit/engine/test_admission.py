"""Admission: defaults applied, every validation error reported at once."""

from __future__ import annotations

import pytest

from kubetrain.api.common import ReplicaSpec, RestartPolicy
from kubetrain.api.errors import InvalidJobError
from kubetrain.api.jobs import PyTorchJob
from kubetrain.engine.admission import admit

from .fakes import FRAMEWORK, toy_job


def test_admit_applies_the_frameworks_defaults() -> None:
    admitted = admit(toy_job().with_replica_specs({"Worker": ReplicaSpec()}), FRAMEWORK)
    assert admitted.replica_specs["Worker"].replicas == 1
    assert admitted.replica_specs["Worker"].restart_policy is RestartPolicy.ON_FAILURE


def test_admit_does_not_modify_its_input() -> None:
    job = toy_job(policy=None)
    before = job.model_copy(deep=True)
    admit(job, FRAMEWORK)
    assert job == before


def test_admit_reports_every_field_error() -> None:
    job = toy_job(masters=-1, workers=-2)
    with pytest.raises(InvalidJobError) as raised:
        admit(job, FRAMEWORK)
    assert [e.path for e in raised.value.errors] == [
        "spec.toyReplicaSpecs.Master.replicas",
        "spec.toyReplicaSpecs.Worker.replicas",
    ]


def test_admit_finds_the_framework_from_the_job_kind() -> None:
    job = PyTorchJob.model_validate(
        {
            "metadata": {"name": "mnist"},
            "spec": {
                "pytorchReplicaSpecs": {
                    "Master": {
                        "replicas": 1,
                        "template": {"spec": {"containers": [{"name": "pytorch", "image": "x"}]}},
                    }
                }
            },
        }
    )
    admitted = admit(job)
    assert admitted.replica_specs["Master"].restart_policy is RestartPolicy.ON_FAILURE


def test_admit_rejects_negative_run_policy_durations_for_every_kind() -> None:
    job = toy_job(masters=1, workers=1)
    job = job.with_run_policy(job.run_policy.model_copy(update={"backoff_limit": -1}))
    with pytest.raises(InvalidJobError, match=r"spec.runPolicy.backoffLimit: Invalid value: -1"):
        admit(job, FRAMEWORK)
