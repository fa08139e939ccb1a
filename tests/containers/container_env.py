"""Helpers for the containers tier: whether an engine works here, the images, and the engine's view.

The tier runs under podman (``make podman``) and, where it is installed, docker (``make docker``). The
examples' images are built into podman's storage by ``python tools/images/build.py python pytorch xgboost
mpi`` and copied into docker's by ``tools/containers/docker-load.sh`` (``make test-containers`` does all
of it). Where an engine cannot run, each of its tests is skipped with the reason; where it lacks an
image a test needs, that test is skipped naming the image.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable

import pytest

from waiting import PATIENCE, eventually

PYTHON_IMAGE = "localhost/kubetrain/python:3.11-bookworm"
PYTORCH_IMAGE = "localhost/kubetrain/pytorch:2.13.0"
XGBOOST_IMAGE = "localhost/kubetrain/xgboost:3.2.0"
MPI_IMAGE = "localhost/kubetrain/mpi:openmpi-mpi4py4.1.2"
IMAGES = (PYTHON_IMAGE, PYTORCH_IMAGE, XGBOOST_IMAGE, MPI_IMAGE)
ENGINES = ("podman", "docker")
JOB_LABEL = "kubetrain.io/local-job"
SETUP = {"podman": "make podman", "docker": "make docker"}


def engine(binary: str, *args: str, timeout: float = PATIENCE) -> subprocess.CompletedProcess[str]:
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout, check=False)


def podman(*args: str, timeout: float = PATIENCE) -> subprocess.CompletedProcess[str]:
    return engine("podman", *args, timeout=timeout)


def why_engine_cannot_run(binary: str) -> str | None:
    """None when ``binary`` answers and can run a container of the Python image; otherwise why not."""
    if shutil.which(binary) is None:
        return f"{binary} is not installed ({SETUP[binary]} installs it)"
    info = engine(binary, "info")
    if info.returncode != 0:
        return f"{binary} info fails: {(info.stderr or info.stdout).strip().splitlines()[-1:]}"
    missing = why_image_missing(binary, PYTHON_IMAGE)
    if missing is not None:
        return missing
    probe = engine(binary, "run", "--rm", "--network", "none", PYTHON_IMAGE, "python", "-c", "print('ok')")
    if probe.returncode != 0 or probe.stdout.strip() != "ok":
        return f"{binary} cannot run a container here: {(probe.stderr or probe.stdout).strip()[-300:]}"
    return None


def why_image_missing(binary: str, image: str) -> str | None:
    if engine(binary, "image", "inspect", image).returncode == 0:
        return None
    return f"{image} is not in {binary}'s storage (make test-containers builds and loads it)"


def require_image(binary: str, image: str) -> None:
    """Skip the test, naming the image, where the engine does not hold it."""
    reason = why_image_missing(binary, image)
    if reason is not None:
        pytest.skip(reason)


def containers_of(job_name: str, binary: str = "podman") -> list[str]:
    """Names of every container of the job's runs, running or not."""
    listed = engine(
        binary, "ps", "--all", "--filter", f"label={JOB_LABEL}={job_name}", "--format", "{{.Names}}"
    )
    return sorted(listed.stdout.split())


def running_containers_of(job_name: str, binary: str = "podman") -> list[str]:
    listed = engine(binary, "ps", "--filter", f"label={JOB_LABEL}={job_name}", "--format", "{{.Names}}")
    return sorted(listed.stdout.split())


def network_exists(job_name: str, binary: str = "podman") -> bool:
    return engine(binary, "network", "inspect", f"kubetrain-{job_name}").returncode == 0


def wait_for(condition: Callable[[], bool], what: str) -> None:
    eventually(condition, what)
