"""A Go toolchain for the build: an installed one when it is new enough, else the pinned release fetched as
the ``golang.org/toolchain`` module from the Go module proxy (how ``go`` itself switches toolchains), so a
clean CI machine needs no Go package (Debian bookworm's golang-go is 1.19, too old for Kubernetes 1.34).
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path

import httpx

GO_ENV = "KUBETRAIN_GO"
GO_TOOLCHAIN = "go1.26.8"
# Go >= 1.21 switches to the toolchain go.mod asks for by itself (GOTOOLCHAIN=auto), so it is enough.
MINIMUM_GO = (1, 21)
# SHA-256 of the proxy's toolchain zip, checked before anything in it runs.
TOOLCHAIN_SHA256 = {
    "linux-amd64": "30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7",
}
_FALLBACK_GO = "/usr/local/go/bin/go"  # where the official tarball installs; often not on PATH
_VERSION = re.compile(r"\bgo(\d+)\.(\d+)")


class ToolchainError(RuntimeError):
    """No usable Go and none could be fetched; the message says what to install."""


def platform_key() -> str:
    machine = platform.machine().lower()
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)
    return f"{platform.system().lower()}-{arch}"


def go_version(go: str) -> tuple[int, int] | None:
    try:
        output = subprocess.run(
            [go, "version"], capture_output=True, text=True, check=False, timeout=60
        ).stdout
    except OSError:
        return None
    match = _VERSION.search(output)
    return (int(match.group(1)), int(match.group(2))) if match else None


def installed_go() -> str | None:
    """The first of ``$KUBETRAIN_GO``, ``go`` on PATH and /usr/local/go/bin/go that is Go >= 1.21."""
    for candidate in (os.environ.get(GO_ENV), shutil.which("go"), _FALLBACK_GO):
        if candidate and os.access(candidate, os.X_OK):
            version = go_version(candidate)
            if version is not None and version >= MINIMUM_GO:
                return candidate
    return None


def proxy_url() -> str:
    """The first real proxy of $GOPROXY (``https://proxy.golang.org`` by default)."""
    for entry in re.split(r"[,|]", os.environ.get("GOPROXY", "https://proxy.golang.org")):
        if entry.startswith(("https://", "http://")):
            return entry.rstrip("/")
    return "https://proxy.golang.org"


def fetch_toolchain(cache: Path, log: Callable[[str], None]) -> str:
    """Download and unpack the pinned toolchain into ``cache/go/<version>``; return its ``go`` binary."""
    key = platform_key()
    module_version = f"v0.0.1-{GO_TOOLCHAIN}.{key}"
    root = cache / "go" / GO_TOOLCHAIN
    go = root / f"golang.org/toolchain@{module_version}" / "bin" / "go"
    if os.access(go, os.X_OK):
        return str(go)
    expected = TOOLCHAIN_SHA256.get(key)
    if expected is None:
        raise ToolchainError(f"no Go >= 1.21 installed and no pinned toolchain for {key}: install Go >= 1.24")
    url = f"{proxy_url()}/golang.org/toolchain/@v/{module_version}.zip"
    log(f"no Go >= 1.21 found; fetching {GO_TOOLCHAIN} from {url}")
    root.parent.mkdir(parents=True, exist_ok=True)
    archive = root.parent / f"{GO_TOOLCHAIN}.zip.partial"
    digest = hashlib.sha256()
    with (
        httpx.stream("GET", url, follow_redirects=True, timeout=60) as response,
        archive.open("wb") as output,
    ):
        response.raise_for_status()
        for chunk in response.iter_bytes():
            digest.update(chunk)
            output.write(chunk)
    if digest.hexdigest() != expected:
        archive.unlink()
        raise ToolchainError(f"{url}: SHA-256 {digest.hexdigest()} is not the pinned {expected}")
    staging = root.with_name(root.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    with zipfile.ZipFile(archive) as bundle:
        for member in bundle.infolist():
            target = Path(bundle.extract(member, staging))
            mode = member.external_attr >> 16
            if mode & 0o111:
                target.chmod(0o755)
    archive.unlink()
    shutil.rmtree(root, ignore_errors=True)
    staging.rename(root)
    return str(go)


def find_go(cache: Path, log: Callable[[str], None] = lambda _: None) -> str:
    try:
        return installed_go() or fetch_toolchain(cache, log)
    except httpx.HTTPError as error:
        raise ToolchainError(
            f"no Go >= 1.21 installed and fetching {GO_TOOLCHAIN} failed: {error}"
        ) from error
