"""docs/trainjob.md's runtime table names every built-in runtime with its framework label."""

from __future__ import annotations

import re

from docs_blocks import ROOT
from kubetrain.frameworks.trainer.builtin import builtin_runtimes
from kubetrain.frameworks.trainer.constants import FRAMEWORK_LABEL

PAGE = ROOT / "docs" / "trainjob.md"


def test_the_runtime_table_lists_every_built_in_runtime_with_its_framework() -> None:
    listed: dict[str, str] = {}
    for names, framework in re.findall(r"^\| (`[^|]+`) \| `([\w-]+)` \|", PAGE.read_text(), re.M):
        for name in re.findall(r"`([\w.-]+)`", names):
            listed[name] = framework
    shipped = {
        name: rt.metadata.labels[FRAMEWORK_LABEL]
        for name, rt in builtin_runtimes().items()
        if rt.metadata.labels
    }
    assert listed == shipped
