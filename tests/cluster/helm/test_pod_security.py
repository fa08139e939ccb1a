"""The operator's, the dashboard's and JobSet's controller's pods meet Pod Security's ``restricted`` profile,
from the chart and from the kustomize base and component: each pod template, created (dry run) in a namespace
that enforces it, is admitted by the API server's PodSecurity admission, and its root file system is
read-only. (On the real node they run there: tests/e2e/test_operator.py and test_helm.py.)"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helm_chart import Helm, build_helm, find, is_jobsets, kustomize_standalone, kustomize_standalone_all
from test_chart_dashboard import component

from kubetrain.envtest.kubeapi import ApiError, KubeApi

pytestmark = pytest.mark.cluster

ENFORCE = "pod-security.kubernetes.io/enforce"


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(build_helm(), tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="module")
def restricted(kube_api: KubeApi) -> Iterator[str]:
    """A namespace enforcing the ``restricted`` profile at the cluster's version."""
    name = f"restricted-{secrets.token_hex(3)}"
    labels = {ENFORCE: "restricted", f"{ENFORCE}-version": "latest"}
    kube_api.create("/api/v1/namespaces", {"metadata": {"name": name, "labels": labels}})
    yield name
    kube_api.delete(f"/api/v1/namespaces/{name}")


def admission_of(kube_api: KubeApi, namespace: str, deployment: dict[str, Any]) -> str:
    """The API server's answer to the Deployment's pod created (dry run) in ``namespace``: "admitted", or
    the refusal's message."""
    template = deployment["spec"]["template"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{deployment['metadata']['name']}-check",
            "labels": template["metadata"]["labels"],
        },
        "spec": template["spec"],
    }
    try:
        kube_api.create(f"/api/v1/namespaces/{namespace}/pods?dryRun=All", pod)
    except ApiError as error:
        return f"{error.code}: {error}"
    return "admitted"


def read_only_roots(deployment: dict[str, Any]) -> list[bool]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    return [bool((c.get("securityContext") or {}).get("readOnlyRootFilesystem")) for c in containers]


def test_a_pod_without_the_profiles_settings_is_refused_there(kube_api: KubeApi, restricted: str) -> None:
    # The control: the namespace really enforces, and says what is missing.
    bare = {
        "metadata": {"name": "bare"},
        "spec": {
            "template": {"metadata": {"labels": {}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
        },
    }
    answer = admission_of(kube_api, restricted, bare)
    assert answer.startswith("403") and "allowPrivilegeEscalation != false" in answer
    assert "seccompProfile" in answer and "runAsNonRoot != true" in answer


def test_the_charts_operator_pod_is_admitted_under_restricted(
    kube_api: KubeApi, restricted: str, helm: Helm
) -> None:
    deployment = find(helm.template(), "Deployment")
    assert admission_of(kube_api, restricted, deployment) == "admitted"
    assert read_only_roots(deployment) == [True]


def test_the_charts_dashboard_pod_is_admitted_under_restricted(
    kube_api: KubeApi, restricted: str, helm: Helm
) -> None:
    rendered = helm.template("--set=dashboard.enabled=true")
    deployment = find(rendered, "Deployment", "kubetrain-dashboard")
    assert admission_of(kube_api, restricted, deployment) == "admitted"
    assert read_only_roots(deployment) == [True]


def test_the_kustomize_operator_pod_is_admitted_under_restricted(kube_api: KubeApi, restricted: str) -> None:
    deployment = find(kustomize_standalone(), "Deployment", "training-operator")
    assert admission_of(kube_api, restricted, deployment) == "admitted"
    assert read_only_roots(deployment) == [True]


def test_the_dashboard_components_pod_is_admitted_under_restricted(
    kube_api: KubeApi, restricted: str, tmp_path: Path
) -> None:
    deployment = find(component(tmp_path), "Deployment", "kubetrain-dashboard")
    assert admission_of(kube_api, restricted, deployment) == "admitted"
    assert read_only_roots(deployment) == [True]


def test_the_standalone_overlays_namespace_enforces_restricted() -> None:
    namespace = find(kustomize_standalone(), "Namespace")
    assert namespace["metadata"]["labels"][ENFORCE] == "restricted"


def test_the_charts_jobset_controller_pod_is_admitted_under_restricted(
    kube_api: KubeApi, restricted: str, helm: Helm
) -> None:
    deployment = find(helm.template_dependencies(), "Deployment")
    assert admission_of(kube_api, restricted, deployment) == "admitted"
    assert read_only_roots(deployment) == [True]


def test_the_standalone_overlays_jobset_controller_pod_is_admitted_under_restricted(
    kube_api: KubeApi, restricted: str
) -> None:
    deployment = find([d for d in kustomize_standalone_all() if is_jobsets(d)], "Deployment")
    assert admission_of(kube_api, restricted, deployment) == "admitted"
    assert read_only_roots(deployment) == [True]
