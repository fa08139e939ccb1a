"""The Go module that builds the control plane, written from scratch where no kubetrain checkout is at hand.

A checkout has it committed in ``tools/envtest`` (go.sum included). An installed kubetrain (a wheel) has no
``tools/``, so the same module is generated: the staging ``replace`` list is derived from the pinned release's
own go.mod, as for the committed one, and ``go mod tidy`` resolves and checks the rest against the Go checksum
database. A unit test keeps the generated go.mod identical to the committed one.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

KUBERNETES_VERSION = "v1.34.4"
MODULE_PATH = "github.com/kubetrain/kubetrain/tools/envtest"

GO_MOD_HEADER = (
    "// Builds the envtest control plane: kube-apiserver, kube-scheduler, kube-controller-manager and kubectl"
    " from\n"
    "// k8s.io/kubernetes, and etcd from the etcd server module that release already depends on.\n"
    "// k8s.io/kubernetes requires its staging modules at the fake version v0.0.0 and only its own replace"
    " block (ignored\n"
    "// for dependencies) resolves them, so every one of them is pinned here to the matching published"
    " v0.Y.Z.\n"
)

ETCD_MAIN = """\
// Command etcd is the etcd server, built from the go.etcd.io/etcd/server/v3 version that the pinned
// k8s.io/kubernetes release requires, so the API server always talks to the etcd it was tested with.
package main

import (
\t"os"

\t"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
\tetcdmain.Main(os.Args)
}
"""

TOOLS_GO = """\
//go:build tools

// Package tools records the commands this module builds, so `go mod tidy` keeps their dependencies; the
// kubelet is for the real node (kubetrain envtest start --real-node).
package tools

import (
\t_ "k8s.io/kubernetes/cmd/kube-apiserver"
\t_ "k8s.io/kubernetes/cmd/kube-controller-manager"
\t_ "k8s.io/kubernetes/cmd/kube-scheduler"
\t_ "k8s.io/kubernetes/cmd/kubectl"
\t_ "k8s.io/kubernetes/cmd/kubelet"
)
"""

_STAGING_REQUIRE = re.compile(r"^\s*(k8s\.io/[A-Za-z0-9._-]+) v0\.0\.0\s*$", re.MULTILINE)
_GO_DIRECTIVE = re.compile(r"^go (\S+)$", re.MULTILINE)


def staging_modules(upstream_go_mod: str) -> list[str]:
    """The k8s.io modules a Kubernetes release requires at the fake v0.0.0 (its staging directory)."""
    return sorted(set(_STAGING_REQUIRE.findall(upstream_go_mod)))


def go_mod(version: str, upstream_go_mod: str) -> str:
    """The wrapper module's go.mod before ``go mod tidy``: the release and a pin for each staging module."""
    staging_version = "v0." + version.lstrip("v").split(".", 1)[1]
    go_directive = _GO_DIRECTIVE.search(upstream_go_mod)
    lines = [
        GO_MOD_HEADER.rstrip("\n"),
        f"module {MODULE_PATH}",
        "",
        f"go {go_directive.group(1) if go_directive else '1.24.0'}",
        "",
        "godebug default=go1.24",
        "",
        f"require k8s.io/kubernetes {version}",
        "",
        "replace (",
        *(f"\t{name} => {name} {staging_version}" for name in staging_modules(upstream_go_mod)),
        ")",
    ]
    return "\n".join(lines) + "\n"


def generate(directory: Path, go: str, version: str = KUBERNETES_VERSION) -> Path:
    """Write and tidy the module in ``directory`` (downloads through the Go module proxy); return it."""
    env = {**os.environ, "GOFLAGS": "-mod=mod"}
    directory.mkdir(parents=True, exist_ok=True)
    download = subprocess.run(
        [go, "mod", "download", "-json", f"k8s.io/kubernetes@{version}"],
        cwd=directory.parent,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    upstream = Path(json.loads(download.stdout)["GoMod"]).read_text()
    (directory / "go.mod").write_text(go_mod(version, upstream))
    (directory / "cmd" / "etcd").mkdir(parents=True, exist_ok=True)
    (directory / "cmd" / "etcd" / "main.go").write_text(ETCD_MAIN)
    (directory / "tools.go").write_text(TOOLS_GO)
    subprocess.run([go, "mod", "tidy"], cwd=directory, env=env, check=True)
    return directory
