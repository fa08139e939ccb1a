"""Kubeflow Trainer TrainJobs run on this machine, in the Jobs view in Chromium beside a v1 job: listed as
TrainJobs with Trainer's states, their nodes and progress; a TrainJob's page shows its runtime, its JobSet's
jobs, its nodes' pods and logs and the curve of what it reported, and it is suspended, resumed and deleted."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from playwright.sync_api import Page, expect

from browser_support import Viewer
from dashboard_process import RunningDashboard, running_dashboard
from kubetrain.sdk import TrainingClient
from waiting import eventually

pytestmark = pytest.mark.browser

# Node 0 reports ``steps`` steps through kubetrain.reporting (the run's status endpoint); every node prints.
REPORTING = (
    "import os, sys, time\n"
    "from kubetrain.reporting import ProgressReporter\n"
    "steps, pause = int(sys.argv[1]), float(sys.argv[2])\n"
    "rank = os.environ['PET_NODE_RANK']\n"
    "reporter = ProgressReporter(interval=0.5) if rank == '0' else None\n"
    "for step in range(1, steps + 1):\n"
    "    loss = 2.5 / step\n"
    "    if reporter:\n"
    "        reporter.report_step(step, steps, {'loss': loss})\n"
    "        reporter.flush()\n"
    "    print(f'node {rank} step {step} loss {loss:.4f}', flush=True)\n"
    "    time.sleep(pause)\n"
    "if reporter:\n"
    "    reporter.close()\n"
)
V1 = "import time\nfor step in range(3):\n    print(f'step {step}', flush=True)\n    time.sleep(0.5)\n"


def trainjob(name: str, steps: int, pause: float) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {
                "numNodes": 2,
                "command": [sys.executable, "-c", REPORTING, str(steps), str(pause)],
            },
        },
    }


def pytorch_job(name: str) -> dict[str, Any]:
    container = {"name": "pytorch", "image": "unused", "command": [sys.executable, "-c", V1]}
    master = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": {"Master": master}},
    }


@pytest.fixture
def local_client(tmp_path: Path) -> Iterator[TrainingClient]:
    directory = tmp_path / "state"
    directory.mkdir()
    client = TrainingClient(backend="local", state_dir=directory)
    yield client
    for job in client.list_jobs(all_kinds=True):  # a failed test leaves no run behind
        client.delete_job(job.name, job_kind=job.KIND)


@pytest.fixture
def dashboard(local_client: TrainingClient, tmp_path: Path) -> Iterator[RunningDashboard]:
    state_dir = str(local_client.backend.state_dir)  # type: ignore[attr-defined]
    with running_dashboard(
        "--no-cluster", "--state-dir", state_dir, log=tmp_path / "dashboard.log"
    ) as running:
        yield running
        assert running.stop() == 0


@pytest.fixture
def viewer(viewer_for: Callable[[str], Viewer], dashboard: RunningDashboard) -> Viewer:
    return viewer_for(dashboard.url)


def row(page: Page, job_id: str) -> Any:
    return page.locator(f'tr[data-id="{job_id}"]')


TRAINJOB_ID = "local/default/trainjobs.v1alpha1/{}"


def test_a_trainjob_is_listed_beside_a_v1_job_with_trainers_states_and_its_nodes(
    viewer: Viewer, local_client: TrainingClient
) -> None:
    page = viewer.open()
    local_client.create_job(pytorch_job("classic"))
    local_client.create_job(trainjob("llm", steps=12, pause=1.0))
    llm = row(page, TRAINJOB_ID.format("llm"))
    expect(llm.locator("td").nth(1)).to_have_text("TrainJob")
    expect(llm.locator(".state")).to_have_text("Running")
    expect(llm).to_contain_text("node 2/2")
    expect(llm.locator(".pct")).not_to_have_text("0%")
    expect(row(page, "local/default/pytorchjobs.v1/classic").locator(".state")).to_have_text("Succeeded")
    page.select_option("#filter-kind", "TrainJob")
    expect(page.locator("#job-count")).to_have_text("1 of 2 jobs")
    page.select_option("#filter-kind", "")
    viewer.screenshot("local-trainjob-list")
    expect(llm.locator(".state")).to_have_text("Complete")
    expect(llm).to_contain_text("node 0/2")
    assert "JobSetRun" not in page.locator("#jobs").inner_text()


def test_a_trainjobs_page_shows_its_runtime_jobs_nodes_logs_and_curve(
    viewer: Viewer, local_client: TrainingClient
) -> None:
    local_client.create_job(trainjob("tuned", steps=6, pause=1.0))
    page = viewer.open()
    row(page, TRAINJOB_ID.format("tuned")).get_by_role("link", name="tuned").click()
    expect(page.locator("#job-summary")).to_contain_text(
        "TrainJob · runtime ClusterTrainingRuntime torch-distributed"
    )
    expect(page.locator("#jobset-jobs-table")).to_contain_text("node")
    expect(page.locator("#pods tbody tr")).to_have_count(2)
    expect(page.locator("#pods")).to_contain_text("node-1")
    expect(page.locator("#log-output")).to_contain_text("node 0 step 1")
    page.select_option("#log-replica", "node-1")
    expect(page.locator("#log-output")).to_contain_text("node 1 step 1")
    expect(page.locator("#job-state")).to_have_text("Complete")
    expect(page.locator("#charts svg[aria-label='loss over time']")).to_have_attribute("data-points", "6")
    expect(page.locator("#conditions")).to_contain_text("AllJobsCompleted")
    expect(page.locator("#jobset-jobs-table tbody tr")).to_contain_text("1")
    page.click("#tab-manifest")
    expect(page.locator("#manifest")).to_contain_text("kind: TrainJob")
    page.click("#tab-describe")
    expect(page.locator("#describe")).to_contain_text(
        "Runtime:       ClusterTrainingRuntime torch-distributed"
    )
    assert "JobSetRun" not in page.locator("main").inner_text()
    viewer.screenshot("local-trainjob")


def test_a_trainjob_is_suspended_resumed_and_deleted_from_its_page(
    viewer: Viewer, local_client: TrainingClient
) -> None:
    local_client.create_job(trainjob("pausable", steps=600, pause=1.0))
    page = viewer.open()
    row(page, TRAINJOB_ID.format("pausable")).get_by_role("link", name="pausable").click()
    expect(page.locator("#job-state")).to_have_text("Running")
    page.click("#suspend")
    page.click("#confirm-ok")
    expect(page.locator("#job-state")).to_have_text("Suspended")
    expect(page.locator("#conditions")).to_contain_text("TrainJob is suspended")
    page.click("#resume")
    page.click("#confirm-ok")
    expect(page.locator("#job-state")).to_have_text("Running")
    page.click("#delete")
    page.click("#confirm-ok")
    expect(page.locator("#job-status")).to_have_text("This job was deleted.")
    eventually(lambda: not local_client.list_jobs(all_kinds=True), "every job gone from the local state")


def test_the_new_job_form_plans_a_trainjobs_nodes_then_runs_it(
    viewer: Viewer, local_client: TrainingClient
) -> None:
    page = viewer.open("#/new")
    page.fill("#new-yaml", yaml.safe_dump(trainjob("formed", steps=2, pause=0.2), sort_keys=False))
    page.click("#preview")
    plan = page.locator("#plan")
    expect(plan).to_contain_text("TrainJob formed: 2 processes")
    expect(plan).to_contain_text("formed-node-0-1")
    expect(plan).to_contain_text("PET_MASTER_ADDR")
    assert local_client.list_jobs(all_kinds=True) == []  # a preview creates nothing
    page.click("#create")
    expect(page.locator("#job-state")).to_have_text("Complete")
    assert [(job.KIND, job.name) for job in local_client.list_jobs(all_kinds=True)] == [
        ("TrainJob", "formed")
    ]
