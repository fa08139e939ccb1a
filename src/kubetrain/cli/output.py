"""Machine-readable output: YAML and JSON exactly as kubectl users expect to read them."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import yaml


@functools.cache
def _dumper() -> type[yaml.SafeDumper]:
    """No ``&id001`` anchors for repeated objects, and multi-line strings as ``|`` blocks. Made on first
    use: importing yaml is a noticeable part of a CLI command that prints a table."""
    import yaml

    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

    def represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, represent_str)
    return Dumper


def to_yaml(documents: Sequence[Any]) -> str:
    """Documents separated by ``---``, keys in the order given."""
    import yaml

    return yaml.dump_all(documents, Dumper=_dumper(), sort_keys=False, default_flow_style=False)


def to_json(value: Any) -> str:
    return json.dumps(value, indent=2)
