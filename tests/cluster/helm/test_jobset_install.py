"""JobSet as kubetrain's installs ship it: the chart's dependency (charts/jobset) and the standalone overlay's
manifests/jobset are JobSet v0.12.0's release (its image, its objects), put in the operator's namespace, and
the chart leaves it out with ``jobset.enabled=false``."""

from __future__ import annotations

from typing import Any

import pytest
from helm_chart import Helm, build_helm, find, is_jobsets, kustomize_standalone_all

from kubetrain.envtest import binaries, jobset, jobset_release

pytestmark = pytest.mark.cluster

RELEASE_IMAGE = f"registry.k8s.io/jobset/jobset:{jobset.version()}"


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(build_helm(), tmp_path_factory.mktemp("helm-home"))


def image_of(deployment: dict[str, Any]) -> str:
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return str(container["image"])


def webhook_service_namespaces(rendered: list[dict[str, Any]]) -> set[str]:
    return {
        webhook["clientConfig"]["service"]["namespace"]
        for document in rendered
        if document["kind"].endswith("WebhookConfiguration")
        for webhook in document["webhooks"]
    }


def test_the_kustomize_manifests_are_what_the_pinned_release_builds() -> None:
    expected = jobset_release.kustomize_manifests(binaries.locate().kubectl)
    found = (jobset_release.KUSTOMIZE_DIR / jobset_release.MANIFESTS).read_text()
    assert found == expected, "manifests/jobset/manifests.yaml is out of date; run `make jobset-manifests`"


def test_the_chart_runs_jobsets_release_controller_in_the_release_namespace(helm: Helm) -> None:
    rendered = helm.template_dependencies(namespace="ml-ops")

    deployment = find(rendered, "Deployment")
    assert (deployment["metadata"]["name"], deployment["metadata"]["namespace"]) == (
        "jobset-controller",
        "ml-ops",
    )
    assert image_of(deployment) == RELEASE_IMAGE
    assert webhook_service_namespaces(rendered) == {"ml-ops"}


def test_the_chart_installs_jobsets_crd_with_its_own(helm: Helm) -> None:
    crds = [
        d for d in helm.template_dependencies("--include-crds") if d["kind"] == "CustomResourceDefinition"
    ]
    assert [crd["metadata"]["name"] for crd in crds] == [jobset.CRD_NAME]


def test_jobset_enabled_false_leaves_jobset_out(helm: Helm) -> None:
    assert helm.template_dependencies("--set=jobset.enabled=false", "--include-crds") == []


def test_the_standalone_overlay_runs_jobsets_release_controller_beside_the_operator() -> None:
    everything = kustomize_standalone_all()
    jobsets = [d for d in everything if is_jobsets(d)]

    deployment = find(jobsets, "Deployment")
    assert deployment["metadata"]["namespace"] == "kubeflow"
    assert image_of(deployment) == RELEASE_IMAGE
    assert webhook_service_namespaces(jobsets) == {"kubeflow"}
    assert [d["metadata"]["name"] for d in everything if d["kind"] == "Namespace"] == ["kubeflow"]
    assert jobset.CRD_NAME in {
        d["metadata"]["name"] for d in jobsets if d["kind"] == "CustomResourceDefinition"
    }
