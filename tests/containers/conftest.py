"""Fixtures of the containers tier: each engine's tests, skipped with the reason where it cannot run."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from containers.container_env import why_engine_cannot_run
from kubetrain.local.containers import remove_job_containers


@cache
def _why_not(binary: str) -> str | None:
    return why_engine_cannot_run(binary)


@pytest.fixture(params=["podman", "docker"])
def runtime(request: pytest.FixtureRequest) -> str:
    """The engine a test runs its job under (``--runtime``)."""
    binary = str(request.param)
    reason = _why_not(binary)
    if reason is not None:
        pytest.skip(f"containers tier under {binary} skipped: {reason}")
    return binary


@pytest.fixture
def podman_works() -> None:
    reason = _why_not("podman")
    if reason is not None:
        pytest.skip(f"containers tier skipped: {reason}")


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    """A state directory; afterwards, the containers and networks its runs kept are removed."""
    directory = tmp_path / "state"
    directory.mkdir()
    yield directory
    for run in directory.iterdir():
        if run.is_dir():
            for binary in ("podman", "docker"):
                if _why_not(binary) is None:
                    remove_job_containers(binary, run.name)
