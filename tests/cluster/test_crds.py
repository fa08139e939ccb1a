"""The generated CRDs install on a real API server, which then admits valid jobs and refuses invalid ones
with a message naming the field (schema and CEL rules, no webhook)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubetrain.envtest.crds import install_crds, read_crds
from kubetrain.envtest.kubeapi import ApiError, KubeApi, KubeObject

pytestmark = pytest.mark.cluster

CRD_DIR = Path(__file__).resolve().parents[2] / "manifests" / "crds"


@pytest.fixture(scope="module")
def installed_crds(kube_api: KubeApi) -> list[str]:
    assert read_crds(CRD_DIR.glob("*.yaml")), f"no CRDs in {CRD_DIR}: run `make manifests`"
    return install_crds(kube_api, CRD_DIR)


def _pytorchjob(name: str, **spec: Any) -> KubeObject:
    template = {"spec": {"containers": [{"name": "pytorch", "image": "example.com/trainer:1"}]}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template},
                "Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": template},
            },
            **spec,
        },
    }


def _create(kube_api: KubeApi, namespace: str, job: KubeObject) -> KubeObject:
    return kube_api.create(f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs", job)


def test_every_generated_crd_is_established_and_served(installed_crds: list[str]) -> None:
    assert "pytorchjobs.kubeflow.org" in installed_crds
    assert len(installed_crds) == len(read_crds(CRD_DIR.glob("*.yaml")))


def test_a_valid_pytorchjob_is_accepted(installed_crds: list[str], kube_api: KubeApi, namespace: str) -> None:
    created = _create(kube_api, namespace, _pytorchjob("mnist"))

    assert created["metadata"]["uid"]
    assert created["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2


def test_an_unknown_clean_pod_policy_is_refused_naming_the_field_and_the_allowed_values(
    installed_crds: list[str], kube_api: KubeApi, namespace: str
) -> None:
    job = _pytorchjob("bad-policy", runPolicy={"cleanPodPolicy": "Sometimes"})

    with pytest.raises(ApiError) as refused:
        _create(kube_api, namespace, job)

    assert refused.value.code == 422
    assert "spec.runPolicy.cleanPodPolicy" in refused.value.message
    assert '"All", "Running", "None"' in refused.value.message


def test_a_negative_backoff_limit_is_refused_naming_the_field(
    installed_crds: list[str], kube_api: KubeApi, namespace: str
) -> None:
    with pytest.raises(ApiError) as refused:
        _create(kube_api, namespace, _pytorchjob("bad-backoff", runPolicy={"backoffLimit": -1}))

    assert refused.value.code == 422
    assert "spec.runPolicy.backoffLimit" in refused.value.message


def test_a_cel_rule_refuses_two_masters_with_its_own_message(
    installed_crds: list[str], kube_api: KubeApi, namespace: str
) -> None:
    job = _pytorchjob("two-masters")
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2

    with pytest.raises(ApiError) as refused:
        _create(kube_api, namespace, job)

    assert refused.value.code == 422
    assert "Master.replicas must be 1" in refused.value.message
