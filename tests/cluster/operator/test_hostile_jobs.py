"""Bad input never takes the operator down: refused at apply with the field named, or failed at once.

Two ways past the CRD schema are covered: a count under the schema's ceiling but over the operator's
``--max-replicas-per-type``, and a CRD without the schema's rules (as for objects stored before them),
installed for the test and restored afterwards.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psutil
import pytest
from operator_support import (
    OperatorProcess,
    StartOperator,
    condition_true,
    container,
    create_job,
    eventually,
    get_job,
    pods,
    pytorch_job,
    wait_condition,
    wait_pods,
)

from kubetrain.api.jobs import TrainingJob
from kubetrain.envtest.kubeapi import ApiError, KubeApi, KubeObject
from kubetrain.envtest.pytest_plugin import EnvtestCluster
from kubetrain.sdk import TrainingClient

pytestmark = pytest.mark.cluster

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/pytorchjobs.kubeflow.org"
WORKER = "spec.pytorchReplicaSpecs.Worker"
RSS_GROWTH_BOUND = 64 * 2**20
"""A hundred million replicas cost 170 MB/s before admission bounded them; now nothing per replica."""


def _with_worker_template(job: KubeObject, **container_fields: Any) -> KubeObject:
    hostile = copy.deepcopy(job)
    hostile["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"] = [
        {**container("pytorch"), **container_fields}
    ]
    return hostile


def _refusal(api: KubeApi, namespace: str, job: KubeObject) -> ApiError:
    with pytest.raises(ApiError) as raised:
        create_job(api, namespace, job)
    assert raised.value.code == 422
    return raised.value


def _invalid_spec(api: KubeApi, namespace: str, name: str) -> str:
    failed = condition_true(wait_condition(api, "PyTorchJob", namespace, name, "Failed"), "Failed")
    assert failed is not None and failed["reason"] == "InvalidSpec"
    return str(failed["message"])


def _rss(operator: OperatorProcess) -> int:
    return int(psutil.Process(operator.process.pid).memory_info().rss)


def _outcomes(operator: OperatorProcess, namespace: str, name: str) -> list[str]:
    found = []
    for line in operator.log.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("job") == f"{namespace}/{name}":
            found.append(str(record.get("outcome")))
    return found


@contextmanager
def _crd_without_rules(api: KubeApi) -> Iterator[None]:
    """The PyTorchJob CRD as it was before the schema typed templates and bounded counts."""
    original = api.get(CRD_PATH)
    loose = copy.deepcopy(original)
    schema = loose["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    replica_spec = schema["properties"]["spec"]["properties"]["pytorchReplicaSpecs"]["additionalProperties"]
    replica_spec["properties"]["replicas"].pop("maximum")
    # Any value at all: what a CRD without a template schema lets through, a string included.
    replica_spec["properties"]["template"] = {"x-kubernetes-preserve-unknown-fields": True}
    api.replace(CRD_PATH, loose)
    try:
        yield
    finally:
        current = api.get(CRD_PATH)
        restored = {
            **original,
            "metadata": {**original["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]},
        }
        api.replace(CRD_PATH, restored)


def _create_once_the_schema_allows(api: KubeApi, namespace: str, job: KubeObject) -> None:
    """The API server applies a CRD's new schema a moment after the update."""

    def attempt() -> bool:
        try:
            create_job(api, namespace, job)
        except ApiError as error:
            if error.code != 422:
                raise
            return False
        return True

    eventually(attempt, what=f"{job['metadata']['name']} accepted under the loosened CRD")


def test_a_hundred_million_workers_are_refused_at_apply_naming_the_field(
    kube_api: KubeApi, namespace: str, job_crds: list[str]
) -> None:
    error = _refusal(kube_api, namespace, pytorch_job("huge", workers=100_000_000))
    assert f"{WORKER}.replicas" in error.message
    assert "150000" in error.message


def test_a_job_over_the_operators_replica_limit_fails_while_its_memory_stays_flat_and_others_run(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    operator = start_operator("--max-replicas-per-type", "1000")
    create_job(kube_api, namespace, pytorch_job("warmup", workers=1))
    wait_pods(kube_api, namespace, ["warmup-master-0", "warmup-worker-0"])
    baseline = _rss(operator)

    create_job(kube_api, namespace, pytorch_job("huge", workers=100_000))
    message = _invalid_spec(kube_api, namespace, "huge")
    assert f"{WORKER}.replicas" in message and "at most 1000" in message
    assert _rss(operator) - baseline < RSS_GROWTH_BOUND

    create_job(kube_api, namespace, pytorch_job("after", workers=1))
    eventually(
        lambda: (
            {"after-master-0", "after-worker-0"} <= {p["metadata"]["name"] for p in pods(kube_api, namespace)}
        ),
        what="the next job's pods created",
    )
    assert not [p for p in pods(kube_api, namespace) if p["metadata"]["name"].startswith("huge-")]


def test_a_hundred_million_workers_stored_under_a_crd_without_the_ceiling_fail_as_invalid_spec(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    operator = start_operator()
    create_job(kube_api, namespace, pytorch_job("warmup", workers=1))
    wait_pods(kube_api, namespace, ["warmup-master-0", "warmup-worker-0"])
    baseline = _rss(operator)
    with _crd_without_rules(kube_api):
        _create_once_the_schema_allows(kube_api, namespace, pytorch_job("huge", workers=100_000_000))
        message = _invalid_spec(kube_api, namespace, "huge")
    assert f"{WORKER}.replicas" in message
    assert _rss(operator) - baseline < RSS_GROWTH_BOUND
    create_job(kube_api, namespace, pytorch_job("after", workers=1))
    eventually(
        lambda: "after-worker-0" in {p["metadata"]["name"] for p in pods(kube_api, namespace)},
        what="the next job's pods created",
    )


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [("env", [-1], "containers[0].env[0]"), ("ports", "oops", "containers[0].ports")],
)
def test_a_malformed_template_is_refused_at_apply_naming_the_field(
    kube_api: KubeApi, namespace: str, job_crds: list[str], field: str, value: Any, path: str
) -> None:
    error = _refusal(kube_api, namespace, _with_worker_template(pytorch_job("bad"), **{field: value}))
    assert f"{WORKER}.template.spec.{path}" in error.message


def test_a_template_the_schema_leaves_to_admission_fails_as_invalid_spec_in_one_reconcile(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    operator = start_operator()
    # Well-typed, so the API server stores it; but PyTorchJob needs a container named "pytorch".
    bad = pytorch_job("bad")
    bad["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"] = [container("trainer")]
    create_job(kube_api, namespace, bad)
    message = _invalid_spec(kube_api, namespace, "bad")
    assert f"{WORKER}.template.spec.containers" in message
    assert "error" not in _outcomes(operator, namespace, "bad")
    assert not pods(kube_api, namespace)


def test_a_malformed_template_stored_under_a_crd_without_its_schema_fails_as_invalid_spec_without_retries(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    operator = start_operator()
    with _crd_without_rules(kube_api):
        _create_once_the_schema_allows(
            kube_api, namespace, _with_worker_template(pytorch_job("bad"), env=[-1])
        )
        message = _invalid_spec(kube_api, namespace, "bad")
    assert f"{WORKER}.template.spec.containers[0].env[0]" in message
    outcomes = _outcomes(operator, namespace, "bad")
    assert "error" not in outcomes
    assert get_job(kube_api, "PyTorchJob", namespace, "bad")["status"]["conditions"][-1]["type"] == "Failed"
    assert not pods(kube_api, namespace)


def test_a_job_stored_with_an_unreadable_spec_is_still_listed_with_its_failure(
    kube_api: KubeApi, namespace: str, envtest: EnvtestCluster, start_operator: StartOperator
) -> None:
    start_operator()
    unreadable = pytorch_job("bad")
    unreadable["spec"]["pytorchReplicaSpecs"]["Worker"]["template"] = "not a template"
    with _crd_without_rules(kube_api):
        _create_once_the_schema_allows(kube_api, namespace, unreadable)
        _invalid_spec(kube_api, namespace, "bad")
    client = TrainingClient(config_file=str(envtest.kubeconfig), namespace=namespace)
    [listed] = client.list_jobs()
    assert isinstance(listed, TrainingJob)
    assert listed.name == "bad"
    assert listed.status.conditions[-1].reason == "InvalidSpec"
