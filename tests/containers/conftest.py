"""Fixtures of the containers tier: skipped, with the reason, where podman cannot run the images."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from containers.container_env import why_podman_cannot_run


@pytest.fixture(scope="session")
def podman_works() -> None:
    reason = why_podman_cannot_run()
    if reason is not None:
        pytest.skip(f"containers tier skipped: {reason}")


@pytest.fixture
def state_dir(tmp_path: Path, podman_works: None) -> Iterator[Path]:
    directory = tmp_path / "state"
    directory.mkdir()
    yield directory
