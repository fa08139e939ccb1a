"""The kinds no Trainer runtime runs as they ran are refused, each reason naming its field."""

from __future__ import annotations

import pytest
from migrating import migrated

from kubetrain.frameworks.migration import NotMigratableError


def reasons(kind: str, replicas: dict[str, int | None]) -> dict[str, str]:
    with pytest.raises(NotMigratableError) as refused:
        migrated(kind, replicas)
    return {r.path: r.message for r in refused.value.reasons}


def test_a_tfjob_is_refused_as_nothing_writes_tf_config() -> None:
    found = reasons("TFJob", {"Worker": 2})
    assert "nothing writes TF_CONFIG" in found["spec.tfReplicaSpecs"]


def test_a_tfjobs_parameter_servers_are_named_as_what_has_no_counterpart() -> None:
    found = reasons("TFJob", {"PS": 1, "Worker": 2})
    assert "the PS role" in found["spec.tfReplicaSpecs.PS"]


def test_a_paddlejob_is_refused_as_worker_0s_master_address_is_its_own() -> None:
    assert "worker 0's PADDLE_MASTER" in reasons("PaddleJob", {"Worker": 2})["spec.paddleReplicaSpecs"]


def test_an_mxjob_is_refused_as_mxnet_is_retired() -> None:
    assert "MXNet is retired" in reasons("MXJob", {"Scheduler": 1, "Server": 1, "Worker": 1})["kind"]
