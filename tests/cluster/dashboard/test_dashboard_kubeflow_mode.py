"""Behind the Kubeflow Central Dashboard (``--user-header``), against a real API server: with RBAC for one
namespace, a user sees that namespace's jobs and is refused (403, nothing shown) the jobs, logs and actions of
another; without the header, 401. The SubjectAccessReviews are the API server's own answers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dashboard_process import CRDS, RunningDashboard, pytorch_job, running_dashboard
from kubetrain.envtest.crds import install_crds
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.pytest_plugin import EnvtestCluster
from waiting import PATIENCE

pytestmark = pytest.mark.cluster

USER = "alice@example.com"
PREFIX = "accounts.google.com:"
ALICE = {"kubeflow-userid": f"{PREFIX}{USER}"}


@pytest.fixture(scope="module")
def job_crds(kube_api: KubeApi) -> list[str]:
    return install_crds(kube_api, CRDS)


@pytest.fixture
def other_namespace(kube_api: KubeApi, namespace: str) -> Iterator[str]:
    name = f"{namespace}-other"
    kube_api.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    yield name
    kube_api.delete(f"/api/v1/namespaces/{name}")


def grant_namespace(kube_api: KubeApi, namespace: str, user: str) -> None:
    """What a Kubeflow Profile grants its owner, as far as the dashboard goes: jobs, pods, logs, events."""
    rules = [
        {
            "apiGroups": ["kubeflow.org"],
            "resources": ["pytorchjobs"],
            "verbs": ["get", "list", "watch", "patch", "delete", "create"],
        },
        {"apiGroups": [""], "resources": ["pods", "pods/log", "events"], "verbs": ["get", "list", "watch"]},
    ]
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
    kube_api.create(
        f"{rbac}/roles",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "jobs"},
            "rules": rules,
        },
    )
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "jobs"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "jobs"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    kube_api.create(f"{rbac}/rolebindings", binding)


@pytest.fixture
def dashboard(
    envtest: EnvtestCluster,
    job_crds: list[str],
    kube_api: KubeApi,
    namespace: str,
    other_namespace: str,
    tmp_path: Path,
) -> Iterator[RunningDashboard]:
    for where, name in ((namespace, "mine"), (other_namespace, "theirs")):
        kube_api.create(f"/apis/kubeflow.org/v1/namespaces/{where}/pytorchjobs", pytorch_job(name))
    grant_namespace(kube_api, namespace, USER)
    arguments = ["--no-local", "--user-header", "kubeflow-userid", "--user-prefix", PREFIX]
    arguments += ["--kubeconfig", str(envtest.kubeconfig)]
    with running_dashboard(*arguments, log=tmp_path / "dashboard.log") as running:
        yield running


def snapshot(url: str, headers: dict[str, str]) -> dict[str, Any]:
    with httpx.stream("GET", f"{url}api/stream", headers=headers, timeout=PATIENCE) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        for line in lines:
            if line == "event: snapshot":
                data: dict[str, Any] = json.loads(next(lines).removeprefix("data: "))
                return data
    raise AssertionError("no snapshot")


def test_a_user_sees_only_the_jobs_of_the_namespace_they_may_list(
    dashboard: RunningDashboard, namespace: str
) -> None:
    shown = snapshot(dashboard.url, ALICE)
    assert [
        (row["namespace"], row["name"]) for row in shown["jobs"] if row["name"] in ("mine", "theirs")
    ] == [(namespace, "mine")]


def test_a_user_may_read_and_act_on_jobs_in_their_namespace(
    dashboard: RunningDashboard, namespace: str, kube_api: KubeApi
) -> None:
    job = f"{dashboard.url}api/jobs/cluster/{namespace}/pytorchjobs.v1/mine"
    with httpx.Client(headers=ALICE, timeout=PATIENCE) as client:
        assert client.get(job).json()["row"]["name"] == "mine"
        assert client.get(f"{job}/events").status_code == 200
        token = client.get(f"{dashboard.url}api/session").headers["X-CSRF-Token"]
        suspended = client.post(f"{job}/suspend", headers={"X-CSRF-Token": token})
        assert suspended.status_code == 200, suspended.text
    stored = kube_api.get(f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/mine")
    assert stored["spec"]["runPolicy"]["suspend"] is True


def test_another_namespaces_job_logs_and_actions_are_refused_and_show_nothing(
    dashboard: RunningDashboard, other_namespace: str, kube_api: KubeApi
) -> None:
    job = f"{dashboard.url}api/jobs/cluster/{other_namespace}/pytorchjobs.v1/theirs"
    with httpx.Client(headers=ALICE, timeout=PATIENCE) as client:
        token = client.get(f"{dashboard.url}api/session").headers["X-CSRF-Token"]
        refused = [
            client.get(job),
            client.get(f"{job}/pods"),
            client.get(f"{job}/events"),
            client.get(f"{job}/logs", params={"replica": "master-0"}),
            client.get(f"{job}/describe"),
            client.post(f"{job}/suspend", headers={"X-CSRF-Token": token}),
            client.delete(job, headers={"X-CSRF-Token": token}),
        ]
    for response in refused:
        assert response.status_code == 403, response.request.url
        assert set(response.json()) == {"error", "errors"}
        assert f"forbidden: {USER} may not" in response.json()["error"]
    assert kube_api.exists(f"/apis/kubeflow.org/v1/namespaces/{other_namespace}/pytorchjobs/theirs")


def test_a_request_without_the_user_header_is_refused_with_401(dashboard: RunningDashboard) -> None:
    assert httpx.get(dashboard.url, timeout=PATIENCE).status_code == 401
    assert httpx.get(f"{dashboard.url}api/session", timeout=PATIENCE).status_code == 401
