"""The chart's dashboard option (``dashboard.enabled``): the Jobs view behind the Kubeflow Central Dashboard,
rendered from its values, with RBAC of its own equal to the kustomize component's, and that RBAC enough for
the dashboard to serve a user on a real API server."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from helm_chart import ROOT, Helm, build_helm, find, kubectl, run

from dashboard_process import CRDS, RunningDashboard, pytorch_job, running_dashboard
from kubetrain.envtest import binaries
from kubetrain.envtest.crds import install_crds
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.pytest_plugin import EnvtestCluster
from waiting import PATIENCE

pytestmark = pytest.mark.cluster

COMPONENT = ROOT / "manifests" / "components" / "dashboard"
DASHBOARD = "kubetrain-dashboard"


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(build_helm(), tmp_path_factory.mktemp("helm-home"))


def dashboard_objects(rendered: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        d
        for d in rendered
        if (d["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == "dashboard"
    ]


def component(tmp_path: Path) -> list[dict[str, Any]]:
    """The component in an overlay of the standalone install, as a user adds it."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": "kubeflow",
        # kustomize takes only relative paths
        "resources": [os.path.relpath(ROOT / "manifests" / "overlays" / "standalone", overlay)],
        "components": [os.path.relpath(COMPONENT, overlay)],
    }
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    done = run([str(binaries.locate().kubectl), "kustomize", str(overlay)])
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def test_the_dashboard_is_off_by_default(helm: Helm) -> None:
    assert dashboard_objects(helm.template()) == []


def test_the_dashboard_trusts_the_configured_header_and_prefix(helm: Helm) -> None:
    rendered = helm.template(
        "--set=dashboard.enabled=true",
        "--set=dashboard.userIdHeader=x-auth-user",
        "--set=dashboard.userIdPrefix=accounts.google.com:",
        "--set=dashboard.namespace=team-a",
    )
    deployment = find(dashboard_objects(rendered), "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["kubetrain", "dashboard"]
    assert container["args"] == [
        "--address=0.0.0.0",
        "--port=8080",
        "--no-local",
        "--user-header=x-auth-user",
        "--user-prefix=accounts.google.com:",
        "--namespace=team-a",
    ]
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "kubetrain-dashboard"


def test_the_gateway_route_and_only_the_gateway_may_call_it(helm: Helm) -> None:
    rendered = dashboard_objects(
        helm.template("--set=dashboard.enabled=true", "--set=dashboard.istio.prefix=/jobs/")
    )
    route = find(rendered, "VirtualService")["spec"]["http"][0]
    assert (route["match"][0]["uri"]["prefix"], route["rewrite"]["uri"]) == ("/jobs/", "/")
    policy = find(rendered, "AuthorizationPolicy")["spec"]
    assert policy["rules"] == [
        {
            "from": [
                {
                    "source": {
                        "principals": [
                            "cluster.local/ns/istio-system/sa/istio-ingressgateway-service-account"
                        ]
                    }
                }
            ]
        }
    ]
    without_istio = dashboard_objects(
        helm.template("--set=dashboard.enabled=true", "--set=dashboard.istio.enabled=false")
    )
    assert {d["kind"] for d in without_istio} == {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "Service",
    }


def test_a_bad_gateway_prefix_is_refused_naming_the_value(helm: Helm) -> None:
    error = helm.template_error("--set=dashboard.enabled=true", "--set=dashboard.istio.prefix=kubetrain")
    assert "/dashboard/istio/prefix" in error


def test_the_dashboards_rbac_grants_no_secret_and_is_separate_from_the_operators(helm: Helm) -> None:
    rendered = helm.template("--set=dashboard.enabled=true")
    role = find(dashboard_objects(rendered), "ClusterRole")
    resources = {r for rule in role["rules"] for r in rule["resources"]}
    assert "secrets" not in resources and "*" not in resources
    operator_role = next(
        d for d in rendered if d["kind"] == "ClusterRole" and d not in dashboard_objects(rendered)
    )
    assert operator_role["metadata"]["name"] != role["metadata"]["name"]


@pytest.mark.parametrize("kind", ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"])
def test_the_charts_dashboard_rbac_equals_the_kustomize_components(
    helm: Helm, kind: str, tmp_path: Path
) -> None:
    def bare(document: dict[str, Any]) -> dict[str, Any]:
        metadata = {k: v for k, v in document["metadata"].items() if k != "labels"}
        return {**document, "metadata": metadata}

    rendered = dashboard_objects(
        helm.template("--set=dashboard.enabled=true", "--set=fullnameOverride=kubetrain")
    )
    from_component = [d for d in component(tmp_path) if d["metadata"]["name"] == DASHBOARD]
    assert bare(find(rendered, kind)) == bare(find(from_component, kind))


# --- the chart's RBAC at work ----------------------------------------------------------------------


@pytest.fixture
def chart_identity(
    envtest: EnvtestCluster, kube_api: KubeApi, helm: Helm, namespace: str, tmp_path: Path
) -> Iterator[Path]:
    """A kubeconfig for the ServiceAccount the chart gives the dashboard, with the chart's ClusterRole."""
    rendered = dashboard_objects(
        helm.template(
            "--set=dashboard.enabled=true", f"--set=fullnameOverride={namespace}", namespace=namespace
        )
    )
    rbac = [d for d in rendered if d["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")]
    applied = kubectl(
        envtest.kubeconfig, "apply", "-f", "-", stdin="\n---\n".join(yaml.safe_dump(d) for d in rbac)
    )
    assert applied.returncode == 0, applied.stderr
    account = find(rendered, "ServiceAccount")["metadata"]["name"]
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    token = kube_api.create(f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token", request)[
        "status"
    ]["token"]
    config = yaml.safe_load(envtest.kubeconfig.read_text())
    config["users"][0]["user"] = {"token": token}
    path = tmp_path / "dashboard.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    yield path
    for document in rbac:
        if document["kind"] != "ServiceAccount":
            kubectl(
                envtest.kubeconfig,
                "delete",
                document["kind"].lower(),
                document["metadata"]["name"],
                "--wait=false",
            )


def test_the_charts_rbac_lets_the_dashboard_serve_a_user_their_namespace(
    chart_identity: Path, kube_api: KubeApi, namespace: str, tmp_path: Path
) -> None:
    install_crds(kube_api, CRDS)
    kube_api.create(f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs", pytorch_job("visible"))
    rules = [{"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs"], "verbs": ["get", "list"]}]
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
    kube_api.create(
        f"{rbac}/roles",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "reader"},
            "rules": rules,
        },
    )
    subject = {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}
    role_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "reader"},
        "roleRef": role_ref,
        "subjects": [subject],
    }
    kube_api.create(f"{rbac}/rolebindings", binding)
    arguments = ["--no-local", "--user-header", "kubeflow-userid", "--kubeconfig", str(chart_identity)]
    with running_dashboard(*arguments, log=tmp_path / "dashboard.log") as dashboard:
        shown = first_snapshot(dashboard, {"kubeflow-userid": "bob"})
        assert [row["name"] for row in shown["jobs"] if row["namespace"] == namespace] == ["visible"]
        assert all(source["reachable"] for source in shown["sources"]), shown["sources"]
        job = f"{dashboard.url}api/jobs/cluster/{namespace}/pytorchjobs.v1/visible"
        bob = {"kubeflow-userid": "bob"}
        assert httpx.get(job, headers=bob, timeout=PATIENCE).status_code == 200
        assert httpx.get(f"{job}/pods", headers=bob, timeout=PATIENCE).status_code == 403


def first_snapshot(dashboard: RunningDashboard, headers: dict[str, str]) -> dict[str, Any]:
    with httpx.stream("GET", f"{dashboard.url}api/stream", headers=headers, timeout=PATIENCE) as response:
        lines = response.iter_lines()
        for line in lines:
            if line == "event: snapshot":
                data: dict[str, Any] = json.loads(next(lines).removeprefix("data: "))
                return data
    raise AssertionError("no snapshot")
