"""A command built from a pinned Go module in ``tools/<name>`` of the checkout, once per version, cached.

The tools of the test tiers that are neither the control plane nor the node (helm, upstream's training
operator for the bench, the scheduler-plugins gang scheduler for the e2e tier) are built the way envtest
builds Kubernetes: from the Go module proxy, with the Go toolchain envtest finds, into
``~/.cache/kubetrain/<name>/<version>/<binary>``, rebuilt when the module's go.mod, go.sum or build flags
change, atomically and under a lock so concurrent sessions build once. ``$<ENV>`` names a binary to use
instead.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kubetrain.envtest import binaries
from kubetrain.envtest.toolchain import ToolchainError, find_go


class GoToolError(RuntimeError):
    pass


def _say(message: str) -> None:
    print(message, file=sys.stderr)


@dataclass(frozen=True)
class GoTool:
    name: str
    """The cache directory's name."""
    module: Path
    """The Go module (``tools/<name>``) whose go.mod pins what is built."""
    package: str
    binary: str
    version: str
    binary_env: str
    build_flags: tuple[str, ...] = ("-trimpath", "-ldflags", "-s -w")
    """Between ``go build`` and ``-o``; part of the fingerprint, so new flags rebuild."""

    @property
    def directory(self) -> Path:
        return binaries.cache_root().parent / self.name / self.version

    @property
    def path(self) -> Path:
        return self.directory / self.binary

    def fingerprint(self) -> str:
        digest = hashlib.sha256(" ".join([self.package, *self.build_flags]).encode() + b"\0")
        for name in ("go.mod", "go.sum"):
            digest.update(name.encode() + b"\0" + (self.module / name).read_bytes() + b"\0")
        return digest.hexdigest()

    def go(self, log: Callable[[str], None] = _say) -> str:
        try:
            return find_go(binaries.cache_root(), log)
        except ToolchainError as error:
            raise GoToolError(f"{error}; or set ${self.binary_env} to a {self.binary} binary") from error

    def module_dir(self, module_path: str) -> Path:
        """Where Go keeps the source of a module this one requires (for the files a release ships),
        downloaded first: the binary may be cached while Go's module cache was emptied (``go list -m``
        then answers an empty directory)."""
        downloaded = subprocess.run(
            [self.go(), "mod", "download", "-json", module_path],
            cwd=self.module,
            env={**os.environ, "GOFLAGS": "-mod=mod"},
            capture_output=True,
            text=True,
            check=True,
        )
        return Path(json.loads(downloaded.stdout)["Dir"])

    def current(self) -> bool:
        stamp = self.directory / "fingerprint"
        return (
            os.access(self.path, os.X_OK)
            and stamp.is_file()
            and stamp.read_text().strip() == self.fingerprint()
        )

    def ensure_built(self, log: Callable[[str], None] = _say) -> Path:
        given = os.environ.get(self.binary_env)
        if given:
            return Path(given)
        if self.current():
            return self.path
        self.directory.parent.mkdir(parents=True, exist_ok=True)
        with (self.directory.parent / f".{self.version}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not self.current():  # another session may have built it while this one waited
                self._build(log)
        return self.path

    def _build(self, log: Callable[[str], None]) -> None:
        staging = self.directory.with_name(self.directory.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        command = [self.go(log), "build", *self.build_flags, "-o", str(staging / self.binary), self.package]
        log(f"building {self.binary} {self.version} into {self.directory} (minutes when cold)")
        done = binaries.run_go_build(command, self.module)
        if done.returncode != 0:
            raise GoToolError(
                f"`{' '.join(command)}` in {self.module} failed with exit status {done.returncode}"
            )
        (staging / "fingerprint").write_text(self.fingerprint() + "\n")
        shutil.rmtree(self.directory, ignore_errors=True)
        staging.rename(self.directory)
        log(f"built {self.binary} {self.version} in {done.seconds} s ({done.cpu_seconds} s CPU)")


def required_version(go_mod: Path, module: str) -> str | None:
    """The release of ``module`` that ``go_mod`` (a tools/<name> pin) requires, ``vX.Y.Z``; None when it
    requires none."""
    pattern = re.compile(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\d+\.\d+\.\d+)\s*$", re.MULTILINE)
    match = pattern.search(go_mod.read_text())
    return match.group(1) if match else None
