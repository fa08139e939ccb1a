"""An image build installs from the wheels the host's pip looks at first (``PIP_FIND_LINKS``): on a machine
that carries a CPU build of torch there, the PyTorch image gets it too, as the venv does."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest

from image_recipes import images, podman_problem

pytestmark = pytest.mark.timeout(900)

PROBE_WHEEL = "kt_probe-1.0-py3-none-any.whl"
# No network: the probe needs none, and on podman's default one netavark would leave its firewall chains.
PODMAN_RUN = ["podman", "run", "--rm", "--network", "none", *images.PODMAN_RUN_FLAGS]


def write_probe_wheel(directory: Path) -> None:
    """A wheel no index serves, so only the find-links directory can provide it."""
    info = "kt_probe-1.0.dist-info"
    files = {
        "kt_probe/__init__.py": "FROM = 'find-links'\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: kt-probe\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(directory / PROBE_WHEEL, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)


def test_a_build_installs_a_wheel_only_the_hosts_find_links_directory_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = podman_problem()
    if problem is not None:
        pytest.skip(problem)
    links = tmp_path / "links"
    links.mkdir()
    write_probe_wheel(links)
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.setattr(images, "WHEELHOUSE", tmp_path / "wheelhouse")
    containerfile = tmp_path / "Containerfile"
    containerfile.write_text(
        "ARG BASE\nFROM ${BASE}\nRUN python3 -m venv /v && /v/bin/pip install --no-index kt-probe==1.0\n"
    )
    recipe = images.Recipe(
        name="find-links-probe",
        tag="test",
        containerfile=str(containerfile),
        bases=("python",),
        context=str(tmp_path),
        pip_cache=True,
    )
    images.build("python")
    try:
        images._build_containerfile(recipe, "test", rebuild=True)
        probe = subprocess.run(
            [*PODMAN_RUN, recipe.reference, "/v/bin/python", "-c", "import kt_probe; print(kt_probe.FROM)"],
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        subprocess.run(["podman", "rmi", "--force", recipe.reference], capture_output=True, check=False)
    assert probe.stdout.strip() == "find-links", probe.stderr
