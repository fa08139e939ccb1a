"""The build uses an installed Go only when it can switch to the toolchain go.mod asks for (Go >= 1.21)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubetrain.envtest import toolchain


def _fake_go(directory: Path, version: str) -> Path:
    go = directory / "go"
    go.write_text(f"#!/bin/sh\necho 'go version {version} linux/amd64'\n")
    go.chmod(0o755)
    return go


def test_the_version_of_a_go_binary_is_read_from_go_version(tmp_path: Path) -> None:
    assert toolchain.go_version(str(_fake_go(tmp_path, "go1.26.8"))) == (1, 26)


def test_an_installed_go_older_than_1_21_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(toolchain.GO_ENV, str(_fake_go(tmp_path, "go1.19.8")))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(toolchain, "_FALLBACK_GO", str(tmp_path / "none"))
    assert toolchain.installed_go() is None


def test_kubetrain_go_names_the_go_to_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    go = _fake_go(tmp_path, "go1.22.1")
    monkeypatch.setenv(toolchain.GO_ENV, str(go))
    assert toolchain.installed_go() == str(go)


def test_the_toolchain_is_fetched_from_the_first_real_proxy_of_goproxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GOPROXY", "off|https://goproxy.example.com/,direct")
    assert toolchain.proxy_url() == "https://goproxy.example.com"


def test_every_pinned_toolchain_digest_is_a_sha256() -> None:
    assert all(len(digest) == 64 and int(digest, 16) >= 0 for digest in toolchain.TOOLCHAIN_SHA256.values())
