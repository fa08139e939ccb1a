"""`kubetrain envtest status` tells whether a run directory has a running control plane."""

from __future__ import annotations

from pathlib import Path

from builders import cli_runner
from kubetrain.cli.main import app


def test_status_of_a_directory_where_nothing_was_started_exits_non_zero(tmp_path: Path) -> None:
    result = cli_runner().invoke(app, ["envtest", "status", "--dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "kube-apiserver" in result.stdout
    assert "not started" in result.stdout


def test_env_without_a_running_envtest_says_how_to_start_one(tmp_path: Path) -> None:
    result = cli_runner().invoke(app, ["envtest", "env", "--dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "kubetrain envtest start --dir" in result.stderr
