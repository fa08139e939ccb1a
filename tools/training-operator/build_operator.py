"""Build upstream's training operator pinned by this Go module, once per version, and print its path.

The peer of ``bench/operator_side_by_side.py``: upstream's
``github.com/kubeflow/training-operator/cmd/training-operator.v1``, built from the Go module proxy like
envtest and helm (Go itself fetched the way envtest fetches it), cached in
``~/.cache/kubetrain/training-operator/<version>/training-operator``, rebuilt when go.mod, go.sum or the build
flags change, atomically and under a lock so concurrent sessions build once.

Usage: python tools/training-operator/build_operator.py  (``make training-operator-build``);
``$KUBETRAIN_TRAINING_OPERATOR`` names a binary to use instead.
"""

from __future__ import annotations

import re
from pathlib import Path

from kubetrain.envtest.gotool import GoTool, GoToolError

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


def tool() -> GoTool:
    return GoTool("training-operator", MODULE, PACKAGE, "training-operator", upstream_version(), BINARY_ENV)


def crds_dir() -> Path:
    """Upstream's kubeflow.org CRDs as its release ships them (``manifests/base/crds`` of its module)."""
    return tool().module_dir(UPSTREAM) / "manifests" / "base" / "crds"


def ensure_built() -> Path:
    try:
        return tool().ensure_built()
    except GoToolError as error:
        raise SystemExit(str(error)) from error


if __name__ == "__main__":
    print(ensure_built())
