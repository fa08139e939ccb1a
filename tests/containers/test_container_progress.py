"""``kubetrain run --runtime podman|docker`` serves the status endpoint where the job network's containers
reach it: at the network's gateway, by the engine's name for the host, with each replica's CA and token
mounted where Kubeflow Trainer v2.3 mounts them, so that Trainer's own status script reports unchanged."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from containers.test_container_runs import python_job
from local.local_run import KUBETRAIN, REPO, SCRIPTS, kubetrain_run, write_manifest

pytestmark = [pytest.mark.containers, pytest.mark.slow]

REPORTER = (SCRIPTS / "report_stdlib.py").read_text()
"""The local tier's standard-library reporter, run as ``python -c`` in the Python base image."""
HOST_NAMES = {"podman": "host.containers.internal", "docker": "host.docker.internal"}
TRAINER_SCRIPT = (REPO / "tests" / "upstream" / "trainer" / "status_update.py").read_text()
"""Kubeflow Trainer v2.3.0's test/e2e/testdata/status_update.py, byte for byte, run as ``python -c``."""


def test_a_container_reports_with_the_stdlib_over_the_engines_host_name_and_its_mounted_files(
    tmp_path: Path, state_dir: Path, runtime: str
) -> None:
    # Worker-only, so the job succeeds once both have reported.
    job = python_job("contained", {"Worker": (2, REPORTER)})
    container = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    container["args"] = ["--show", "--reports", "25:40:0.6", "75:10:0.3"]

    run = kubetrain_run(write_manifest(tmp_path, job), state_dir, extra=("--runtime", runtime))

    assert run.returncode == 0, run.stderr[-3000:]
    host = HOST_NAMES[runtime]
    path = "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs/contained/status"
    for worker in ("worker-0", "worker-1"):
        shown, *reports = run.lines_of(worker)
        assert re.fullmatch(
            rf"variables: https://{host}:\d+{path} /var/run/secrets/kubeflow/trainer/ca.crt "
            "/var/run/secrets/kubeflow/trainer/token",
            shown,
        ), shown
        assert reports == ["report 1: HTTP 200", "report 2: HTTP 200"]
    assert run.job_status["trainerStatus"]["progressPercentage"] == 75
    listing = subprocess.run(
        [KUBETRAIN, "get", "--local", "--state-dir", str(state_dir)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert re.match(r"contained\s+PyTorchJob\s+Succeeded\s+75%\s+-\s+", listing[1]), listing


def test_trainer_v2_3s_own_status_script_reports_from_a_container_with_the_mounted_token_and_ca(
    tmp_path: Path, state_dir: Path, runtime: str
) -> None:
    job = python_job("trainer-script", {"Worker": (1, TRAINER_SCRIPT)})

    run = kubetrain_run(write_manifest(tmp_path, job), state_dir, extra=("--runtime", runtime))

    assert run.returncode == 0, run.stderr[-3000:]
    [said] = run.lines_of("worker-0")
    assert said.startswith("Success updating trainer status: 200 "), said
    status = run.job_status["trainerStatus"]
    assert (status["progressPercentage"], status["estimatedRemainingSeconds"]) == (42, 120)
    assert status["metrics"] == [{"name": "loss", "value": "0.123"}, {"name": "accuracy", "value": "0.95"}]
