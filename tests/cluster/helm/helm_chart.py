"""Running helm and kubectl on charts/kubetrain for the chart tests.

(A uniquely named module rather than a conftest: mypy sees every test directory as one tree.)
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from kubetrain.envtest import binaries
from waiting import PATIENCE

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "kubetrain"
# manifests/base in namespace kubeflow
STANDALONE = ROOT / "manifests" / "overlays" / "standalone"
RELEASE = "kubetrain"
RELEASE_NAMESPACE = "kubeflow"


def build_helm() -> Path:
    """helm pinned by tools/helm, built on first use (``make helm-build`` does the same)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "helm" / "build.py")],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, f"building helm failed:\n{done.stderr}"
    return Path(done.stdout.strip())


HUNG = 2 * PATIENCE
"""Seconds after which a helm or kubectl run is taken to hang: past a ``kubectl wait --timeout=PATIENCE``."""


def run(command: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=HUNG, check=False)


def documents(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def sourced_documents(text: str) -> list[tuple[str, dict[str, Any]]]:
    """``helm template`` output as (template path, document): helm heads each with ``# Source: <path>``."""
    found = []
    source = ""
    for chunk in re.split(r"^---\s*$", text, flags=re.MULTILINE):
        named = re.search(r"^# Source: (\S+)", chunk, re.MULTILINE)
        # A file that begins with its own `---` (a dependency's CRD) leaves its Source line on a chunk alone.
        source = named.group(1) if named else source
        document = yaml.safe_load(chunk)
        if document:
            found.append((source, document))
    return found


def from_dependency(source: str) -> bool:
    """Whether a template is a dependency's (``kubetrain/charts/<name>/...``), not kubetrain's own."""
    return source.startswith(f"{CHART.name}/charts/")


class Helm:
    def __init__(self, binary: Path, home: Path) -> None:
        self.binary = binary
        # helm's config, cache and data dirs, and HOME for client-go's discovery cache (~/.kube/cache; with
        # no HOME it would land in the working directory), so tests neither read nor write the user's.
        self.env = {
            "HOME": str(home),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_DATA_HOME": str(home / "data"),
            "PATH": "/usr/bin:/bin",
        }

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.binary), *args], capture_output=True, text=True, timeout=HUNG, check=False, env=self.env
        )

    def template_text(self, *args: str, namespace: str = RELEASE_NAMESPACE) -> str:
        done = self.run("template", RELEASE, str(CHART), "--namespace", namespace, *args)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def template(self, *args: str, namespace: str = RELEASE_NAMESPACE) -> list[dict[str, Any]]:
        """kubetrain's own objects (not its dependencies', JobSet's: ``template_dependencies``)."""
        rendered = sourced_documents(self.template_text(*args, namespace=namespace))
        return [document for source, document in rendered if not from_dependency(source)]

    def template_dependencies(self, *args: str, namespace: str = RELEASE_NAMESPACE) -> list[dict[str, Any]]:
        """The objects the chart's dependencies (JobSet's chart) render."""
        rendered = sourced_documents(self.template_text(*args, namespace=namespace))
        return [document for source, document in rendered if from_dependency(source)]

    def template_error(self, *args: str) -> str:
        done = self.run("template", RELEASE, str(CHART), *args)
        assert done.returncode != 0, f"helm template {' '.join(args)} rendered:\n{done.stdout}"
        return done.stderr


def find(rendered: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    matches = [d for d in rendered if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(matches) == 1, f"{len(matches)} {kind} rendered"
    return matches[0]


def operator_args(rendered: list[dict[str, Any]]) -> list[str]:
    deployment = find(rendered, "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    args: list[str] = container["args"]
    return args


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [str(binaries.locate().kubectl), "--kubeconfig", str(kubeconfig), *args]
    return run(command, stdin)


def kustomize_standalone_all() -> list[dict[str, Any]]:
    """What the standalone overlay applies: kubetrain's objects and JobSet's."""
    done = run([str(binaries.locate().kubectl), "kustomize", str(STANDALONE)])
    assert done.returncode == 0, done.stderr
    return documents(done.stdout)


def is_jobsets(document: dict[str, Any]) -> bool:
    """Whether an object is JobSet's (its release labels every object it installs so)."""
    return bool((document["metadata"].get("labels") or {}).get("app.kubernetes.io/name") == "jobset")


def kustomize_standalone() -> list[dict[str, Any]]:
    """kubetrain's own objects of the standalone overlay (JobSet's left out)."""
    return [d for d in kustomize_standalone_all() if not is_jobsets(d)]
