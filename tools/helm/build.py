"""Build the helm CLI pinned by this Go module, once per version, and print its path.

Like envtest's binaries: built from the Go module proxy (a clean clone needs only the proxy, Go being fetched
the way envtest fetches it), cached in ``~/.cache/kubetrain/helm/<version>/helm``, rebuilt when go.mod,
go.sum or this script change, atomically and under a lock so concurrent test sessions build once.

Usage: python tools/helm/build.py  (``make helm-build``); ``$KUBETRAIN_HELM`` names a helm to use instead.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from kubetrain.envtest.toolchain import ToolchainError, find_go

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


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kubetrain"


def fingerprint() -> str:
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "build.py"):
        digest.update(name.encode() + b"\0" + (MODULE / name).read_bytes() + b"\0")
    return digest.hexdigest()


def build(directory: Path, version: str) -> None:
    try:
        go = find_go(cache_root() / "envtest", lambda message: print(message, file=sys.stderr))
    except ToolchainError as error:
        raise SystemExit(f"{error}; or set ${HELM_ENV} to a helm binary") from error
    staging = directory.with_name(directory.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    command = [go, "build", "-trimpath", "-ldflags", ldflags(version), "-o", str(staging / "helm"), PACKAGE]
    print(f"building helm {version} into {directory} (a minute or more when cold)", file=sys.stderr)
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"}
    done = subprocess.run(command, cwd=MODULE, env=env, stdout=sys.stderr, stderr=sys.stderr, check=False)
    if done.returncode != 0:
        raise SystemExit(f"`{' '.join(command)}` in {MODULE} failed with exit status {done.returncode}")
    (staging / "fingerprint").write_text(fingerprint() + "\n")
    shutil.rmtree(directory, ignore_errors=True)
    staging.rename(directory)


def ensure_built() -> Path:
    given = os.environ.get(HELM_ENV)
    if given:
        return Path(given)
    version = helm_version()
    directory = cache_root() / "helm" / version
    stamp = directory / "fingerprint"

    def current() -> bool:
        return (
            os.access(directory / "helm", os.X_OK)
            and stamp.is_file()
            and stamp.read_text().strip() == (fingerprint())
        )

    if current():
        return directory / "helm"
    directory.parent.mkdir(parents=True, exist_ok=True)
    with (directory.parent / f".{version}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not current():  # another session may have built it while this one waited
            build(directory, version)
    return directory / "helm"


if __name__ == "__main__":
    print(ensure_built())
