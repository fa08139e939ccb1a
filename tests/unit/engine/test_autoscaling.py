"""Elastic PyTorch's HPA (§4.10): it exists exactly while ``elasticPolicy.metrics`` asks for one."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from builders import job
from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.reconciler import reconcile
from kubetrain.engine.types import DeleteAutoscaler, Observation, SyncAutoscaler, Traits
from kubetrain.frameworks.base import Autoscaling

NOW = datetime(2026, 1, 1, tzinfo=UTC)
KUBE = Traits(colocated=False)
CPU = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
}


def elastic(metrics: list[dict[str, Any]] | None, **run_policy: Any) -> TrainingJob:
    policy: dict[str, Any] = {"minReplicas": 1, "maxReplicas": 4}
    if metrics is not None:
        policy["metrics"] = metrics
    spec: dict[str, Any] = {"elasticPolicy": policy}
    if run_policy:
        spec["runPolicy"] = run_policy
    return job("PyTorchJob", {"Worker": 2}, spec=spec)


def actions(job_: TrainingJob, autoscaler: bool | None) -> list[Any]:
    observation = Observation(services=frozenset(), autoscaler=autoscaler)
    decision = reconcile(job_, observation, NOW, KUBE)
    return [a for a in decision.actions if isinstance(a, SyncAutoscaler | DeleteAutoscaler)]


def test_elastic_metrics_ask_for_an_hpa_with_the_policy_bounds_and_metrics() -> None:
    assert actions(elastic([CPU]), autoscaler=False) == [SyncAutoscaler(Autoscaling(1, 4, (CPU,)))]


def test_no_metrics_means_no_hpa() -> None:
    assert actions(elastic(None), autoscaler=False) == []


def test_a_substrate_without_autoscalers_is_never_asked_for_one() -> None:
    assert actions(elastic([CPU]), autoscaler=None) == []


def test_a_suspended_job_has_its_hpa_removed() -> None:
    assert actions(elastic([CPU], suspend=True), autoscaler=True) == [DeleteAutoscaler()]


def test_a_suspended_job_without_an_hpa_deletes_nothing() -> None:
    assert actions(elastic([CPU], suspend=True), autoscaler=False) == []
