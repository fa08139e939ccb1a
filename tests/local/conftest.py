"""Fixtures of the local tier."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    directory = tmp_path / "state"
    directory.mkdir()
    yield directory
