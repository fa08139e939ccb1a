"""The JobSet release kubetrain installs with itself, generated from the module pinned in ``tools/jobset``.

Kubeflow Trainer v2 builds on JobSet, and so does kubetrain's TrainJob controller; a cluster gets it from
kubetrain's own install, offline as the rest of it:

- the Helm chart's dependency ``charts/kubetrain/charts/jobset``: the module's ``charts/jobset`` as JobSet's
  release packages it (``hack/helm-chart-package.sh``: the promoted image ``registry.k8s.io/jobset/jobset`` at
  the release tag, ``IfNotPresent``, ``appVersion`` the tag; what ``.helmignore`` leaves out left out), so
  ``helm template`` and ``helm install`` need no chart repository;
- ``manifests/jobset/manifests.yaml`` for the kustomize install: the release's ``manifests.yaml``
  (``kustomize build config/default`` with that image, rendered by envtest's ``kubectl kustomize``).

``python -m kubetrain.envtest.jobset_release`` (``make jobset-manifests``) writes both; a unit test fails when
they are not what it would write.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from kubetrain.envtest import binaries, jobset

CHECKOUT = Path(__file__).resolve().parents[3]
VENDORED_CHART = CHECKOUT / "charts" / "kubetrain" / "charts" / "jobset"
KUSTOMIZE_DIR = CHECKOUT / "manifests" / "jobset"
MANIFESTS = "manifests.yaml"
RELEASE_IMAGE = "registry.k8s.io/jobset/jobset"
STAGING_IMAGE = "us-central1-docker.pkg.dev/k8s-staging-images/jobset/jobset"
HELM_IGNORED = ("tests/", "README.md.gotmpl", ".helmignore")
"""What the chart's ``.helmignore`` keeps out of the package (its helm-unittest suites, the docs template)."""


class ReleaseError(RuntimeError):
    """What went wrong, said in the message."""


def _replace_once(text: str, pattern: str, replacement: str, where: str) -> str:
    replaced, count = re.subn(pattern, replacement, text, count=1, flags=re.MULTILINE)
    if count != 1:
        raise ReleaseError(f"{where}: no line matches {pattern!r}; JobSet's release layout changed")
    return replaced


def _released_values(text: str, version: str) -> str:
    """values.yaml as ``hack/helm-chart-package.sh`` sets it for a promoted release."""
    text = _replace_once(
        text, rf"^(  repository: ){re.escape(STAGING_IMAGE)}$", rf"\g<1>{RELEASE_IMAGE}", "values"
    )
    text = _replace_once(text, r"^(  pullPolicy: )Always$", r"\g<1>IfNotPresent", "values")
    return _replace_once(text, r"^(  tag: )main$", rf"\g<1>{version}", "values")


def _released_chart_yaml(text: str, version: str) -> str:
    """Chart.yaml as ``helm package --version <version without v> --app-version <tag>`` writes it."""
    text = _replace_once(text, r"^version: .*$", f"version: {version.removeprefix('v')}", "Chart.yaml")
    return text.rstrip("\n") + f'\nappVersion: "{version}"\n'


def chart_files(source: Path | None = None, version: str | None = None) -> dict[str, str]:
    """The vendored chart's files (path relative to the chart → text) from the release's ``charts/jobset``."""
    source = source or jobset.source()
    version = version or jobset.version()
    chart = source / "charts" / "jobset"
    files: dict[str, str] = {}
    for path in sorted(chart.rglob("*")):
        relative = path.relative_to(chart).as_posix()
        if path.is_dir() or any(relative == p or relative.startswith(p) for p in HELM_IGNORED):
            continue
        text = path.read_text()
        if relative == "values.yaml":
            text = _released_values(text, version)
        elif relative == "Chart.yaml":
            text = _released_chart_yaml(text, version)
        files[relative] = text
    return files


def kustomize_manifests(
    kubectl: Path | None = None, source: Path | None = None, version: str | None = None
) -> str:
    """The release's ``manifests.yaml``: ``config/default`` built, its image the promoted one."""
    source = source or jobset.source()
    version = version or jobset.version()
    kubectl = kubectl or binaries.ensure_built().kubectl
    built = subprocess.run(
        [str(kubectl), "kustomize", str(source / "config" / "default")],
        capture_output=True,
        text=True,
        check=False,
    )
    if built.returncode != 0:
        raise ReleaseError(f"kubectl kustomize config/default failed: {built.stderr.strip()}")
    staged = f"{STAGING_IMAGE}:{version}"
    if built.stdout.count(staged) != 1:
        raise ReleaseError(f"config/default names {staged} {built.stdout.count(staged)} times, not once")
    header = (
        f"# JobSet {version}'s release manifests: kustomize build config/default, image\n"
        f"# {RELEASE_IMAGE}:{version}. Generated from the module pinned in tools/jobset by\n"
        "# `make jobset-manifests`; do not edit.\n"
    )
    return header + built.stdout.replace(staged, f"{RELEASE_IMAGE}:{version}")


def write(kubectl: Path | None = None) -> list[Path]:
    """Write the vendored chart and the kustomize manifests; return what was written."""
    written = []
    shutil.rmtree(VENDORED_CHART, ignore_errors=True)
    for relative, text in chart_files().items():
        path = VENDORED_CHART / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    KUSTOMIZE_DIR.mkdir(parents=True, exist_ok=True)
    (KUSTOMIZE_DIR / MANIFESTS).write_text(kustomize_manifests(kubectl))
    written.append(KUSTOMIZE_DIR / MANIFESTS)
    return written


if __name__ == "__main__":
    for path in write():
        print(path.relative_to(CHECKOUT), file=sys.stderr)
