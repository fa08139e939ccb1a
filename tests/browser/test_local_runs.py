"""The Jobs view of this machine's local runs, in Chromium: a run appears and changes state live, its page
shows its replicas, conditions, events and the lines its training printed, and it is suspended, resumed,
deleted and created from the page."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from playwright.sync_api import Page, expect

from browser_support import Viewer
from dashboard_process import RunningDashboard, running_dashboard
from kubetrain.sdk import TrainingClient

pytestmark = pytest.mark.browser

TRAIN = (
    "import sys, time\n"
    "steps = int(sys.argv[1])\n"
    "for step in range(steps):\n"
    "    print(f'step {step} loss {1 / (step + 1):.4f}', flush=True)\n"
    "    time.sleep(0.5)\n"
    "print('training done', flush=True)\n"
)


def local_job(name: str, steps: int) -> dict[str, Any]:
    container = {"name": "pytorch", "image": "unused", "command": [sys.executable, "-c", TRAIN, str(steps)]}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": {"spec": {"containers": [container]}},
                }
            }
        },
    }


def job_id(name: str) -> str:
    return f"local/default/pytorchjobs.v1/{name}"


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    directory = tmp_path / "state"
    directory.mkdir()
    yield directory
    client = TrainingClient(backend="local", state_dir=directory)
    for job in client.list_jobs(all_kinds=True):  # a failed test leaves no run behind
        client.delete_job(job.name, job_kind=job.KIND)


@pytest.fixture
def local_client(state_dir: Path) -> TrainingClient:
    return TrainingClient(backend="local", state_dir=state_dir)


@pytest.fixture
def dashboard(state_dir: Path, tmp_path: Path) -> Iterator[RunningDashboard]:
    with running_dashboard(
        "--no-cluster", "--state-dir", str(state_dir), log=tmp_path / "dashboard.log"
    ) as running:
        yield running
        assert running.stop() == 0


@pytest.fixture
def viewer(viewer_for: Callable[[str], Viewer], dashboard: RunningDashboard) -> Viewer:
    return viewer_for(dashboard.url)


def row(page: Page, name: str) -> Any:
    return page.locator(f'tr[data-id="{job_id(name)}"]')


def test_a_new_run_appears_in_the_list_within_a_second_and_changes_state_without_a_reload(
    viewer: Viewer, local_client: TrainingClient
) -> None:
    page = viewer.open()
    expect(page.locator("#job-count")).to_have_text("No jobs yet.")
    page.evaluate("window.kept = 'this page was not reloaded'")
    local_client.create_job(local_job("quick", steps=4))
    created = time.monotonic()
    row(page, "quick").wait_for(timeout=5_000)
    assert time.monotonic() - created < 1.0
    expect(row(page, "quick").locator(".state")).to_have_text("Running")
    expect(row(page, "quick").locator(".state")).to_have_text("Succeeded", timeout=20_000)
    assert page.evaluate("window.kept") == "this page was not reloaded"
    viewer.screenshot("local-list")


def test_a_runs_page_shows_its_replicas_conditions_events_and_what_its_training_printed(
    viewer: Viewer, local_client: TrainingClient
) -> None:
    local_client.create_job(local_job("talker", steps=6))
    page = viewer.open(f"#/jobs/{job_id('talker')}")
    expect(page.locator("#job-state")).to_have_text("Running")
    expect(page.locator("#pods tbody tr").first).to_contain_text("master-0")
    expect(page.locator("#log-output")).to_contain_text("step 1 loss 0.5000")
    expect(page.locator("#job-state")).to_have_text("Succeeded", timeout=20_000)
    expect(page.locator("#conditions")).to_contain_text("Created")
    expect(page.locator("#conditions")).to_contain_text("Succeeded")
    expect(page.locator("#pods")).to_contain_text("Succeeded")
    expect(page.locator("#log-output")).to_contain_text("training done")
    page.fill("#log-search", "step 3")
    expect(page.locator("#log-output .line:visible")).to_have_count(1)
    page.click("#tab-events")
    expect(page.locator("#events")).to_be_visible()
    page.click("#tab-manifest")
    expect(page.locator("#manifest")).to_contain_text("kind: PyTorchJob")
    page.click("#tab-describe")
    expect(page.locator("#describe")).to_contain_text("Name:          talker")
    viewer.screenshot("local-job")


def test_a_run_is_suspended_resumed_and_deleted_from_its_page(
    viewer: Viewer, local_client: TrainingClient
) -> None:
    local_client.create_job(local_job("pausable", steps=600))
    page = viewer.open(f"#/jobs/{job_id('pausable')}")
    expect(page.locator("#job-state")).to_have_text("Running")
    page.click("#suspend")
    expect(page.locator("#confirm")).to_be_visible()
    page.click("#confirm-ok")
    expect(page.locator("#job-state")).to_have_text("Suspended", timeout=60_000)
    page.click("#resume")
    page.click("#confirm-ok")
    expect(page.locator("#job-state")).to_have_text("Running", timeout=60_000)
    page.click("#delete")
    page.keyboard.press("Escape")  # the confirmation is cancelled: nothing happens
    expect(page.locator("#job-state")).to_have_text("Running")
    page.click("#delete")
    page.click("#confirm-ok")
    expect(page.locator("#job-status")).to_have_text("This job was deleted.", timeout=60_000)
    assert local_client.list_jobs(all_kinds=True) == []


def test_the_new_job_form_shows_the_plan_then_creates_the_run(
    viewer: Viewer, local_client: TrainingClient
) -> None:
    page = viewer.open("#/new")
    page.fill("#new-yaml", yaml.safe_dump(local_job("formed", steps=2), sort_keys=False))
    expect(page.locator("#create")).to_be_disabled()
    page.click("#preview")
    plan = page.locator("#plan")
    expect(plan).to_contain_text("formed-master-0")
    expect(plan).to_contain_text("MASTER_ADDR")
    expect(plan).to_contain_text("127.0.0.1")
    assert local_client.list_jobs(all_kinds=True) == []  # a preview creates nothing
    viewer.screenshot("local-new-job")
    page.click("#create")
    expect(page.locator("#job-state")).to_have_text("Succeeded", timeout=30_000)
    assert [job.name for job in local_client.list_jobs(all_kinds=True)] == ["formed"]


def test_an_invalid_manifest_is_refused_naming_the_field(viewer: Viewer) -> None:
    page = viewer.open("#/new")
    broken = local_job("broken", steps=1)
    broken["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = -1
    page.fill("#new-yaml", yaml.safe_dump(broken))
    page.click("#preview")
    expect(page.locator("#new-status")).to_contain_text("replicas")
    expect(page.locator("#create")).to_be_disabled()


def test_with_no_cluster_the_local_runs_are_served_and_the_terminal_says_why(
    viewer_for: Callable[[str], Viewer], state_dir: Path, local_client: TrainingClient, tmp_path: Path
) -> None:
    local_client.create_job(local_job("alone", steps=1))
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "no-such-kubeconfig"), "HOME": str(tmp_path)}
    with running_dashboard(
        "--state-dir", str(state_dir), log=tmp_path / "dashboard.log", env=env
    ) as dashboard:
        assert "no cluster:" in dashboard.output() and "showing local runs only" in dashboard.output()
        page = viewer_for(dashboard.url).open()
        expect(row(page, "alone")).to_be_visible()
        assert dashboard.stop() == 0
