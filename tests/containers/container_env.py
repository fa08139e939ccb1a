"""Helpers for the containers tier: whether podman works here, the images, and the engine's view.

The tier needs a working podman (``make podman``) and the examples' images, built into podman's storage
by ``python tools/images/build.py python pytorch xgboost mpi`` (``make test-containers`` does both). Where
either is missing, every test is skipped with the reason.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable

PYTHON_IMAGE = "localhost/kubetrain/python:3.11-bookworm"
PYTORCH_IMAGE = "localhost/kubetrain/pytorch:2.13.0"
XGBOOST_IMAGE = "localhost/kubetrain/xgboost:3.2.0"
MPI_IMAGE = "localhost/kubetrain/mpi:openmpi-mpi4py4.1.2"
IMAGES = (PYTHON_IMAGE, PYTORCH_IMAGE, XGBOOST_IMAGE, MPI_IMAGE)
JOB_LABEL = "kubetrain.io/local-job"


def podman(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, check=False)


def why_podman_cannot_run() -> str | None:
    """None when podman answers, has the tier's images and can run a container; otherwise why not."""
    if shutil.which("podman") is None:
        return "podman is not installed (make podman installs it)"
    info = podman("info")
    if info.returncode != 0:
        return f"podman info fails: {(info.stderr or info.stdout).strip().splitlines()[-1:]}"
    missing = [image for image in IMAGES if podman("image", "exists", image).returncode != 0]
    if missing:
        return f"images not built: {', '.join(missing)} (make test-containers builds them)"
    probe = podman("run", "--rm", "--network", "none", PYTHON_IMAGE, "python", "-c", "print('ok')")
    if probe.returncode != 0 or probe.stdout.strip() != "ok":
        return f"podman cannot run a container here: {(probe.stderr or probe.stdout).strip()[-300:]}"
    return None


def containers_of(job_name: str) -> list[str]:
    """Names of every container of the job's runs, running or not."""
    listed = podman("ps", "--all", "--filter", f"label={JOB_LABEL}={job_name}", "--format", "{{.Names}}")
    return sorted(listed.stdout.split())


def running_containers_of(job_name: str) -> list[str]:
    listed = podman("ps", "--filter", f"label={JOB_LABEL}={job_name}", "--format", "{{.Names}}")
    return sorted(listed.stdout.split())


def network_exists(job_name: str) -> bool:
    return podman("network", "exists", f"kubetrain-{job_name}").returncode == 0


def wait_for(condition: Callable[[], bool], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.3)
    raise AssertionError("timed out waiting")
