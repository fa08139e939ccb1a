"""What the envtest CLI tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubetrain.envtest import controlplane


@pytest.fixture
def start_options(monkeypatch: pytest.MonkeyPatch) -> list[controlplane.EnvtestOptions]:
    """The options each ``controlplane.start`` was asked for; the start itself fails at once (exit code 1)."""
    asked: list[controlplane.EnvtestOptions] = []

    def start(run_dir: Path, options: controlplane.EnvtestOptions, log: object) -> controlplane.EnvtestState:
        asked.append(options)
        raise controlplane.EnvtestError("stopped here")

    monkeypatch.setattr(controlplane, "start", start)
    return asked
