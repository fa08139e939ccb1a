"""A Go tool is rebuilt when what it is built from changes: its go.mod or go.sum, or its build flags."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kubetrain.envtest.gotool import GoTool


@pytest.fixture
def tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GoTool:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    module = tmp_path / "module"
    module.mkdir()
    (module / "go.mod").write_text("module example.com/tool\n\nrequire example.com/cmd v1.0.0\n")
    (module / "go.sum").write_text("")
    return GoTool("tool", module, "example.com/cmd", "cmd", "v1.0.0", "TOOL_BINARY")


def test_a_tool_is_cached_per_version_under_kubetrain_cache(tool: GoTool, tmp_path: Path) -> None:
    assert tool.path == tmp_path / "cache" / "kubetrain" / "tool" / "v1.0.0" / "cmd"


def test_changed_build_flags_change_the_fingerprint(tool: GoTool) -> None:
    assert replace(tool, build_flags=("-tags", "providerless")).fingerprint() != tool.fingerprint()


def test_a_changed_go_sum_changes_the_fingerprint(tool: GoTool) -> None:
    before = tool.fingerprint()
    (tool.module / "go.sum").write_text("example.com/cmd v1.0.0 h1:abc=\n")

    assert tool.fingerprint() != before


def test_a_built_binary_with_the_current_fingerprint_is_not_rebuilt(tool: GoTool) -> None:
    tool.directory.mkdir(parents=True)
    tool.path.write_text("#!/bin/sh\n")
    tool.path.chmod(0o755)
    (tool.directory / "fingerprint").write_text(tool.fingerprint() + "\n")

    assert tool.ensure_built() == tool.path  # no Go toolchain is needed, so no build ran


def test_the_environment_variable_names_a_binary_to_use_instead(
    tool: GoTool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TOOL_BINARY", str(tmp_path / "elsewhere"))

    assert tool.ensure_built() == tmp_path / "elsewhere"


def test_a_required_modules_source_is_downloaded_when_gos_module_cache_lacks_it(
    tool: GoTool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A stand-in for `go` whose module cache is empty until `go mod download` fills it: `go list -m` would
    # answer an empty directory here.
    cache = tmp_path / "gomodcache" / "example.com" / "cmd@v1.0.0"
    fake_go = tmp_path / "go"
    fake_go.write_text(
        "#!/bin/sh\n"
        f'if [ "$1 $2 $3 $4" = "mod download -json example.com/cmd" ]; then mkdir -p {cache}; '
        f'printf \'{{"Path": "example.com/cmd", "Dir": "{cache}"}}\\n\'; else echo; fi\n'
    )
    fake_go.chmod(0o755)
    monkeypatch.setattr(GoTool, "go", lambda self: str(fake_go))

    assert tool.module_dir("example.com/cmd") == cache
    assert cache.is_dir()
