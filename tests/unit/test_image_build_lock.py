"""Two builds of one image at once (make's parallel lanes, two engineers) build it once: the second waits and
finds the recipe label current."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from image_recipes import images


def test_a_build_waits_for_a_running_build_of_the_same_image_and_then_finds_it_current(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(images, "LOCK_DIR", tmp_path / "locks")
    labels: dict[str, str] = {}
    builds: list[str] = []

    def slow_build(recipe: Any, digest: str, rebuild: bool = False) -> None:
        builds.append(recipe.name)
        time.sleep(0.2)  # long enough for the other thread to reach the lock
        labels[recipe.reference] = digest

    monkeypatch.setattr(images, "_build_rootfs", slow_build)
    monkeypatch.setattr(images, "_build_containerfile", slow_build)
    monkeypatch.setattr(images, "image_label", labels.get)
    monkeypatch.setattr(images, "image_size", lambda _: 0)

    threads = [threading.Thread(target=images.build, args=("pause", {"python"})) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert builds == ["pause"]
