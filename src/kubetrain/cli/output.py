"""Machine-readable output: YAML and JSON exactly as kubectl users expect to read them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import yaml


class _Dumper(yaml.SafeDumper):
    """No ``&id001`` anchors for repeated objects, and multi-line strings as ``|`` blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def to_yaml(documents: Sequence[Any]) -> str:
    """Documents separated by ``---``, keys in the order given."""
    return yaml.dump_all(documents, Dumper=_Dumper, sort_keys=False, default_flow_style=False)


def to_json(value: Any) -> str:
    return json.dumps(value, indent=2)
