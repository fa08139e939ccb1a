"""Print the environment part of `kubetrain plan -o json` (read on stdin): for every container of every Pod
(or Job's pod template) its env, one NAME=value a line, and the data of every ConfigMap (MPI hostfiles).

The framework pages show this instead of the whole plan, so that they stay short: labels, owner references
and Services are the same for every framework (docs/migration.md)."""

from __future__ import annotations

import json
import sys
from typing import Any


def pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    if obj["kind"] == "Pod":
        return dict(obj["spec"])
    if obj["kind"] == "Job":  # the MPIJob v2beta1 launcher
        return dict(obj["spec"]["template"]["spec"])
    return None


def describe(obj: dict[str, Any]) -> list[str]:
    name = f"{obj['kind']} {obj['metadata']['name']}"
    if obj["kind"] == "ConfigMap":
        lines = [name]
        for key, value in sorted(obj.get("data", {}).items()):
            lines.append(f"  {key}:")
            lines.extend(f"    {line}" for line in str(value).splitlines())
        return lines
    spec = pod_spec(obj)
    if spec is None:
        return []
    lines = [name]
    for container in spec.get("initContainers", []) + spec.get("containers", []):
        lines.append(f"  container {container['name']}:")
        for var in container.get("env", []):
            value = var.get("value", "<from " + next(iter(var.get("valueFrom", {"?": 0}))) + ">")
            lines.append(f"    {var['name']}={value}")
    return lines


def main() -> None:
    described = [describe(obj) for obj in json.load(sys.stdin)]
    print("\n".join("\n".join(lines) for lines in described if lines))


if __name__ == "__main__":
    main()
