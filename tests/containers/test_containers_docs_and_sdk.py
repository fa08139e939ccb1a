"""docs/quickstart.md's container path runs as written; the SDK's local backend runs a function in podman."""

from __future__ import annotations

from pathlib import Path

import pytest

from containers.container_env import PYTORCH_IMAGE, containers_of
from docs_blocks import QUICKSTART_CONTAINERS, ROOT, docs_env, run_script, sh_blocks
from kubetrain.local.containers import remove_job_containers
from kubetrain.sdk import TrainingClient

pytestmark = [pytest.mark.containers, pytest.mark.slow]

PAGE = ROOT / "docs" / "quickstart.md"


def test_the_quickstart_container_path_runs_as_written(
    tmp_path: Path, state_dir: Path, podman_works: None
) -> None:
    env = docs_env(tmp_path)
    try:
        for script in sh_blocks(PAGE, QUICKSTART_CONTAINERS):
            run = run_script(script, env, timeout=300)
            assert run.returncode == 0, f"{script}\n--- output:\n{run.output}"
    finally:
        remove_job_containers("podman", "pytorch-ddp")  # the finished run keeps them, as cleanPodPolicy None


def test_the_sdk_runs_a_function_in_containers_when_asked_for_podman(
    state_dir: Path, podman_works: None
) -> None:
    def train(parameters: dict[str, float]) -> None:
        import os
        import socket

        print(f"rank {os.environ['RANK']} on {socket.gethostname()} lr {parameters['lr']}")

    client = TrainingClient(backend="local", runtime="podman", state_dir=state_dir)
    try:
        # A PyTorchJob built from a function runs it under torchrun, as upstream: the image needs torch.
        client.create_job(
            name="sdk-podman",
            train_func=train,
            parameters={"lr": 0.1},
            base_image=PYTORCH_IMAGE,
            num_workers=2,
        )
        client.wait_for_job_conditions("sdk-podman", timeout=240, polling_interval=1)
        logs, _ = client.get_job_logs("sdk-podman", is_master=False)
        assert "on sdk-podman-worker-0 lr 0.1" in logs["sdk-podman-worker-0"]  # its hostname: the pod name
    finally:
        client.delete_job("sdk-podman")
    assert containers_of("sdk-podman") == []
