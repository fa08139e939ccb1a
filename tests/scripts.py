"""The project's scripts under tools/ (not installed modules), loaded from their files for tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

CHECKOUT = Path(__file__).resolve().parents[1]


def load_script(relative_path: str, name: str) -> ModuleType:
    """The script at ``relative_path`` in the checkout, as module ``name``."""
    spec = importlib.util.spec_from_file_location(name, CHECKOUT / relative_path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
