"""``runtime`` (SDK) and ``--runtime`` (submit) choose what starts a local run's replicas, and only that."""

from __future__ import annotations

from pathlib import Path

import pytest

from builders import cli_runner
from kubetrain.cli.main import app
from kubetrain.sdk import TrainingClient


def test_a_runtime_is_refused_for_the_kubernetes_backend() -> None:
    with pytest.raises(ValueError, match="use it with backend='local'"):
        TrainingClient(backend="kubernetes", runtime="podman")


def test_an_unknown_runtime_is_refused_naming_the_choices(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="runtime must be one of process, podman, docker, got 'lxc'"):
        TrainingClient(backend="local", runtime="lxc", state_dir=tmp_path)


def test_submit_runtime_without_local_is_a_usage_error(tmp_path: Path) -> None:
    manifest = Path(__file__).resolve().parents[3] / "docs" / "examples" / "hello-job.yaml"
    result = cli_runner().invoke(app, ["submit", str(manifest), "--runtime", "podman"])
    assert result.exit_code == 2
    assert "add --local" in result.output
