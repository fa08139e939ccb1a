"""Build the helm CLI pinned by this Go module, once per version, and print its path.

Like envtest's binaries: built from the Go module proxy (a clean clone needs only the proxy, Go being fetched
the way envtest fetches it), cached in ``~/.cache/kubetrain/helm/<version>/helm``, rebuilt when go.mod,
go.sum or the build flags change, atomically and under a lock so concurrent test sessions build once.

Usage: python tools/helm/build.py  (``make helm-build``); ``$KUBETRAIN_HELM`` names a helm to use instead.
"""

from __future__ import annotations

import re
from pathlib import Path

from kubetrain.envtest.gotool import GoTool, GoToolError

MODULE = Path(__file__).resolve().parent
HELM_ENV = "KUBETRAIN_HELM"
PACKAGE = "helm.sh/helm/v3/cmd/helm"
_HELM_REQUIRE = re.compile(r"^\s*(?:require\s+)?helm\.sh/helm/v3\s+(v\d+\.\d+\.\d+)\s*$", re.MULTILINE)
_CLIENT_GO_REQUIRE = re.compile(r"^\s*k8s\.io/client-go\s+v0\.(\d+)\.\d+", re.MULTILINE)


def helm_version() -> str:
    match = _HELM_REQUIRE.search((MODULE / "go.mod").read_text())
    if match is None:
        raise SystemExit(f"{MODULE / 'go.mod'}: no 'require helm.sh/helm/v3 vX.Y.Z' line")
    return match.group(1)


def ldflags(version: str) -> str:
    """As helm's own Makefile: its version, and the Kubernetes version of its client-go (client-go v0.Y is
    Kubernetes 1.Y), which ``helm template`` and ``helm lint`` check charts' kubeVersion against (a module
    build without it claims v1.20)."""
    match = _CLIENT_GO_REQUIRE.search((MODULE / "go.mod").read_text())
    if match is None:
        raise SystemExit(f"{MODULE / 'go.mod'}: no k8s.io/client-go requirement")
    flags = ["-s", "-w", f"-X helm.sh/helm/v3/internal/version.version={version}"]
    for package in ("helm.sh/helm/v3/pkg/lint/rules", "helm.sh/helm/v3/pkg/chartutil"):
        flags += [f"-X {package}.k8sVersionMajor=1", f"-X {package}.k8sVersionMinor={match.group(1)}"]
    return " ".join(flags)


def tool() -> GoTool:
    version = helm_version()
    return GoTool(
        "helm", MODULE, PACKAGE, "helm", version, HELM_ENV, ("-trimpath", "-ldflags", ldflags(version))
    )


def ensure_built() -> Path:
    try:
        return tool().ensure_built()
    except GoToolError as error:
        raise SystemExit(str(error)) from error


if __name__ == "__main__":
    print(ensure_built())
