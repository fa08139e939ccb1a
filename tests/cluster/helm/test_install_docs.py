"""docs/install.md runs as written: every ```sh block, in order, on a control plane of its own, with the
pinned helm and envtest's kubectl on PATH and a scratch HOME (so ``~/...`` paths stay in the test)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helm_chart import ROOT, build_helm, kubectl

from docs_blocks import sh_blocks as page_sh_blocks
from kubetrain import __version__
from kubetrain.envtest import binaries, controlplane

# The page's blocks run in one fixture: `make image` (a build of about 1-2 minutes when src/ changed since the
# last one), a pip install of the package and the helm and kustomize installs, beyond the default 300 s.
pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(1200)]

DOC = ROOT / "docs" / "install.md"
DEV_VENV_BIN = ROOT / ".venv" / "bin"


@dataclass(frozen=True)
class BlockRun:
    script: str
    returncode: int
    output: str


def sh_blocks() -> list[str]:
    return page_sh_blocks(DOC)


@pytest.fixture(scope="module")
def docs_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Its own control plane: the doc installs CRDs and cluster-wide RBAC, which other tests' cluster owns."""
    run_dir = tmp_path_factory.mktemp("envtest-docs")
    state = controlplane.start(run_dir)
    try:
        yield state.kubeconfig
    finally:
        controlplane.stop(run_dir)


@pytest.fixture(scope="module")
def runs(docs_cluster: Path, tmp_path_factory: pytest.TempPathFactory) -> list[BlockRun]:
    home = tmp_path_factory.mktemp("home")
    tools = home / "tools"
    tools.mkdir()
    (tools / "helm").symlink_to(build_helm())
    (tools / "kubectl").symlink_to(binaries.locate().kubectl)
    real_cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    env = {
        **os.environ,
        "HOME": str(home),
        "PATH": os.pathsep.join([str(tools), str(DEV_VENV_BIN), os.environ["PATH"]]),
        "KUBECONFIG": str(docs_cluster),
        # Already-downloaded wheels and the Go build cache stay usable with the scratch HOME.
        "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR", str(real_cache / "pip")),
        "XDG_CACHE_HOME": str(real_cache),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    env.pop("VIRTUAL_ENV", None)
    done: list[BlockRun] = []
    for script in sh_blocks():
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        done.append(BlockRun(script, result.returncode, result.stdout + result.stderr))
        if result.returncode != 0:
            break  # later blocks build on this one
    return done


def test_the_install_guide_has_commands_for_helm_kustomize_and_pip() -> None:
    commands = "\n".join(sh_blocks())
    missing = [c for c in ("helm install", "kubectl apply --server-side", "pip install") if c not in commands]
    assert not missing


def test_every_command_in_the_install_guide_succeeds(runs: list[BlockRun]) -> None:
    failed = [run for run in runs if run.returncode != 0]
    assert not failed, f"docs/install.md block failed:\n{failed[0].script}\n--- output:\n{failed[0].output}"
    assert len(runs) == len(sh_blocks())


def output_of(runs: list[BlockRun], command: str) -> str:
    return next(run.output for run in runs if command in run.script)


def test_make_image_builds_the_operator_image_of_the_packages_version(runs: list[BlockRun]) -> None:
    # The block's output is its stdout, then its stderr (the build's log): the label is a line of its own.
    assert __version__ in output_of(runs, "podman image inspect").splitlines()


def test_the_helm_install_serves_the_v2beta1_mpijob_by_default(runs: list[BlockRun]) -> None:
    assert output_of(runs, "kubectl get crd mpijobs.kubeflow.org").startswith("v2beta1\n")


def test_the_helm_install_shows_the_image_it_was_given(runs: list[BlockRun]) -> None:
    assert "repository: registry.example.org/kubetrain" in output_of(runs, "helm -n kubeflow get values")


def test_the_kustomize_install_leaves_the_operator_deployment(
    runs: list[BlockRun], docs_cluster: Path
) -> None:
    assert runs
    done = kubectl(docs_cluster, "-n", "kubeflow", "get", "deployment", "training-operator", "-o", "name")
    assert done.stdout.strip() == "deployment.apps/training-operator"


def test_the_pip_installed_cli_plans_the_example(runs: list[BlockRun]) -> None:
    assert "name: pytorch-ddp-worker-1" in output_of(runs, "kubetrain plan examples/pytorch-ddp/job.yaml")
