"""Build upstream's training operator pinned by this Go module, once per version, and print its path.

The peer of ``bench/operator_side_by_side.py``: upstream's
``github.com/kubeflow/training-operator/cmd/training-operator.v1``, built from the Go module proxy like
envtest and helm (Go itself fetched the way envtest fetches it), cached in
``~/.cache/kubetrain/training-operator/<version>/training-operator``, rebuilt when go.mod, go.sum or this
script change, atomically and under a lock so concurrent sessions build once.

Usage: python tools/training-operator/build_operator.py  (``make training-operator-build``);
``$KUBETRAIN_TRAINING_OPERATOR`` names a binary to use instead.
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
BINARY_ENV = "KUBETRAIN_TRAINING_OPERATOR"
UPSTREAM = "github.com/kubeflow/training-operator"
PACKAGE = f"{UPSTREAM}/cmd/training-operator.v1"
_REQUIRE = re.compile(
    r"^\s*(?:require\s+)?github\.com/kubeflow/training-operator\s+(v\d+\.\d+\.\d+)\s*$", re.MULTILINE
)


def upstream_version() -> str:
    match = _REQUIRE.search((MODULE / "go.mod").read_text())
    if match is None:
        raise SystemExit(f"{MODULE / 'go.mod'}: no 'require {UPSTREAM} vX.Y.Z' line")
    return match.group(1)


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kubetrain"


def fingerprint() -> str:
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "build_operator.py"):
        digest.update(name.encode() + b"\0" + (MODULE / name).read_bytes() + b"\0")
    return digest.hexdigest()


def _go() -> str:
    try:
        return find_go(cache_root() / "envtest", lambda message: print(message, file=sys.stderr))
    except ToolchainError as error:
        raise SystemExit(f"{error}; or set ${BINARY_ENV} to a training-operator binary") from error


def build(directory: Path, version: str) -> None:
    go = _go()
    staging = directory.with_name(directory.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    output = staging / "training-operator"
    command = [go, "build", "-trimpath", "-ldflags", "-s -w", "-o", str(output), PACKAGE]
    print(f"building training-operator {version} into {directory} (minutes when cold)", file=sys.stderr)
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"}
    done = subprocess.run(command, cwd=MODULE, env=env, stdout=sys.stderr, stderr=sys.stderr, check=False)
    if done.returncode != 0:
        raise SystemExit(f"`{' '.join(command)}` in {MODULE} failed with exit status {done.returncode}")
    (staging / "fingerprint").write_text(fingerprint() + "\n")
    shutil.rmtree(directory, ignore_errors=True)
    staging.rename(directory)


def crds_dir() -> Path:
    """Upstream's kubeflow.org CRDs as its release ships them (``manifests/base/crds`` of its module)."""
    listed = subprocess.run(
        [_go(), "list", "-m", "-f", "{{.Dir}}", UPSTREAM],
        cwd=MODULE,
        env={**os.environ, "GOFLAGS": "-mod=mod"},
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(listed.stdout.strip()) / "manifests" / "base" / "crds"


def ensure_built() -> Path:
    given = os.environ.get(BINARY_ENV)
    if given:
        return Path(given)
    version = upstream_version()
    directory = cache_root() / "training-operator" / version
    stamp = directory / "fingerprint"

    def current() -> bool:
        binary = directory / "training-operator"
        return os.access(binary, os.X_OK) and stamp.is_file() and stamp.read_text().strip() == fingerprint()

    if current():
        return directory / "training-operator"
    directory.parent.mkdir(parents=True, exist_ok=True)
    with (directory.parent / f".{version}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not current():  # another session may have built it while this one waited
            build(directory, version)
    return directory / "training-operator"


if __name__ == "__main__":
    print(ensure_built())
