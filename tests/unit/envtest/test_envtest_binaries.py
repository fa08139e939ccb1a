"""Binaries are keyed by the Kubernetes version the Go module pins; rebuilt only when the module changes."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from kubetrain.envtest import binaries

GO_MOD = """module example.com/envtest

go 1.24.0

require k8s.io/kubernetes v1.34.4

replace k8s.io/api => k8s.io/api v0.34.4
"""


@pytest.fixture
def module(tmp_path: Path) -> Path:
    directory = tmp_path / "module"
    (directory / "cmd" / "etcd").mkdir(parents=True)
    (directory / "go.mod").write_text(GO_MOD)
    (directory / "go.sum").write_text("k8s.io/kubernetes v1.34.4 h1:abc=\n")
    (directory / "cmd" / "etcd" / "main.go").write_text("package main\n")
    return directory


def _install_fake_binaries(directory: Path) -> None:
    directory.mkdir(parents=True)
    for name in binaries.COMPONENTS:
        path = directory / name
        path.write_text("#!/bin/sh\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_version_comes_from_the_kubernetes_require_line_of_go_mod(module: Path) -> None:
    assert binaries.kubernetes_version(module) == "v1.34.4"


def test_the_repository_module_pins_a_release_with_a_matching_staging_replace_for_every_k8s_module() -> None:
    module = binaries.module_dir()
    version = binaries.kubernetes_version(module)
    staging_version = "v0." + version.split(".", 1)[1]
    replaces = [line for line in (module / "go.mod").read_text().splitlines() if "=> k8s.io/" in line]
    assert replaces
    assert all(line.rstrip().endswith(staging_version) for line in replaces)


def test_cache_directory_is_keyed_by_version_under_the_xdg_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(binaries.BIN_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/cache")
    assert binaries.binaries_dir("v1.34.4") == Path("/cache/kubetrain/envtest/v1.34.4")


def test_bin_dir_environment_variable_overrides_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(binaries.BIN_DIR_ENV, "/opt/k8s")
    assert binaries.binaries_dir("v1.34.4") == Path("/opt/k8s")


def test_binaries_built_from_the_same_module_are_current(
    module: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(binaries.BIN_DIR_ENV, raising=False)
    located = binaries.locate(module)
    _install_fake_binaries(located.directory)
    info = {"fingerprint": binaries.module_fingerprint(module)}
    (located.directory / binaries.BUILD_INFO).write_text(json.dumps(info))
    assert binaries.is_current(located, module)


def test_a_changed_go_sum_makes_the_cached_binaries_stale(
    module: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(binaries.BIN_DIR_ENV, raising=False)
    located = binaries.locate(module)
    _install_fake_binaries(located.directory)
    info = {"fingerprint": binaries.module_fingerprint(module)}
    (located.directory / binaries.BUILD_INFO).write_text(json.dumps(info))
    (module / "go.sum").write_text("k8s.io/kubernetes v1.34.4 h1:changed=\n")
    assert not binaries.is_current(located, module)


def test_a_missing_binary_makes_the_set_incomplete(tmp_path: Path) -> None:
    _install_fake_binaries(tmp_path / "bin")
    (tmp_path / "bin" / "etcd").unlink()
    assert binaries.Binaries("v1.34.4", tmp_path / "bin").missing() == ["etcd"]


def test_ldflags_stamp_the_release_into_client_and_server_version_packages() -> None:
    flags = binaries.ldflags("v1.34.4")
    assert "-X k8s.io/component-base/version.gitVersion=v1.34.4" in flags
    assert "-X k8s.io/client-go/pkg/version.gitMinor=34" in flags


def test_build_command_builds_all_five_binaries_in_one_go_build(tmp_path: Path) -> None:
    command = binaries.build_command("go", "v1.34.4", tmp_path)
    assert command[:2] == ["go", "build"]
    assert "k8s.io/kubernetes/cmd/kubectl" in command
    assert binaries.ETCD_PACKAGE in command
    assert "providerless" in command
