"""A TrainJob's nodes in their images (``--runtime podman|docker``): each container named and reachable as
its JobSet pod (``<trainjob>-node-0-0.<trainjob>``), the rendezvous Trainer's torch policy injects."""

from __future__ import annotations

from pathlib import Path

import pytest

from containers.container_env import PYTORCH_IMAGE, require_image
from local.local_run import REPO, kubetrain_run

pytestmark = pytest.mark.containers


def test_a_torch_distributed_trainjob_trains_in_its_image_finding_node_0_by_its_jobset_name(
    state_dir: Path, runtime: str
) -> None:
    require_image(runtime, PYTORCH_IMAGE)
    run = kubetrain_run(REPO / "examples/trainjob/torch-ddp.yaml", state_dir, extra=("--runtime", runtime))
    assert run.returncode == 0 and run.condition("Succeeded") is not None, run.stderr[-3000:]
    assert "training finished" in run.lines_of("node-0")
    joined = "joined the process group via torch-ddp-node-0-0.torch-ddp:29500"
    assert any(joined in line for line in run.lines_of("node-1")), run.stdout[-3000:]
