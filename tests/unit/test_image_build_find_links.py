"""Image builds install from the wheels the host's pip looks at first (``PIP_FIND_LINKS``), like the venv."""

from __future__ import annotations

from pathlib import Path

import pytest

from image_recipes import images


@pytest.fixture
def find_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    wheels = tmp_path / "host-wheels"
    wheels.mkdir()
    monkeypatch.setenv("PIP_FIND_LINKS", f"{wheels} https://example.invalid/simple {tmp_path / 'absent'}")
    monkeypatch.setattr(images, "WHEELHOUSE", tmp_path / "cache" / "wheels")
    (tmp_path / "cache").mkdir()
    return wheels


def test_a_build_mounts_the_hosts_find_links_directories_read_only_and_a_pip_conf_naming_them(
    find_links: Path,
) -> None:
    volumes = images.find_links_volumes()

    mounts = [volumes[i + 1] for i in range(0, len(volumes), 2)]
    assert f"{find_links}:/find-links/0:ro" in mounts
    config = Path(next(m for m in mounts if m.endswith(":/etc/pip.conf:ro")).split(":")[0])
    assert config.read_text() == "[global]\nfind-links =\n    /find-links/0\n"
    assert len(mounts) == 2  # neither the URL nor the missing directory


def test_a_wheel_added_to_the_hosts_find_links_changes_the_pip_images_recipes(find_links: Path) -> None:
    before = {name: images.recipe_hash(name) for name in ("pytorch", "python")}

    (find_links / "torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl").write_bytes(b"")

    assert images.recipe_hash("pytorch") != before["pytorch"]
    assert images.recipe_hash("python") == before["python"]  # no pip in it


def test_without_find_links_a_build_mounts_nothing_more(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)

    assert images.find_links_volumes() == []
