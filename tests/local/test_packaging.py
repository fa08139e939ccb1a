"""The distributions ``python -m build`` makes: what the wheel holds and declares, and that it installs into a
fresh virtualenv where ``kubetrain --help``, ``kubetrain plan`` and ``kubetrain run`` work.

Examples are not shipped: their training scripts need the frameworks of the ``examples`` extra and are read
from a checkout (``kubetrain run examples/...``); the wheel is the library, the CLI and the operator.
"""

from __future__ import annotations

import email
import os
import subprocess
import sys
import tarfile
import tomllib
import venv
import zipfile
from collections.abc import Iterator
from email.message import Message
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.local, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
# What pip needs to install the wheel's dependencies, from the pip cache when it has them.
INSTALL_TIMEOUT = 600


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An sdist and a wheel built from this checkout (the wheel is built from the sdist, as on PyPI)."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(REPO)],
        check=True,
        capture_output=True,
        timeout=INSTALL_TIMEOUT,
    )
    return out


@pytest.fixture(scope="module")
def wheel(dist: Path) -> Path:
    [path] = dist.glob("kubetrain-*.whl")
    return path


@pytest.fixture(scope="module")
def wheel_files(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


@pytest.fixture(scope="module")
def metadata(wheel: Path, wheel_files: list[str]) -> Message:
    [name] = [f for f in wheel_files if f.endswith(".dist-info/METADATA")]
    with zipfile.ZipFile(wheel) as archive:
        return email.message_from_bytes(archive.read(name))


@pytest.fixture(scope="module")
def fresh_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A new virtualenv with only the wheel and the dependencies it declares; its bin directory."""
    root = tmp_path_factory.mktemp("fresh-venv")
    venv.create(root, with_pip=True)
    bin_dir = root / "bin"
    install = subprocess.run(
        [bin_dir / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
        check=False,
    )
    assert install.returncode == 0, install.stderr
    yield bin_dir


def run_in(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a command of the fresh virtualenv with only it on PATH ahead of the system, as an activated
    venv would."""
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        [str(bin_dir / args[0]), *args[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=240
    )


def test_the_build_makes_one_sdist_and_one_wheel(dist: Path) -> None:
    assert sorted(p.name for p in dist.iterdir()) == [
        f"kubetrain-{VERSION}-py3-none-any.whl",
        f"kubetrain-{VERSION}.tar.gz",
    ]


def test_the_wheel_ships_the_package_and_its_py_typed_marker(wheel_files: list[str]) -> None:
    assert "kubetrain/py.typed" in wheel_files
    assert "kubetrain/cli/main.py" in wheel_files


def test_the_wheel_ships_no_tests_examples_or_caches(wheel_files: list[str]) -> None:
    top_level = {name.split("/")[0] for name in wheel_files}
    assert top_level == {"kubetrain", f"kubetrain-{VERSION}.dist-info"}
    assert not [name for name in wheel_files if "__pycache__" in name or name.endswith(".pyc")]


def test_the_sdist_ships_sources_but_no_caches_or_build_output(dist: Path) -> None:
    [sdist] = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
    assert f"kubetrain-{VERSION}/src/kubetrain/py.typed" in names
    unwanted = ("__pycache__", ".pyc", ".mypy_cache", ".venv/", "/build/", "/dist/")
    assert not [name for name in names if any(part in name for part in unwanted)]


def test_the_metadata_declares_the_runtime_dependencies(metadata: Message) -> None:
    unconditional = [r.split(";")[0] for r in metadata.get_all("Requires-Dist", []) if "extra ==" not in r]
    names = {r.split("<")[0].split(">")[0].split("=")[0].strip() for r in unconditional}
    assert {"pydantic", "pyyaml", "typer", "lightkube", "httpx", "psutil"} <= names


def extra(metadata: Message, name: str) -> list[str]:
    return [
        r.split(";")[0].strip() for r in metadata.get_all("Requires-Dist", []) if f'extra == "{name}"' in r
    ]


def test_the_examples_frameworks_are_an_optional_extra_with_torch_in_one_of_its_own(
    metadata: Message,
) -> None:
    """`make run` installs the ``pytorch`` extra alone (the DDP example's torch and numpy); the tiers install
    ``examples``, every example's framework, which includes it."""
    assert {"examples", "pytorch"} <= set(metadata.get_all("Provides-Extra", []))
    assert [r.split("=")[0] for r in extra(metadata, "pytorch")] == ["torch", "numpy"]
    assert "kubetrain[pytorch]" in extra(metadata, "examples")


def test_the_metadata_names_license_python_and_classifiers(metadata: Message) -> None:
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["Requires-Python"] == ">=3.11"
    assert "Typing :: Typed" in metadata.get_all("Classifier", [])


def test_the_wheel_declares_the_kubetrain_console_script(wheel: Path, wheel_files: list[str]) -> None:
    [name] = [f for f in wheel_files if f.endswith(".dist-info/entry_points.txt")]
    with zipfile.ZipFile(wheel) as archive:
        entry_points = archive.read(name).decode()
    assert "[console_scripts]\nkubetrain = kubetrain.cli.main:app" in entry_points


def test_kubetrain_help_runs_from_the_fresh_virtualenv(fresh_venv: Path, tmp_path: Path) -> None:
    result = run_in(fresh_venv, "kubetrain", "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "run" in result.stdout and "plan" in result.stdout


def test_the_fresh_install_imports_kubetrain_from_the_venv_not_the_checkout(
    fresh_venv: Path, tmp_path: Path
) -> None:
    result = run_in(fresh_venv, "python", "-c", "import kubetrain; print(kubetrain.__file__)", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()).is_relative_to(fresh_venv.parent)


def test_kubetrain_plan_prints_an_example_jobs_replicas(fresh_venv: Path) -> None:
    result = run_in(fresh_venv, "kubetrain", "plan", "examples/pytorch-ddp/job.yaml", cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert "name: pytorch-ddp-worker-1" in result.stdout


def test_kubetrain_run_trains_a_tiny_job_to_succeeded(fresh_venv: Path, tmp_path: Path) -> None:
    ranks = "import os; print('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'])"
    replica = {
        "restartPolicy": "Never",
        "template": {
            "spec": {
                "containers": [
                    {"name": "pytorch", "image": "python:3.11", "command": ["python", "-c", ranks]}
                ]
            }
        },
    }
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "tiny"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, **replica},
                "Worker": {"replicas": 1, **replica},
            }
        },
    }
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(job))
    result = run_in(
        fresh_venv, "kubetrain", "run", str(manifest), "--state-dir", str(tmp_path / "state"), cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "rank 1 of 2" in result.stdout
