"""A command in a private mount namespace sees directories bound at paths the host does not have, and the
host keeps no trace of them: no mount point, no parent directory (a ServiceAccount directory left on a machine
makes Kubeflow's SDK take it for a pod). The real runs need root, as the peers harness does."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kubetrain.envtest.private_mounts import in_private_mounts, private_mounts_script
from waiting import PATIENCE

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="mount namespaces need root and unshare"
)


def run(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=PATIENCE)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """The directory to bind: a ServiceAccount's files, as the peers harness writes them."""
    directory = tmp_path / "serviceaccount"
    directory.mkdir()
    (directory / "namespace").write_text("kubeflow-system")
    return directory


@pytest.fixture
def parent(tmp_path: Path) -> Path:
    """An existing directory with one entry of each kind, under which the target path is missing."""
    directory = tmp_path / "run"
    (directory / "user").mkdir(parents=True)
    (directory / "user" / "note").write_text("kept\n")
    (directory / "machine-id").write_text("host\n")
    (directory / ".hidden").write_text("hidden\n")
    (directory / "-dash").write_text("dash\n")
    (directory / "lock").symlink_to("user/note")
    return directory


def entries(directory: Path) -> list[str]:
    return sorted(str(path.relative_to(directory)) for path in directory.rglob("*"))


def test_the_script_binds_each_source_at_its_target_then_runs_the_command() -> None:
    script = private_mounts_script({Path("/var/run/x y"): Path("/state/sa"), Path("/tmp/certs"): Path("/c")})

    assert script.splitlines()[-3:] == [
        "bind_at /state/sa '/var/run/x y'",
        "bind_at /c /tmp/certs",
        'exec "$@"',
    ]


def test_the_command_follows_the_script_as_its_arguments() -> None:
    wrapped = in_private_mounts(["trainer", "--config=c.yaml"], {Path("/t"): Path("/s")})

    assert wrapped[:5] == ["unshare", "--mount", "--propagation", "private", "--"]
    assert wrapped[-3:] == ["sh", "trainer", "--config=c.yaml"]


def test_a_relative_target_is_refused() -> None:
    with pytest.raises(ValueError, match="absolute"):
        in_private_mounts(["true"], {Path("var/run/secrets"): Path("/s")})


@needs_root
def test_a_missing_target_is_seen_by_the_command_and_never_made_on_the_host(
    source: Path, parent: Path
) -> None:
    target = parent / "secrets" / "kubernetes.io" / "serviceaccount"
    before = entries(parent)

    seen = run(in_private_mounts(["cat", str(target / "namespace")], {target: source}))

    assert seen == "kubeflow-system"
    assert entries(parent) == before


@needs_root
def test_the_parent_keeps_every_entry_it_had_for_the_command(source: Path, parent: Path) -> None:
    target = parent / "secrets" / "serviceaccount"
    listing = [
        "sh",
        "-c",
        'cd "$1" && find . | sort && cat user/note lock .hidden ./-dash',
        "sh",
        str(parent),
    ]

    seen = run(in_private_mounts(listing, {target: source})).splitlines()

    assert seen[-4:] == ["kept", "kept", "hidden", "dash"]
    expected = [".", *(f"./{entry}" for entry in entries(parent))]
    expected += ["./secrets", "./secrets/serviceaccount", "./secrets/serviceaccount/namespace"]
    assert seen[:-4] == sorted(expected)


@needs_root
def test_a_file_the_command_writes_in_the_parent_reaches_the_host(source: Path, parent: Path) -> None:
    target = parent / "secrets" / "serviceaccount"

    run(
        in_private_mounts(
            ["sh", "-c", 'echo new > "$1"', "sh", str(parent / "user" / "note")], {target: source}
        )
    )

    assert (parent / "user" / "note").read_text() == "new\n"


@needs_root
def test_mounts_under_the_parent_stay_visible_to_the_command(source: Path, parent: Path) -> None:
    target = parent / "secrets" / "serviceaccount"
    inner = in_private_mounts(["cat", str(parent / "user" / "mounted")], {target: source})
    # The submount exists in an outer namespace of the test's own, so the host's mounts stay untouched.
    outer = 'mount -t tmpfs test "$1" && echo mounted > "$1/mounted" && shift && exec "$@"'
    command = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", outer, "sh"]

    seen = run([*command, str(parent / "user"), *inner])

    assert seen == "mounted\n"


@needs_root
def test_an_existing_target_is_bound_without_changing_it_on_the_host(source: Path, parent: Path) -> None:
    target = parent / "user"

    seen = run(in_private_mounts(["ls", str(target)], {target: source}))

    assert seen == "namespace\n"
    assert (target / "note").read_text() == "kept\n"
    assert not (target / "namespace").exists()
