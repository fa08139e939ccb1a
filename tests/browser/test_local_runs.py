"""The Jobs view of this machine's local runs, in Chromium: a run appears and changes state live, the list
shows each run's state, progress and ETA, a run's page shows its replicas, conditions, events, the lines its
training printed, curves of everything it reported (since it started, not since the page opened) and what is
wrong with it, and it is suspended, resumed, deleted and created from the page."""

from __future__ import annotations

import os
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
from waiting import PATIENCE, eventually

pytestmark = pytest.mark.browser

TRAIN = (
    "import sys, time\n"
    "steps = int(sys.argv[1])\n"
    "for step in range(steps):\n"
    "    print(f'step {step} loss {1 / (step + 1):.4f}', flush=True)\n"
    "    time.sleep(0.5)\n"
    "print('training done', flush=True)\n"
)


# Trains for ``steps`` steps of ``pause`` seconds, reporting each through kubetrain.reporting to the run's
# status endpoint; with a file name after them, it stops after ``first`` steps until that file exists.
REPORTING = (
    "import pathlib, sys, time\n"
    "from kubetrain.reporting import ProgressReporter\n"
    "steps, pause = int(sys.argv[1]), float(sys.argv[2])\n"
    "first, go = (int(sys.argv[3]), pathlib.Path(sys.argv[4])) if len(sys.argv) > 3 else (steps, None)\n"
    "reporter = ProgressReporter(interval=0.5)\n"
    "for step in range(1, steps + 1):\n"
    "    while go is not None and step > first and not go.exists():\n"
    "        time.sleep(0.1)\n"
    "    loss = 2.5 / step\n"
    "    reporter.report_step(step, steps, {'loss': loss, 'accuracy': round(1 - loss / 3, 4)})\n"
    "    reporter.flush()\n"
    "    print(f'step {step} loss {loss:.4f}', flush=True)\n"
    "    time.sleep(pause)\n"
    "reporter.close()\n"
)

# Reports ``progress`` % and ``eta`` seconds left once, then trains on silently for ``seconds``.
REPORTS_ONCE = (
    "import sys, time\n"
    "from kubetrain.reporting import ProgressReporter\n"
    "progress, eta, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])\n"
    "reporter = ProgressReporter()\n"
    "reporter.report(progress, eta, {'loss': round(3 / (1 + progress / 10), 4)})\n"
    "reporter.close()\n"
    "print(f'reported {progress}%', flush=True)\n"
    "time.sleep(seconds)\n"
)

# Reports once and stays alive and silent (past its progress deadline) until the file ``back`` exists,
# reports again and trains on until the file ``done`` exists: the test says when, having seen each stage,
# so that no stage can come and go unseen on a loaded machine.
STALLS = (
    "import pathlib, sys, time\n"
    "from kubetrain.reporting import ProgressReporter\n"
    "back, done = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])\n"
    "reporter = ProgressReporter()\n"
    "print('epoch 1: waiting for the data loader', flush=True)\n"
    "reporter.report(40, metrics={'loss': 0.7})\n"
    "reporter.flush()\n"
    "while not back.exists():\n"
    "    time.sleep(0.1)\n"
    "print('epoch 1: the data loader is back', flush=True)\n"
    "reporter.report(60, metrics={'loss': 0.5})\n"
    "reporter.flush()\n"
    "while not done.exists():\n"
    "    time.sleep(0.1)\n"
    "reporter.report(100, metrics={'loss': 0.3})\n"
    "reporter.close()\n"
)


def python_run(
    name: str,
    script: str,
    *args: str,
    restart_policy: str = "Never",
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A one-replica PyTorchJob whose process runs ``script`` with this venv's python."""
    container = {"name": "pytorch", "image": "unused", "command": [sys.executable, "-c", script, *args]}
    metadata: dict[str, Any] = {"name": name}
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": metadata,
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "restartPolicy": restart_policy,
                    "template": {"spec": {"containers": [container]}},
                }
            }
        },
    }


def local_job(name: str, steps: int) -> dict[str, Any]:
    return python_run(name, TRAIN, str(steps))


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


def test_a_new_run_appears_in_the_list_and_changes_state_without_a_reload(
    viewer: Viewer, local_client: TrainingClient
) -> None:
    page = viewer.open()
    expect(page.locator("#job-count")).to_have_text("No jobs yet.")
    page.evaluate("window.kept = 'this page was not reloaded'")
    local_client.create_job(local_job("quick", steps=4))
    row(page, "quick").wait_for(timeout=PATIENCE * 1000)
    expect(row(page, "quick").locator(".state")).to_have_text("Running")
    expect(row(page, "quick").locator(".state")).to_have_text("Succeeded")
    assert page.evaluate("window.kept") == "this page was not reloaded"


def open_job(viewer: Viewer, name: str) -> Page:
    """The run's page, reached from its row in the list as a person reaches it. (Opened by its address a
    moment after the run was created, the page may ask before the dashboard's watch has seen the run: it then
    says it cannot read the job.)"""
    page = viewer.open()
    row(page, name).get_by_role("link", name=name).click()
    return page


def cells(page: Page, name: str) -> dict[str, str]:
    tr = row(page, name)
    return {
        "state": tr.locator(".state").inner_text(),
        "progress": tr.locator(".pct").inner_text() if tr.locator(".pct").count() else "-",
        "eta": tr.locator(".eta").inner_text() if tr.locator(".eta").count() else "",
    }


def test_the_list_shows_each_runs_state_progress_and_eta(
    viewer: Viewer, local_client: TrainingClient
) -> None:
    local_client.create_job(python_run("resnet", REPORTS_ONCE, "35", "720", "600"))
    local_client.create_job(python_run("gpt", REPORTS_ONCE, "80", "300", "600"))
    local_client.create_job(python_run("bert", REPORTS_ONCE, "100", "0", "0"))
    local_client.create_job(python_run("broken", "raise SystemExit('bad batch size: 0')"))
    local_client.create_job(local_job("paused", steps=600))
    page = viewer.open()
    local_client.suspend_job("paused")
    expect(row(page, "resnet").locator(".pct")).to_have_text("35%")
    expect(row(page, "gpt").locator(".pct")).to_have_text("80%")
    expect(row(page, "bert").locator(".state")).to_have_text("Succeeded")
    expect(row(page, "broken").locator(".state")).to_have_text("Failed")
    expect(row(page, "paused").locator(".state")).to_have_text("Suspended")

    shown = {name: cells(page, name) for name in ("resnet", "gpt", "bert", "broken", "paused")}
    assert shown["resnet"]["state"] == "Running" and shown["resnet"]["eta"] in ("ETA 12m", "ETA 11m")
    assert shown["gpt"]["state"] == "Running" and shown["gpt"]["eta"] in ("ETA 5m", "ETA 4m")
    assert shown["bert"] == {"state": "Succeeded", "progress": "100%", "eta": ""}  # finished: no ETA
    assert shown["broken"] == {"state": "Failed", "progress": "-", "eta": ""}  # it never reported
    assert shown["paused"] == {"state": "Suspended", "progress": "-", "eta": ""}
    assert page.locator('tr .bar[role="progressbar"]').count() == 3
    viewer.screenshot("local-list")


def drawn(page: Page, curve: str) -> Any:
    """The chart of one metric (or of ``progress %``) on a job's page; ``data-points``: how many it draws."""
    return page.locator(f"#charts svg[aria-label='{curve} over time']")


def test_a_runs_page_opened_after_several_reports_draws_every_one_then_extends_live(
    viewer: Viewer, local_client: TrainingClient, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    local_client.create_job(python_run("curves", REPORTING, "8", "1.2", "5", str(go)))
    eventually(
        lambda: len(local_client.get_job_progress_history("curves").points) >= 5,
        "the run's first 5 reports in its history",
    )

    page = open_job(viewer, "curves")

    for curve in ("loss", "accuracy", "progress %"):
        expect(drawn(page, curve)).to_have_attribute("data-points", "5")
    expect(page.locator("#metrics")).to_contain_text("loss = 0.5")
    # The training goes on: three more reports, each drawn as the run's state shows it (the state is written
    # once a second, so reports further apart than that are each a point).
    go.touch()
    for curve in ("loss", "accuracy", "progress %"):
        expect(drawn(page, curve)).to_have_attribute("data-points", "8")
    expect(page.locator("#job-state")).to_have_text("Succeeded")
    assert page.locator("#history-error").count() == 0
    losses = [p.metrics["loss"] for p in local_client.get_job_progress_history("curves").points]
    assert losses == [2.5 / step for step in range(1, 9)]
    expect(page.locator("#log-output")).to_contain_text("step 8 loss 0.3125")
    viewer.screenshot("local-job")


def test_a_runs_finding_is_at_the_top_of_its_page_while_it_holds(
    viewer: Viewer, local_client: TrainingClient, tmp_path: Path
) -> None:
    deadline = {"kubetrain.dev/progress-deadline-seconds": "3"}
    back, done = tmp_path / "back", tmp_path / "done"
    local_client.create_job(
        python_run("stalls", STALLS, str(back), str(done), restart_policy="OnFailure", annotations=deadline)
    )
    page = open_job(viewer, "stalls")
    finding = page.locator("#diagnosis .finding")

    expect(finding).to_contain_text("ProgressDeadlineExceeded")
    expect(finding).to_contain_text("PyTorchJob stalls has had no progress report since")
    expect(finding).to_contain_text("(stalls-master-0)")
    expect(page.locator("#job-state")).to_have_text("Stalled")
    top = page.locator("#diagnosis").bounding_box()
    below = page.locator("#progress").bounding_box()
    assert top is not None and below is not None and top["y"] < below["y"]
    viewer.screenshot("local-diagnosis")

    # It reports again: the finding goes while the run still trains (not because it ended).
    back.touch()
    expect(finding).to_have_count(0)
    expect(page.locator("#job-state")).to_have_text("Running")
    done.touch()
    expect(page.locator("#job-state")).to_have_text("Succeeded")
    expect(finding).to_have_count(0)


FAILS = "print('epoch 3', flush=True); print('loss is nan', flush=True); raise SystemExit(1)"


def test_a_failed_runs_first_failure_is_under_its_diagnosis_with_its_exit_code_and_last_lines(
    viewer: Viewer, local_client: TrainingClient
) -> None:
    local_client.create_job(python_run("fails", FAILS))
    page = open_job(viewer, "fails")
    expect(page.locator("#job-state")).to_have_text("Failed")
    panel = page.locator("#first-failure")

    expect(panel).to_contain_text("First failure")
    expect(panel).to_contain_text(
        "master-0 container pytorch exited with code 1 (Error) (pod fails-master-0)"
    )
    expect(panel.locator("pre")).to_have_text("epoch 3\nloss is nan")
    top = page.locator("#first-failure").bounding_box()
    below = page.locator("#progress").bounding_box()
    assert top is not None and below is not None and top["y"] < below["y"]
    viewer.screenshot("local-first-failure")


def test_a_run_none_of_whose_replicas_failed_shows_no_first_failure(
    viewer: Viewer, local_client: TrainingClient
) -> None:
    local_client.create_job(local_job("fine", steps=1))
    page = open_job(viewer, "fine")
    expect(page.locator("#job-state")).to_have_text("Succeeded")

    expect(page.locator("#first-failure")).to_be_hidden()


def test_a_runs_page_shows_its_replicas_conditions_events_and_what_its_training_printed(
    viewer: Viewer, local_client: TrainingClient
) -> None:
    local_client.create_job(local_job("talker", steps=6))
    page = open_job(viewer, "talker")
    expect(page.locator("#job-state")).to_have_text("Running")
    expect(page.locator("#pods tbody tr").first).to_contain_text("master-0")
    expect(page.locator("#log-output")).to_contain_text("step 1 loss 0.5000")
    expect(page.locator("#job-state")).to_have_text("Succeeded")
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


def test_a_run_is_suspended_resumed_and_deleted_from_its_page(
    viewer: Viewer, local_client: TrainingClient
) -> None:
    local_client.create_job(local_job("pausable", steps=600))
    page = open_job(viewer, "pausable")
    expect(page.locator("#job-state")).to_have_text("Running")
    page.click("#suspend")
    expect(page.locator("#confirm")).to_be_visible()
    page.click("#confirm-ok")
    expect(page.locator("#job-state")).to_have_text("Suspended")
    page.click("#resume")
    page.click("#confirm-ok")
    expect(page.locator("#job-state")).to_have_text("Running")
    page.click("#delete")
    page.keyboard.press("Escape")  # the confirmation is cancelled: nothing happens
    expect(page.locator("#job-state")).to_have_text("Running")
    page.click("#delete")
    page.click("#confirm-ok")
    expect(page.locator("#job-status")).to_have_text("This job was deleted.")
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
    expect(page.locator("#job-state")).to_have_text("Succeeded")
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
