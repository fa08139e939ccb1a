"""Locating, and building when missing, the control-plane binaries.

The Go module in ``tools/envtest`` pins one Kubernetes release; its binaries are built once per machine into a
cache directory keyed by that version (``~/.cache/kubetrain/envtest/<version>/``), so every later start is
instant. A build is atomic (into a temporary sibling, then renamed) and serialised by a lock file, so two
sessions starting at once build once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kubetrain.envtest import gomodule
from kubetrain.envtest.toolchain import ToolchainError, find_go

MODULE_ENV = "KUBETRAIN_ENVTEST_MODULE"
BIN_DIR_ENV = "KUBETRAIN_ENVTEST_BIN_DIR"

COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd")
KUBERNETES_PACKAGES = tuple(f"k8s.io/kubernetes/cmd/{name}" for name in COMPONENTS if name != "etcd")
ETCD_PACKAGE = "./cmd/etcd"
BUILD_INFO = "build-info.json"

# The real node's binaries (``envtest start --real-node``), built only when one is asked for, into a
# directory of their own so the fake-node tiers never wait for them: the kubelet from the same pinned
# k8s.io/kubernetes module, CoreDNS from its own module in tools/coredns.
NODE_COMPONENTS = ("kubelet", "coredns")
KUBELET_PACKAGE = "k8s.io/kubernetes/cmd/kubelet"

_KUBERNETES_REQUIRE = re.compile(
    r"^\s*(?:require\s+)?k8s\.io/kubernetes\s+(v\d+\.\d+\.\d+)\s*$", re.MULTILINE
)


class BuildError(RuntimeError):
    """The binaries are missing and could not be built; the message says what to install or set."""


def go_build_env() -> dict[str, str]:
    """The environment of every ``go build`` of a tool here: static binaries, modules downloaded as needed,
    and no DWARF from the compiler. ``-ldflags -w`` already leaves DWARF out of the binaries, but the compiler
    still generated it for every package: 6 % of the CPU of compiling client-go here, and a bigger build
    cache. The binaries are the same, so this is in no fingerprint; every build passes it, so Go's build cache
    still serves the packages two builds share (envtest's and scheduler-plugins')."""
    return {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod -gcflags=all=-dwarf=false"}


@dataclass(frozen=True)
class GoBuild:
    """What one ``go build`` took: its exit status, wall seconds and CPU seconds (the go command and every
    compile and link it ran)."""

    returncode: int
    seconds: float
    cpu_seconds: float


def run_go_build(command: list[str], cwd: Path) -> GoBuild:
    """``command`` in ``cwd`` with :func:`go_build_env`, its output on stderr."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    result = subprocess.run(
        command, cwd=cwd, env=go_build_env(), stdout=sys.stderr, stderr=sys.stderr, check=False
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return GoBuild(result.returncode, round(time.monotonic() - started, 1), round(cpu, 1))


@dataclass(frozen=True)
class Binaries:
    """The directory holding one version's binaries."""

    version: str
    directory: Path

    def path(self, component: str) -> Path:
        return self.directory / component

    @property
    def kube_apiserver(self) -> Path:
        return self.path("kube-apiserver")

    @property
    def kube_controller_manager(self) -> Path:
        return self.path("kube-controller-manager")

    @property
    def kube_scheduler(self) -> Path:
        return self.path("kube-scheduler")

    @property
    def kubectl(self) -> Path:
        return self.path("kubectl")

    @property
    def etcd(self) -> Path:
        return self.path("etcd")

    def missing(self) -> list[str]:
        return [name for name in COMPONENTS if not os.access(self.path(name), os.X_OK)]


def module_dir() -> Path:
    """The Go module that pins the release: ``$KUBETRAIN_ENVTEST_MODULE``, else ``tools/envtest`` of this
    checkout, else (an installed kubetrain) the module generated into the cache."""
    override = os.environ.get(MODULE_ENV)
    if override:
        return Path(override)
    checkout = Path(__file__).resolve().parents[3] / "tools" / "envtest"
    if (checkout / "go.mod").is_file():
        return checkout
    return generated_module_dir()


def generated_module_dir() -> Path:
    return cache_root() / "module" / gomodule.KUBERNETES_VERSION


def kubernetes_version(module: Path | None = None) -> str:
    """The k8s.io/kubernetes version the Go module requires (``v1.34.4``)."""
    module = module or module_dir()
    go_mod = module / "go.mod"
    if not go_mod.is_file():
        if module == generated_module_dir():
            return gomodule.KUBERNETES_VERSION
        raise BuildError(
            f"{go_mod} not found: run from a kubetrain checkout or set {MODULE_ENV} to its tools/envtest"
        )
    match = _KUBERNETES_REQUIRE.search(go_mod.read_text())
    if match is None:
        raise BuildError(f"{go_mod}: no 'require k8s.io/kubernetes vX.Y.Z' line")
    return match.group(1)


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kubetrain" / "envtest"


def binaries_dir(version: str) -> Path:
    override = os.environ.get(BIN_DIR_ENV)
    return Path(override) if override else cache_root() / version


def locate(module: Path | None = None) -> Binaries:
    """The binaries of the pinned release, whether or not they are built yet."""
    version = kubernetes_version(module)
    return Binaries(version, binaries_dir(version))


def module_fingerprint(module: Path) -> str:
    """Hash of go.mod, go.sum and the etcd wrapper: a rebuild is needed when any of them changes."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "cmd/etcd/main.go"):
        path = module / name
        digest.update(name.encode() + b"\0" + (path.read_bytes() if path.exists() else b"") + b"\0")
    return digest.hexdigest()


def is_current(binaries: Binaries, module: Path) -> bool:
    if binaries.missing():
        return False
    info_file = binaries.directory / BUILD_INFO
    if not info_file.is_file():
        # A directory given by the user (KUBETRAIN_ENVTEST_BIN_DIR) without build info is taken as it is.
        return BIN_DIR_ENV in os.environ
    info = json.loads(info_file.read_text())
    return bool(info.get("fingerprint") == module_fingerprint(module))


def ensure_built(
    module: Path | None = None, log: Callable[[str], None] = lambda _: None, force: bool = False
) -> Binaries:
    """Return the binaries, building them first if they are missing or were built from another
    go.mod/go.sum."""
    module = module or module_dir()
    if not (module / "go.mod").is_file() and module == generated_module_dir():
        _generate_module(module, log)
    binaries = locate(module)
    if not force and is_current(binaries, module):
        return binaries
    binaries.directory.parent.mkdir(parents=True, exist_ok=True)
    lock_path = binaries.directory.parent / f".{binaries.directory.name}.lock"
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not force and is_current(binaries, module):
            return binaries  # another process built them while we waited
        _build(binaries, module, log)
    return binaries


def ldflags(version: str) -> str:
    """Strip symbols and stamp the version, so ``kubectl version`` reports the real client and server
    versions."""
    major, minor, _ = version.lstrip("v").split(".")
    flags = ["-s", "-w"]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {package}.gitVersion={version}",
            f"-X {package}.gitMajor={major}",
            f"-X {package}.gitMinor={minor}",
            f"-X {package}.gitTreeState=clean",
        ]
    return " ".join(flags)


def build_command(go: str, version: str, output: Path) -> list[str]:
    """The control plane's five binaries in one `go build` into the directory ``output``."""
    return kubernetes_build_command(go, version, f"{output}{os.sep}", *KUBERNETES_PACKAGES, ETCD_PACKAGE)


def kubernetes_build_command(go: str, version: str, output: str, *packages: str) -> list[str]:
    """`go build` of Kubernetes packages with the flags and version stamp of a release build, but for
    ``-trimpath``, left out of every build of Kubernetes packages here (envtest's, the node's,
    scheduler-plugins'): Go's build cache keys a ``-trimpath`` build's package on the version its go.mod
    requires, a ``replace`` not counted, and scheduler-plugins requires Kubernetes v1.34.7 replaced by
    envtest's v1.34.4, so it compiled all of it again. Without it the key is the package's directory in the
    module cache, the same for both where the packages' own dependencies are. Measured 2026-12-02: with an
    empty GOCACHE, scheduler-plugins' scheduler took 214 CPU-s after envtest's kube-scheduler, 294 as a
    ``-trimpath`` build after that (the standard library compiled again included); in a whole cold run, 243
    CPU-s against 266 before: most of its packages differ from envtest's by a dependency's version anyway."""
    return [
        go,
        "build",
        "-tags",
        "providerless",
        "-ldflags",
        ldflags(version),
        "-o",
        output,
        *packages,
    ]


@dataclass(frozen=True)
class NodeBinaries:
    """The directory holding the real node's kubelet and coredns."""

    version: str
    directory: Path

    @property
    def kubelet(self) -> Path:
        return self.directory / "kubelet"

    @property
    def coredns(self) -> Path:
        return self.directory / "coredns"

    def missing(self) -> list[str]:
        return [name for name in NODE_COMPONENTS if not os.access(self.directory / name, os.X_OK)]


def coredns_module_dir() -> Path:
    """tools/coredns of this checkout: the real node needs a checkout (an installed wheel has no tools/)."""
    return Path(__file__).resolve().parents[3] / "tools" / "coredns"


def node_fingerprint(module: Path, coredns_module: Path) -> str:
    digest = hashlib.sha256(module_fingerprint(module).encode())
    for name in ("go.mod", "go.sum", "main.go"):
        path = coredns_module / name
        digest.update(name.encode() + b"\0" + (path.read_bytes() if path.exists() else b"") + b"\0")
    return digest.hexdigest()


def locate_node(module: Path | None = None) -> NodeBinaries:
    version = kubernetes_version(module)
    return NodeBinaries(version, binaries_dir(version).with_name(f"{version}-node"))


def ensure_node_built(
    module: Path | None = None, log: Callable[[str], None] = lambda _: None, force: bool = False
) -> NodeBinaries:
    """The kubelet and CoreDNS, built first when missing or built from other module files."""
    module = module or module_dir()
    coredns_module = coredns_module_dir()
    if not (coredns_module / "go.mod").is_file():
        raise BuildError(
            f"{coredns_module}/go.mod not found: the real node is built from a kubetrain checkout"
        )
    node = locate_node(module)
    fingerprint = node_fingerprint(module, coredns_module)

    def current() -> bool:
        info = node.directory / BUILD_INFO
        return (
            not node.missing()
            and info.is_file()
            and json.loads(info.read_text()).get("fingerprint") == fingerprint
        )

    if not force and current():
        return node
    node.directory.parent.mkdir(parents=True, exist_ok=True)
    with (node.directory.parent / f".{node.directory.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not force and current():
            return node
        go = _go(log)
        staging = node.directory.with_name(node.directory.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        log(f"building kubelet {node.version} and CoreDNS into {node.directory} (minutes when cold)")
        started = time.monotonic()
        cpu_seconds = 0.0
        builds = (
            (
                module,
                kubernetes_build_command(go, node.version, str(staging / "kubelet"), KUBELET_PACKAGE),
            ),
            (
                coredns_module,
                [go, "build", "-ldflags", "-s -w", "-o", str(staging / "coredns"), "."],
            ),
        )
        for directory, command in builds:
            build = run_go_build(command, directory)
            if build.returncode != 0:
                raise BuildError(
                    f"`{' '.join(command)}` in {directory} failed with exit status {build.returncode}"
                )
            cpu_seconds += build.cpu_seconds
        info = {
            "version": node.version,
            "fingerprint": fingerprint,
            "build_seconds": round(time.monotonic() - started, 1),
            "build_cpu_seconds": round(cpu_seconds, 1),
        }
        (staging / BUILD_INFO).write_text(json.dumps(info, indent=2) + "\n")
        shutil.rmtree(node.directory, ignore_errors=True)
        staging.rename(node.directory)
        log(f"built in {info['build_seconds']} s ({info['build_cpu_seconds']} s CPU)")
    return node


def _go(log: Callable[[str], None]) -> str:
    try:
        return find_go(cache_root(), log)
    except ToolchainError as error:
        raise BuildError(
            f"{error}; or point ${BIN_DIR_ENV} at a directory with {', '.join(COMPONENTS)}"
        ) from error


def _generate_module(module: Path, log: Callable[[str], None]) -> None:
    go = _go(log)
    log(f"no kubetrain checkout: writing the envtest Go module into {module}")
    staging = module.with_name(module.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        gomodule.generate(staging, go)
    except subprocess.CalledProcessError as error:
        raise BuildError(f"generating the envtest Go module in {staging} failed: {error}") from error
    shutil.rmtree(module, ignore_errors=True)
    staging.rename(module)


def _build(binaries: Binaries, module: Path, log: Callable[[str], None]) -> None:
    go = _go(log)
    staging = binaries.directory.with_name(binaries.directory.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    command = build_command(go, binaries.version, staging)
    # Module downloads happen here too (GOFLAGS=-mod=mod), so a clean clone needs nothing but Go and the
    # proxy.
    log(f"building Kubernetes {binaries.version} control plane into {binaries.directory} (minutes when cold)")
    build = run_go_build(command, module)
    if build.returncode != 0:
        raise BuildError(f"`{' '.join(command)}` in {module} failed with exit status {build.returncode}")
    info = {
        "version": binaries.version,
        "fingerprint": module_fingerprint(module),
        "go": subprocess.run([go, "version"], capture_output=True, text=True, check=False).stdout.strip(),
        "build_seconds": build.seconds,
        "build_cpu_seconds": build.cpu_seconds,
    }
    (staging / BUILD_INFO).write_text(json.dumps(info, indent=2) + "\n")
    shutil.rmtree(binaries.directory, ignore_errors=True)
    staging.rename(binaries.directory)
    log(f"built in {build.seconds} s ({build.cpu_seconds} s CPU)")
