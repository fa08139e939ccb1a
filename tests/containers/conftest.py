"""Fixtures of the containers tier: skipped, with the reason, where podman cannot run the images."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from containers.container_env import why_podman_cannot_run
from kubetrain.local.containers import remove_job_containers


@pytest.fixture(scope="session")
def podman_works() -> None:
    reason = why_podman_cannot_run()
    if reason is not None:
        pytest.skip(f"containers tier skipped: {reason}")


@pytest.fixture
def state_dir(tmp_path: Path, podman_works: None) -> Iterator[Path]:
    """A state directory; afterwards, the containers and networks its runs kept are removed."""
    directory = tmp_path / "state"
    directory.mkdir()
    yield directory
    for run in directory.iterdir():
        if run.is_dir():
            remove_job_containers("podman", run.name)
