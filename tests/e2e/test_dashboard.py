"""The Jobs view on the real node: a job's page shows the lines its training writes, live, while it trains
(the kubelet's log stream, followed through the API server, as ``kubetrain logs -f`` reads it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from browser_support import Viewer
from dashboard_process import running_dashboard
from e2e.realpods import TEST_IMAGE, RealCluster

pytestmark = pytest.mark.e2e

TRAIN = (
    "import time\n"
    "for step in range(40):\n"
    "    print(f'step {step} loss {1 / (step + 1):.4f}', flush=True)\n"
    "    time.sleep(1)\n"
)


def talking_job() -> dict[str, Any]:
    container = {
        "name": "pytorch",
        "image": TEST_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["python", "-c", TRAIN],
    }
    master = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "talker"},
        "spec": {"pytorchReplicaSpecs": {"Master": master}},
    }


def test_a_jobs_page_shows_its_training_output_live_while_it_trains(
    operator: RealCluster, namespace: str, viewer_for: Callable[[str], Viewer], tmp_path: Path
) -> None:
    operator.api.create(f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs", talking_job())
    arguments = ["--no-local", "--namespace", namespace, "--kubeconfig", str(operator.kubeconfig)]
    with running_dashboard(*arguments, log=tmp_path / "dashboard.log") as dashboard:
        viewer = viewer_for(dashboard.url)
        page = viewer.open(f"#/jobs/cluster/{namespace}/pytorchjobs.v1/talker")
        expect(page.locator("#pods tbody tr")).to_contain_text("real-node-0", timeout=120_000)
        output = page.locator("#log-output")
        expect(output).to_contain_text("step 2 loss", timeout=120_000)
        assert page.locator("#job-state").text_content() == "Running"
        expect(output).to_contain_text("step 8 loss", timeout=30_000)  # followed, not reloaded
        assert page.locator("#job-state").text_content() == "Running"
        viewer.screenshot("real-node-job")
        expect(page.locator("#job-state")).to_have_text("Succeeded", timeout=120_000)
        expect(output).to_contain_text("step 39 loss")
        assert dashboard.stop() == 0
