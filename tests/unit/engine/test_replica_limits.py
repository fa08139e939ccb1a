"""Replica limits: a job may not ask for more replicas than its operator allows, checked first."""

from __future__ import annotations

import tracemalloc
from datetime import UTC, datetime

import pytest

from builders import job
from kubetrain.api.common import ConditionType
from kubetrain.api.errors import InvalidJobError
from kubetrain.engine.admission import admit
from kubetrain.engine.reconciler import INVALID_SPEC_REASON, reconcile
from kubetrain.engine.types import CLUSTER_CEILING, Observation, ReplicaLimits, Traits

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_replica_type_over_the_per_type_limit_is_refused_naming_its_count() -> None:
    with pytest.raises(InvalidJobError) as raised:
        admit(job("PyTorchJob", {"Master": 1, "Worker": 6}), limits=ReplicaLimits(per_type=5, per_job=100))
    [error] = raised.value.errors
    assert error.path == "spec.pytorchReplicaSpecs.Worker.replicas"
    assert "must be at most 5" in error.message


def test_a_job_over_the_per_job_limit_is_refused_at_its_replica_map() -> None:
    with pytest.raises(InvalidJobError) as raised:
        admit(job("PyTorchJob", {"Master": 1, "Worker": 5}), limits=ReplicaLimits(per_type=5, per_job=5))
    [error] = raised.value.errors
    assert error.path == "spec.pytorchReplicaSpecs"
    assert "more than 5" in error.message


def test_a_job_at_the_limits_is_admitted() -> None:
    admit(job("PyTorchJob", {"Master": 1, "Worker": 4}), limits=ReplicaLimits(per_type=4, per_job=5))


def test_the_default_limits_refuse_a_hundred_million_workers() -> None:
    with pytest.raises(InvalidJobError, match="must be at most 5000"):
        admit(job("PyTorchJob", {"Master": 1, "Worker": 100_000_000}))


def test_clients_refuse_only_what_no_cluster_can_run() -> None:
    admit(job("PyTorchJob", {"Master": 1, "Worker": 100_000}), limits=CLUSTER_CEILING)
    with pytest.raises(InvalidJobError):
        admit(job("PyTorchJob", {"Master": 1, "Worker": 150_001}), limits=CLUSTER_CEILING)


def test_a_count_too_large_to_print_is_refused_by_its_size() -> None:
    with pytest.raises(InvalidJobError, match="bits"):
        admit(job("PyTorchJob", {"Master": 1, "Worker": 10**5000}))


def test_reconciling_a_hundred_million_workers_fails_the_job_without_allocating_per_replica() -> None:
    hostile = job("PyTorchJob", {"Master": 1, "Worker": 100_000_000})
    tracemalloc.start()
    decision = reconcile(hostile, Observation(), NOW, Traits(colocated=False))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    failed = decision.status.condition(ConditionType.FAILED)
    assert failed is not None and failed.reason == INVALID_SPEC_REASON
    assert "spec.pytorchReplicaSpecs.Worker.replicas" in (failed.message or "")
    assert peak < 5_000_000  # bytes: a few objects, not one per replica
