"""The operator image (`make image`) as the Helm chart and the kustomize base run it: as a non-root uid,
on a read-only root filesystem, and of the same version as the package.

The image is built by tools/images/build.py (seconds when it is current). Without a working podman there
is nothing to run it with: the tests skip, saying why.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from image_recipes import BUILD_SCRIPT, images, podman_problem, reference
from kubetrain import __version__
from kubetrain.envtest.crds import install_crds
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.pytest_plugin import EnvtestCluster
from waiting import PATIENCE, eventually

ROOT = Path(__file__).resolve().parents[2]

# A cold build makes the Debian base first (mmdebstrap, about 2 minutes here) and downloads the operator's
# dependencies from PyPI.
pytestmark = pytest.mark.timeout(1800)


@pytest.fixture(scope="module")
def operator_image() -> str:
    problem = podman_problem()
    if problem is not None:
        pytest.skip(problem)
    done = subprocess.run(
        [sys.executable, str(BUILD_SCRIPT), "operator"],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, f"building the operator image failed:\n{done.stdout}\n{done.stderr}"
    return reference("operator")


def run_in(image: str, *command: str) -> str:
    """Runs a command in the image with a read-only root filesystem and its own user, as the chart does."""
    # No network: it needs none, and a podman network leaves netavark's chains and state on the host.
    podman = ["podman", "run", "--rm", "--network", "none", *images.PODMAN_RUN_FLAGS, "--read-only"]
    podman += ["--entrypoint", command[0]]
    done = subprocess.run(
        [*podman, image, *command[1:]],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )
    assert done.returncode == 0, f"{command} in {image} failed:\n{done.stderr}"
    return done.stdout


def test_the_operator_image_is_tagged_with_the_package_version(operator_image: str) -> None:
    assert operator_image == f"localhost/kubetrain/operator:{__version__}"


def test_the_operator_image_prints_the_package_version_on_a_read_only_root(operator_image: str) -> None:
    assert run_in(operator_image, "kubetrain", "version").strip() == __version__


def test_the_operator_image_runs_as_uid_65532(operator_image: str) -> None:
    assert run_in(operator_image, "id", "-u").strip() == "65532"


VERSION_LABEL = '{{index .Labels "org.opencontainers.image.version"}}'


def test_the_operator_image_is_labelled_with_the_package_version(operator_image: str) -> None:
    label = subprocess.run(
        ["podman", "image", "inspect", "--format", VERSION_LABEL, operator_image],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=True,
    ).stdout.strip()
    assert label == __version__


def test_the_operator_image_starts_the_operator(operator_image: str) -> None:
    entrypoint = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{json .Config.Entrypoint}}", operator_image],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=True,
    ).stdout.strip()
    assert entrypoint == '["kubetrain","operator"]'


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_ready(url: str, container: str) -> None:
    def ready() -> bool:
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(url, timeout=PATIENCE).status_code == 200
        return False  # not listening yet

    try:
        eventually(ready, f"{url} answering 200")
    except AssertionError as error:
        logs = subprocess.run(["podman", "logs", container], capture_output=True, text=True, check=False)
        raise AssertionError(f"{error}; the operator's log:\n{logs.stdout}{logs.stderr}") from None


def test_the_operator_image_reconciles_a_cluster_writing_nothing_to_its_read_only_root(
    operator_image: str, envtest: EnvtestCluster, kube_api: KubeApi, tmp_path: Path
) -> None:
    install_crds(kube_api, ROOT / "manifests" / "crds")
    # The container's uid reads the kubeconfig, which envtest writes for its own user only.
    kubeconfig = tmp_path / "kubeconfig"
    shutil.copyfile(envtest.kubeconfig, kubeconfig)
    kubeconfig.chmod(0o644)
    container = f"kubetrain-operator-image-test-{os.getpid()}"
    health = free_port()
    podman = ["podman", "run", "--detach", "--name", container, *images.PODMAN_RUN_FLAGS, "--read-only"]
    podman += ["--network", "host", "--volume", f"{kubeconfig}:/etc/kubetrain/kubeconfig:ro"]
    flags = [
        "--kubeconfig",
        "/etc/kubetrain/kubeconfig",
        "--metrics-bind-address",
        f"127.0.0.1:{free_port()}",
    ]
    flags += ["--health-probe-bind-address", f"127.0.0.1:{health}"]
    subprocess.run(
        [*podman, operator_image, *flags], capture_output=True, text=True, timeout=PATIENCE, check=True
    )
    try:
        wait_ready(f"http://127.0.0.1:{health}/readyz", container)
        diff = subprocess.run(
            ["podman", "diff", container], capture_output=True, text=True, timeout=PATIENCE, check=True
        )
    finally:
        subprocess.run(["podman", "rm", "--force", container], capture_output=True, timeout=60, check=False)
    # Only the kubeconfig's mount point and the directories holding it differ from the image.
    changed = {line.split(maxsplit=1)[1] for line in diff.stdout.splitlines()}
    assert changed <= {"/etc", "/etc/kubetrain", "/etc/kubetrain/kubeconfig"}
