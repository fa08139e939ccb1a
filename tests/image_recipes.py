"""tools/images/build.py, the image recipes, loaded for tests (a script, not an installed module)."""

from __future__ import annotations

import shutil
import subprocess

from scripts import CHECKOUT, load_script

BUILD_SCRIPT = CHECKOUT / "tools" / "images" / "build.py"
images = load_script("tools/images/build.py", "kubetrain_images_build")


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
