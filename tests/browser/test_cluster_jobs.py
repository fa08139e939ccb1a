"""The Jobs view of a cluster (envtest, the operator running, the pod driver as the kubelet), in Chromium: a
job appears and changes state live, its page shows its replicas with their nodes, conditions and events,
curves of its whole progress history extended live, and what is wrong with it while it is, and it is
suspended, resumed, deleted and created from the page."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from playwright.sync_api import Page, expect

from browser_support import Viewer
from dashboard_process import CRDS, RunningDashboard, pytorch_job, running_dashboard
from kubetrain.api.progress import Metric, ProgressHistory, TrainerStatus
from kubetrain.envtest.crds import install_crds
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.poddriver import PodDriver
from kubetrain.envtest.pytest_plugin import EnvtestCluster
from kubetrain.kube.status.history_config_map import (
    COMPONENT,
    COMPONENT_LABEL,
    HISTORY_KEY,
    history_config_map_name,
)
from operator_process import running_operator
from waiting import PATIENCE, eventually

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def job_crds(kube_api: KubeApi) -> list[str]:
    return install_crds(kube_api, CRDS)


@pytest.fixture
def dashboard(
    envtest: EnvtestCluster, job_crds: list[str], namespace: str, tmp_path: Path
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


def jobs(namespace: str) -> str:
    return f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs"


def job_id(namespace: str, name: str) -> str:
    return f"cluster/{namespace}/pytorchjobs.v1/{name}"


def row(page: Page, namespace: str, name: str) -> object:
    return page.locator(f'tr[data-id="{job_id(namespace, name)}"]')


def pods_of(kube_api: KubeApi, namespace: str, name: str, count: int) -> list[str]:
    def found() -> list[str] | None:
        pods = kube_api.get(
            f"/api/v1/namespaces/{namespace}/pods",
            {"labelSelector": f"training.kubeflow.org/job-name={name}"},
        )["items"]
        return sorted(p["metadata"]["name"] for p in pods) if len(pods) == count else None

    return eventually(found, f"{count} pods of {name}")


def report(kube_api: KubeApi, namespace: str, name: str, progress: int, loss: float) -> None:
    """What the status endpoint writes for a training that reports (through the status subresource)."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    trainer = {
        "progressPercentage": progress,
        "estimatedRemainingSeconds": (100 - progress) * 6,
        "metrics": [
            {"name": "loss", "value": str(loss)},
            {"name": "accuracy", "value": str(round(1 - loss / 3, 3))},
        ],
        "lastUpdatedTime": now,
    }
    kube_api.patch(f"{jobs(namespace)}/{name}/status", {"status": {"trainerStatus": trainer}})


def write_history(
    kube_api: KubeApi, namespace: str, name: str, reports: list[tuple[datetime, int, float]]
) -> None:
    """The ConfigMap ``<job>-progress-history`` holding these reports, owned by the job, as the operator's
    status endpoint writes it (kube/status/history.py) from the reports it received."""
    history = ProgressHistory()
    for at, progress, loss in reports:
        metrics = [Metric(name="loss", value=str(loss))]
        history.add(TrainerStatus(progress_percentage=progress, metrics=metrics, last_updated_time=at))
    job = kube_api.get(f"{jobs(namespace)}/{name}")
    owner = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "name": name,
        "uid": job["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    metadata: dict[str, Any] = {
        "name": history_config_map_name(name),
        "labels": {"training.kubeflow.org/job-name": name, COMPONENT_LABEL: COMPONENT},
        "ownerReferences": [owner],
    }
    data = {HISTORY_KEY: json.dumps(history.to_json(), separators=(",", ":"))}
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}
    kube_api.create(f"/api/v1/namespaces/{namespace}/configmaps", config_map)


def test_a_new_job_appears_and_changes_state_without_a_reload(
    viewer: Viewer, kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    page = viewer.open()
    expect(page.locator("#job-count")).to_have_text("No jobs yet.")
    page.evaluate("window.kept = 'this page was not reloaded'")
    kube_api.create(jobs(namespace), pytorch_job("live"))
    page.locator(f'tr[data-id="{job_id(namespace, "live")}"]').wait_for(timeout=PATIENCE * 1000)
    state = page.locator(f'tr[data-id="{job_id(namespace, "live")}"] .state')
    for pod in pods_of(kube_api, namespace, "live", 2):
        pod_driver.run((namespace, pod))
    expect(state).to_have_text("Running")
    pod_driver.succeed((namespace, "live-worker-0"))
    pod_driver.succeed((namespace, "live-master-0"))
    expect(state).to_have_text("Succeeded")
    assert page.evaluate("window.kept") == "this page was not reloaded"


def test_a_jobs_page_shows_its_replicas_conditions_and_events(
    viewer: Viewer, kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    kube_api.create(jobs(namespace), pytorch_job("resnet", workers=2, restart_policy="OnFailure"))
    for pod in pods_of(kube_api, namespace, "resnet", 3):
        pod_driver.run((namespace, pod))
    pod_driver.restart((namespace, "resnet-worker-1"), exit_code=137)
    page = viewer.open(f"#/jobs/{job_id(namespace, 'resnet')}")
    expect(page.locator("#job-state")).to_have_text("Running")
    pods = page.locator("#pods tbody tr")
    expect(pods).to_have_count(3)
    expect(page.locator("#pods")).to_contain_text("envtest-node-")
    expect(pods.filter(has_text="worker-1")).to_contain_text("137")
    expect(page.locator("#conditions")).to_contain_text("Running")
    expect(page.locator("#progress")).to_contain_text("The training has not reported progress.")
    page.click("#tab-events")
    expect(page.locator("#events")).to_contain_text("SuccessfulCreatePod")
    page.click("#tab-logs")
    expect(page.locator("#log-note")).to_contain_text("kubelet")  # envtest has none; the real node does


def test_a_jobs_page_draws_its_whole_progress_history_then_extends_it_live(
    viewer: Viewer, kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    kube_api.create(jobs(namespace), pytorch_job("bert"))
    for pod in pods_of(kube_api, namespace, "bert", 2):
        pod_driver.run((namespace, pod))
    started = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    earlier = [(started + timedelta(seconds=30 * i), 5 * (i + 1), round(2.4 / (i + 1), 3)) for i in range(6)]
    write_history(kube_api, namespace, "bert", earlier)
    report(kube_api, namespace, "bert", 30, 0.4)  # the latest report, in the job's status

    page = viewer.open(f"#/jobs/{job_id(namespace, 'bert')}")

    loss = page.locator("#charts svg[aria-label='loss over time']")
    progress = page.locator("#charts svg[aria-label='progress % over time']")
    expect(loss).to_have_attribute("data-points", "7")  # the 6 reports before the page opened, and the latest
    expect(progress).to_have_attribute("data-points", "7")
    expect(page.locator("#charts")).to_contain_text("5m")  # the curve spans the job's life, not the page's
    for progress_now, loss_now in ((40, 0.35), (55, 0.3)):
        time.sleep(1.1)  # reports are stamped to the second
        report(kube_api, namespace, "bert", progress_now, loss_now)
    expect(loss).to_have_attribute("data-points", "9")
    expect(page.locator("#metrics")).to_contain_text("loss = 0.3")
    assert page.locator("#history-error").count() == 0
    page.goto(viewer.base)
    expect(page.locator(f'tr[data-id="{job_id(namespace, "bert")}"] .pct')).to_have_text("55%")


def test_a_pod_whose_image_cannot_be_pulled_is_a_finding_at_the_top_of_its_page_until_it_is_pulled(
    viewer: Viewer, kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    kube_api.create(jobs(namespace), pytorch_job("typo"))
    pods_of(kube_api, namespace, "typo", 2)
    pod_driver.run((namespace, "typo-worker-0"))
    pod_driver.wait_for_image((namespace, "typo-master-0"), message="not found")
    page = viewer.open(f"#/jobs/{job_id(namespace, 'typo')}")
    finding = page.locator("#diagnosis .finding")

    expect(finding).to_contain_text(
        "ImagePullFailed pod typo-master-0 cannot start: image example.com/trainer:1 of container pytorch "
        "cannot be pulled (ErrImagePull: not found). Fix:"
    )
    expect(finding).to_contain_text("(typo-master-0)")
    pod_driver.run((namespace, "typo-master-0"))  # the image came

    expect(page.locator("#job-state")).to_have_text("Running")
    expect(finding).to_have_count(0)


def test_a_job_is_suspended_resumed_and_deleted_from_its_page(
    viewer: Viewer, kube_api: KubeApi, namespace: str
) -> None:
    kube_api.create(jobs(namespace), pytorch_job("pausable"))
    pods_of(kube_api, namespace, "pausable", 2)
    page = viewer.open(f"#/jobs/{job_id(namespace, 'pausable')}")
    expect(page.locator("#job-state")).to_have_text("Created")
    page.click("#suspend")
    page.click("#confirm-ok")
    expect(page.locator("#job-state")).to_have_text("Suspended")
    assert kube_api.get(f"{jobs(namespace)}/pausable")["spec"]["runPolicy"]["suspend"] is True
    expect(page.locator("#pods")).to_have_text("No pods.")
    page.click("#resume")
    page.click("#confirm-ok")
    expect(page.locator("#pods tbody tr")).to_have_count(2)
    page.click("#delete")
    page.click("#confirm-ok")
    expect(page.locator("#job-status")).to_have_text("This job was deleted.")
    assert not kube_api.exists(f"{jobs(namespace)}/pausable")


def test_the_new_job_form_shows_the_pods_and_env_then_creates_the_job(
    viewer: Viewer, kube_api: KubeApi, namespace: str
) -> None:
    page = viewer.open("#/new")
    page.fill("#new-yaml", yaml.safe_dump(pytorch_job("formed", workers=2), sort_keys=False))
    page.click("#preview")
    plan = page.locator("#plan")
    expect(plan).to_contain_text("formed-worker-1")
    expect(plan).to_contain_text("MASTER_ADDR")
    expect(plan).to_contain_text("formed-master-0")
    assert not kube_api.exists(f"{jobs(namespace)}/formed")
    viewer.screenshot("cluster-new-job")
    page.click("#create")
    expect(page.locator("#job-header, .job-header h1")).to_contain_text("formed")
    assert kube_api.get(f"{jobs(namespace)}/formed")["metadata"]["namespace"] == namespace
