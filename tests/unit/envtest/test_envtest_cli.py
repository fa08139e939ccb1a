"""`kubetrain envtest status` tells whether a run directory has a running control plane; `start --jobset` runs
the JobSet controller with it."""

from __future__ import annotations

from pathlib import Path

from builders import cli_runner
from kubetrain.cli.main import app
from kubetrain.envtest import controlplane


def test_status_of_a_directory_where_nothing_was_started_exits_non_zero(tmp_path: Path) -> None:
    result = cli_runner().invoke(app, ["envtest", "status", "--dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "kube-apiserver" in result.stdout
    assert "not started" in result.stdout


def test_env_without_a_running_envtest_says_how_to_start_one(tmp_path: Path) -> None:
    result = cli_runner().invoke(app, ["envtest", "env", "--dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "kubetrain envtest start --dir" in result.stderr


def test_start_with_jobset_asks_the_control_plane_for_the_jobset_controller(
    tmp_path: Path, start_options: list[controlplane.EnvtestOptions]
) -> None:
    result = cli_runner().invoke(app, ["envtest", "start", "--dir", str(tmp_path), "--jobset"])

    assert result.exit_code == 1
    assert [options.jobset for options in start_options] == [True]


def test_a_state_file_of_an_envtest_with_jobset_lists_its_controller_among_the_components(
    tmp_path: Path,
) -> None:
    state = controlplane.EnvtestState(
        tmp_path,
        "v1.34.4",
        "https://127.0.0.1:1",
        controlplane.Ports(1, 2, 3, 4, 5),
        ["n"],
        0.0,
        {},
        jobset=True,
    )
    (tmp_path / controlplane.STATE_FILE).write_text(state.to_json())

    read = controlplane.EnvtestState.read(tmp_path)

    assert read is not None
    assert read.components[-1] == "jobset-controller"
