"""The real node's image cache: a node starts with a clone of the cached containerd root that shares the
image data with the cache but never writes into it."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from kubetrain.envtest import imagecache

BLOB = Path("io.containerd.content.v1.content") / "blobs" / "sha256" / "ab12"
LAYER_FILE = (
    Path("io.containerd.snapshotter.v1.overlayfs") / "snapshots" / "1" / "fs" / "usr" / "bin" / "python"
)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KUBETRAIN_NODE_IMAGE_CACHE", str(tmp_path / "cache"))
    root = imagecache.containerd_root()
    for path in (BLOB, LAYER_FILE, *imagecache.BOLT_DATABASES):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(str(path))
    return root


def test_a_node_shares_the_cached_image_data_by_hard_links(cache: Path, tmp_path: Path) -> None:
    node_root = tmp_path / "run" / "node" / "containerd" / "root"

    imagecache.clone_into(node_root)

    for path in (BLOB, LAYER_FILE):
        assert (node_root / path).stat().st_ino == (cache / path).stat().st_ino


def test_a_node_writes_its_own_copy_of_containerds_databases(cache: Path, tmp_path: Path) -> None:
    node_root = tmp_path / "node-root"

    imagecache.clone_into(node_root)
    for database in imagecache.BOLT_DATABASES:
        (node_root / database).write_text("this run's containers")

    for database in imagecache.BOLT_DATABASES:
        assert (cache / database).read_text() == str(database)


def test_a_node_that_already_has_a_containerd_root_keeps_it(cache: Path, tmp_path: Path) -> None:
    node_root = tmp_path / "node-root"
    node_root.mkdir()

    imagecache.clone_into(node_root)

    assert list(node_root.iterdir()) == []


def test_an_empty_cache_gives_an_empty_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBETRAIN_NODE_IMAGE_CACHE", str(tmp_path / "cache"))
    node_root = tmp_path / "node-root"

    imagecache.clone_into(node_root)

    assert not node_root.exists()


def test_the_caches_containerd_imports_into_the_cache_and_runs_no_cri(cache: Path, tmp_path: Path) -> None:
    config = tomllib.loads(imagecache._containerd_config(tmp_path / "c.sock", tmp_path / "state"))

    assert config["root"] == str(cache)
    assert config["disabled_plugins"] == ["io.containerd.grpc.v1.cri"]
    assert config["state"] == str(tmp_path / "state")
