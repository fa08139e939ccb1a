"""A stored job the model cannot read fails at once with reason InvalidSpec; it is never retried."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from builders import manifest
from kubetrain.api.common import ConditionType
from kubetrain.api.errors import InvalidJobError
from kubetrain.api.manifest import job_shell, parse_job
from kubetrain.engine.reconciler import INVALID_SPEC_REASON, reject
from kubetrain.engine.types import Traits

NOW = datetime(2026, 1, 1, tzinfo=UTC)
KUBE = Traits(colocated=False)


def _unreadable(**run_policy: Any) -> dict[str, Any]:
    stored = manifest("PyTorchJob", {"Worker": 1}, spec={"runPolicy": run_policy} if run_policy else None)
    stored["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "many"
    return stored


def _error(stored: dict[str, Any]) -> InvalidJobError:
    with pytest.raises(InvalidJobError) as raised:
        parse_job(stored)
    return raised.value


def test_an_unreadable_job_is_created_then_failed_naming_the_field() -> None:
    stored = _unreadable()
    decision = reject(job_shell(stored), _error(stored), NOW, KUBE)
    assert [c.type for c in decision.status.conditions] == [ConditionType.CREATED, ConditionType.FAILED]
    failed = decision.status.conditions[-1]
    assert failed.reason == INVALID_SPEC_REASON
    assert "spec.pytorchReplicaSpecs.Worker.replicas" in (failed.message or "")
    assert decision.status.completion_time == NOW


def test_an_unreadable_job_already_failed_is_left_as_it_is() -> None:
    stored = _unreadable()
    first = reject(job_shell(stored), _error(stored), NOW, KUBE)
    again = {**stored, "status": first.status.to_wire()}
    assert reject(job_shell(again), _error(again), NOW, KUBE).status == first.status


def test_an_unreadable_job_managed_by_another_controller_is_left_alone() -> None:
    stored = _unreadable(managedBy="kueue.x-k8s.io/multikueue")
    decision = reject(job_shell(stored), _error(stored), NOW, KUBE)
    assert decision.status.conditions == []
    assert not decision.actions


def test_the_shell_of_an_unreadable_job_keeps_its_identity_and_drops_an_unreadable_status() -> None:
    stored = {**_unreadable(), "status": {"conditions": "broken"}}
    shell = job_shell(stored)
    assert (shell.KIND, shell.name, shell.namespace) == ("PyTorchJob", "test-job", "default")
    assert shell.status.conditions == []
