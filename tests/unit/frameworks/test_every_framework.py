"""Properties every framework keeps, checked on a typical valid job of each kind."""

from __future__ import annotations

from typing import Any

import pytest

from builders import job
from kubetrain.api.jobs import V1, V2BETA1, TrainingJob
from kubetrain.frameworks.addressing import Addressing, ClusterAddressing, LocalAddressing
from kubetrain.frameworks.base import Framework
from kubetrain.frameworks.registry import framework_for

TYPICAL: dict[str, tuple[str, str, dict[str, int | None]]] = {
    "pytorch": (V1, "PyTorchJob", {"Master": 1, "Worker": 2}),
    "tensorflow": (V1, "TFJob", {"Chief": 1, "PS": 1, "Worker": 2, "Evaluator": 1}),
    "xgboost": (V1, "XGBoostJob", {"Master": 1, "Worker": 2}),
    "paddle": (V1, "PaddleJob", {"Master": 1, "Worker": 2}),
    "jax": (V1, "JAXJob", {"Worker": 2}),
    "mxnet": (V1, "MXJob", {"Scheduler": 1, "Server": 1, "Worker": 2}),
    "mpi-v1": (V1, "MPIJob", {"Launcher": 1, "Worker": 2}),
    "mpi-v2beta1": (V2BETA1, "MPIJob", {"Launcher": 1, "Worker": 2}),
}


@pytest.fixture(params=sorted(TYPICAL))
def typical(request: pytest.FixtureRequest) -> tuple[Framework[Any], TrainingJob]:
    api_version, kind, replicas = TYPICAL[request.param]
    parsed = job(kind, replicas, api_version=api_version, name="typical")
    return framework_for(parsed), parsed


def every_replica(framework: Framework[Any], job_: TrainingJob, colocated: bool) -> list[tuple[str, int]]:
    return [
        (t, i)
        for t in framework.materialised_replica_types(job_, colocated)
        for i in range(job_.replica_specs[t].replicas or 0)
    ]


def addressing_for(framework: Framework[Any], job_: TrainingJob, colocated: bool) -> Addressing:
    if not colocated:
        return ClusterAddressing()
    ports = {replica: 40000 + n for n, replica in enumerate(every_replica(framework, job_, colocated))}
    return LocalAddressing(ports=ports)


def test_defaulting_does_not_modify_its_input(typical: tuple[Framework[Any], TrainingJob]) -> None:
    framework, parsed = typical
    before = parsed.to_wire()
    framework.set_defaults(parsed)
    assert parsed.to_wire() == before


def test_defaulting_twice_changes_nothing_more(typical: tuple[Framework[Any], TrainingJob]) -> None:
    framework, parsed = typical
    once = framework.set_defaults(parsed)
    assert framework.set_defaults(once).to_wire() == once.to_wire()


def test_a_typical_job_is_valid_once_defaulted(typical: tuple[Framework[Any], TrainingJob]) -> None:
    framework, parsed = typical
    assert framework.validate(framework.set_defaults(parsed)) == []


@pytest.mark.parametrize("colocated", [False, True], ids=["cluster", "local"])
def test_every_replica_gets_env_with_unique_names_and_string_values(
    typical: tuple[Framework[Any], TrainingJob], colocated: bool
) -> None:
    framework, parsed = typical
    defaulted = framework.set_defaults(parsed)
    addressing = addressing_for(framework, defaulted, colocated)
    for replica_type, index in every_replica(framework, defaulted, colocated):
        found = framework.replica_env(defaulted, replica_type, index, addressing)
        names = [e["name"] for e in found]
        assert len(names) == len(set(names)), (replica_type, index, names)
        assert all(isinstance(e.get("value", ""), str) for e in found)


def test_some_replica_has_the_master_role(
    typical: tuple[Framework[Any], TrainingJob],
) -> None:
    framework, parsed = typical
    defaulted = framework.set_defaults(parsed)
    masters = [
        r for r in every_replica(framework, defaulted, False) if framework.is_master_role(defaulted, *r)
    ]
    assert masters, "some replica drives the job-role=master label"


def test_materialised_types_are_types_the_job_declares(typical: tuple[Framework[Any], TrainingJob]) -> None:
    framework, parsed = typical
    defaulted = framework.set_defaults(parsed)
    for colocated in (False, True):
        assert set(framework.materialised_replica_types(defaulted, colocated)) <= set(defaulted.replica_specs)
