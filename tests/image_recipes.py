"""tools/images/build.py, the image recipes, loaded for tests (a script, not an installed module)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

BUILD_SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "images" / "build.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kubetrain_images_build", BUILD_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


images = load()


def reference(name: str) -> str:
    """localhost/kubetrain/<name>:<tag>, as `python tools/images/build.py NAME` names the image."""
    recipe_reference: str = images.RECIPES[name].reference
    return recipe_reference


def podman_problem() -> str | None:
    """Why images cannot be built or run here (podman missing or not working), or None."""
    if shutil.which("podman") is None:
        return "podman is not installed (`make image-tools` installs it)"
    info = subprocess.run(["podman", "info"], capture_output=True, text=True, timeout=60, check=False)
    if info.returncode != 0:
        return f"podman cannot run here: {info.stderr.strip().splitlines()[-1:]}"
    return None
