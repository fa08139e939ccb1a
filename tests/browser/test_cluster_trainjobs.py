"""A cluster's Kubeflow Trainer TrainJob in the Jobs view, in Chromium (envtest, the operator running, the pod
driver as the kubelet, the JobSet's pods and status made as its controllers would): listed beside a v1 job, it
turns Running once its nodes run and Complete when its JobSet completes, and its page shows its runtime, its
JobSet's jobs, its nodes' pods and its progress, live."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from playwright.sync_api import expect

from browser_support import Viewer
from dashboard_process import RunningDashboard, pytorch_job, running_dashboard
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.poddriver import PodDriver
from kubetrain.envtest.pytest_plugin import EnvtestCluster
from operator_process import running_operator
from trainjob_cluster import (
    TRAINER,
    install_trainjob_crds,
    jobset_finished,
    node_pods,
    set_jobset_status,
    trainjob,
)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def crds(kube_api: KubeApi) -> None:
    install_trainjob_crds(kube_api)


@pytest.fixture
def dashboard(
    envtest: EnvtestCluster, crds: None, namespace: str, tmp_path: Path
) -> Iterator[RunningDashboard]:
    arguments = ["--no-local", "--namespace", namespace, "--kubeconfig", str(envtest.kubeconfig)]
    with (
        running_operator(envtest.kubeconfig, namespace, tmp_path / "operator.log"),
        running_dashboard(*arguments, log=tmp_path / "dashboard.log") as running,
    ):
        yield running
        assert running.stop() == 0


@pytest.fixture
def viewer(viewer_for: Callable[[str], Viewer], dashboard: RunningDashboard) -> Viewer:
    return viewer_for(dashboard.url)


def test_a_cluster_trainjob_runs_and_completes_live_in_the_list_and_on_its_page(
    viewer: Viewer, kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    page = viewer.open()
    kube_api.create(f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs", pytorch_job("classic"))
    kube_api.create(f"{TRAINER}/namespaces/{namespace}/trainjobs", trainjob("llm"))
    row = page.locator(f'tr[data-id="cluster/{namespace}/trainjobs.v1alpha1/llm"]')
    expect(row.locator(".state")).to_have_text("Created")
    expect(page.locator(f'tr[data-id="cluster/{namespace}/pytorchjobs.v1/classic"]')).to_be_visible()
    pods = node_pods(kube_api, pod_driver, namespace, "llm", 2)
    for pod in pods:
        pod_driver.run((namespace, pod))
    expect(row.locator(".state")).to_have_text("Running")
    expect(row).to_contain_text("node 2/2")

    row.get_by_role("link", name="llm").click()
    expect(page.locator("#job-summary")).to_contain_text(
        "TrainJob · runtime ClusterTrainingRuntime torch-distributed"
    )
    expect(page.locator("#pods tbody tr")).to_have_count(2)
    expect(page.locator("#pods")).to_contain_text("node-1")
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    report = {"progressPercentage": 60, "metrics": [{"name": "loss", "value": "0.4"}], "lastUpdatedTime": now}
    kube_api.patch(
        f"{TRAINER}/namespaces/{namespace}/trainjobs/llm/status", {"status": {"trainerStatus": report}}
    )
    expect(page.locator("#metrics")).to_contain_text("loss = 0.4")
    for pod in pods:
        pod_driver.succeed((namespace, pod))
    set_jobset_status(
        kube_api,
        namespace,
        "llm",
        jobset_finished("Completed", "AllJobsCompleted", "jobset completed successfully"),
    )
    expect(page.locator("#job-state")).to_have_text("Complete")
    expect(page.locator("#conditions")).to_contain_text("AllJobsCompleted")
    expect(page.locator("#jobset-jobs-table tbody tr")).to_contain_text("node")
    page.click("#tab-describe")
    expect(page.locator("#describe")).to_contain_text(
        "Kind:          TrainJob (trainer.kubeflow.org/v1alpha1)"
    )
    viewer.screenshot("cluster-trainjob")
