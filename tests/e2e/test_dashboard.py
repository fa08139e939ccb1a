"""The Jobs view on the real node: while the DDP example trains (its image, its script: rank 0 reports
progress and loss through the in-cluster status endpoint the overlay turns on), its page shows the lines it
writes (the kubelet's log stream, followed through the API server, as ``kubetrain logs -f`` reads it) and
curves of everything it reported, from before the page opened (the history ConfigMap) and live; the list
shows its progress and ETA."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from playwright.sync_api import Page, expect

from browser_support import Viewer
from dashboard_process import running_dashboard
from e2e.realpods import RealCluster, wait_until
from kubetrain.envtest import realnode
from kubetrain.sdk.client import TrainingClient
from waiting import PATIENCE

# The PyTorch image (4.4 GB) is imported into the node here when the node did not start with it: minutes.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pytorch-ddp" / "job.yaml"
JOB = "pytorch-ddp"
STEPS = 80
EARLIER_REPORTS = 3
"""Reports in the job's history before its page is opened (rank 0 reports every 5 s; the operator writes the
history 2 s after the first report, then every 12 s)."""
START_TIMEOUT_SECONDS = 420.0


def slowed_example() -> dict[str, Any]:
    """examples/pytorch-ddp/job.yaml, its image and command unchanged, a second a step: time to look."""
    job: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        [container] = spec["template"]["spec"]["containers"]
        args = container["args"]
        args[args.index("--steps") + 1] = str(STEPS)
        args += ["--step-seconds", "1"]
    return job


def points(page: Page, curve: str) -> int:
    drawn = page.locator(f"#charts svg[aria-label='{curve} over time']")
    return int(drawn.get_attribute("data-points") or 0) if drawn.count() else 0


def test_a_training_jobs_page_shows_its_output_and_its_curves_live_while_it_trains(
    operator: RealCluster, namespace: str, viewer_for: Callable[[str], Viewer], tmp_path: Path
) -> None:
    realnode.load_images(realnode.node_paths(operator.run_dir), ["pytorch"])
    operator.api.create(f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs", slowed_example())
    client = TrainingClient(config_file=str(operator.kubeconfig), namespace=namespace)
    earlier = wait_until(
        f"{EARLIER_REPORTS} reports in the job's history",
        lambda: len(client.get_job_progress_history(JOB, job_kind="PyTorchJob").points) >= EARLIER_REPORTS,
        START_TIMEOUT_SECONDS,
    )
    assert earlier
    reported = len(client.get_job_progress_history(JOB, job_kind="PyTorchJob").points)

    arguments = ["--no-local", "--namespace", namespace, "--kubeconfig", str(operator.kubeconfig)]
    with running_dashboard(*arguments, log=tmp_path / "dashboard.log") as dashboard:
        viewer = viewer_for(dashboard.url)
        page = viewer.open(f"#/jobs/cluster/{namespace}/pytorchjobs.v1/{JOB}")
        expect(page.locator("#job-state")).to_have_text("Running")
        expect(page.locator("#pods tbody tr")).to_have_count(3)
        expect(page.locator("#pods")).to_contain_text("real-node-0")

        # Every report from before the page opened is drawn, then each later one as it comes.
        wait_until("the history drawn", lambda: points(page, "loss") >= reported, PATIENCE)
        opened_with = points(page, "loss")
        # Both curves drawn from the same reports (a report may arrive between reading one and the other).
        assert points(page, "progress %") >= opened_with
        output = page.locator("#log-output")
        expect(output).to_contain_text("joined the process group")
        expect(output).to_contain_text(re.compile(r"step \d+ loss"))
        lines = output.locator(".line").count()
        wait_until("two more reports drawn", lambda: points(page, "loss") >= opened_with + 2, PATIENCE)
        assert output.locator(".line").count() > lines, "the log is followed, not read once"
        expect(page.locator("#metrics")).to_contain_text("loss = ")
        assert page.locator("#job-state").text_content() == "Running"
        assert page.locator("#history-error").count() == 0
        viewer.screenshot("real-node-job")

        page.goto(viewer.base)
        row = page.locator(f'tr[data-id="cluster/{namespace}/pytorchjobs.v1/{JOB}"]')
        expect(row.locator(".state")).to_have_text("Running")
        expect(row.locator(".pct")).to_have_text(re.compile(r"^\d+%$"))
        expect(row.locator(".eta")).to_have_text(re.compile(r"^ETA \d+(s|m)$"))
        assert dashboard.stop() == 0  # the job trains on until its namespace goes: it has shown what it must
