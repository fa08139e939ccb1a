"""Test oracles for generated CRDs: the Kubernetes structural-schema rules and a CEL evaluator.

Both are written from the Kubernetes documentation, independently of the generator, so a bug in
the generator cannot hide in the check. The CEL evaluator walks a schema and an object together,
the way the API server does: each rule sees its own node as ``self`` (and the old object's node as
``oldSelf`` on update, when one exists).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import celpy
from celpy.adapter import json_to_cel

Schema = Mapping[str, Any]

_ALLOWED_KEYWORDS = {
    "type",
    "description",
    "properties",
    "additionalProperties",
    "items",
    "required",
    "enum",
    "format",
    "default",
    "minimum",
    "maximum",
    "maxProperties",
    "minProperties",
    "maxItems",
    "minItems",
    "maxLength",
    "minLength",
    "pattern",
    "nullable",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string",
    "x-kubernetes-validations",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
}
_TYPES = {"object", "array", "string", "integer", "number", "boolean"}


def structural_violations(root: Schema) -> list[str]:
    """Every way ``root`` breaks the rules of a structural schema (empty when it is structural)."""
    problems = list(_walk_structural(root, "<root>"))
    if root.get("type") != "object":
        problems.append("<root>: the root must be type object")
    if "additionalProperties" in root:
        problems.append("<root>: additionalProperties is not allowed at the root")
    metadata = root.get("properties", {}).get("metadata", {})
    if set(metadata) - {"type", "properties"} or set(metadata.get("properties", {})) - {
        "name",
        "generateName",
    }:
        problems.append("<root>.metadata: only name and generateName may be restricted")
    return problems


def _walk_structural(node: Schema, path: str) -> Iterator[str]:
    unknown = set(node) - _ALLOWED_KEYWORDS
    if unknown:
        yield f"{path}: keywords not allowed in a structural schema: {sorted(unknown)}"
    if node.get("x-kubernetes-int-or-string"):
        if "type" in node:
            yield f"{path}: an int-or-string node must not set type"
    elif node.get("type") not in _TYPES:
        yield f"{path}: every node needs a type, got {node.get('type')!r}"
    if "properties" in node and "additionalProperties" in node:
        yield f"{path}: properties and additionalProperties are mutually exclusive"
    if node.get("type") == "array" and "items" not in node:
        yield f"{path}: an array needs items"
    if node.get("x-kubernetes-preserve-unknown-fields") and node.get("type") != "object":
        yield f"{path}: x-kubernetes-preserve-unknown-fields belongs on an object"
    # The API server itself knows the root metadata; any other empty object would lose its content.
    if (
        node.get("type") == "object"
        and path != "<root>.metadata"
        and not ("properties" in node or "additionalProperties" in node)
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        yield f"{path}: an object without fields would be pruned to {{}}"
    for value in node.get("enum", []):
        if node.get("type") == "string" and not isinstance(value, str):
            yield f"{path}: enum value {value!r} is not a string"
    for rule in node.get("x-kubernetes-validations", []):
        if set(rule) != {"rule", "message"} or not rule["message"]:
            yield f"{path}: a validation needs a rule and a message, got {rule}"
    for name, child in node.get("properties", {}).items():
        yield from _walk_structural(child, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), Mapping):
        yield from _walk_structural(node["additionalProperties"], f"{path}.*")
    elif "additionalProperties" in node:
        yield f"{path}: additionalProperties must be a schema"
    if "items" in node:
        yield from _walk_structural(node["items"], f"{path}[]")


def validation_rules(node: Schema) -> Iterator[str]:
    """Every CEL rule in a schema."""
    for rule in node.get("x-kubernetes-validations", []):
        yield rule["rule"]
    for child in node.get("properties", {}).values():
        yield from validation_rules(child)
    if isinstance(node.get("additionalProperties"), Mapping):
        yield from validation_rules(node["additionalProperties"])
    if "items" in node:
        yield from validation_rules(node["items"])


_ENVIRONMENT = celpy.Environment()


def compile_rule(rule: str) -> celpy.Runner:
    return _ENVIRONMENT.program(_ENVIRONMENT.compile(rule))


def cel_violations(schema: Schema, new: Any, old: Any = None) -> list[str]:
    """The messages of every CEL rule ``new`` breaks; transition rules only where ``old`` has the node."""
    found: list[str] = []
    _evaluate(schema, new, old, found)
    return found


def _evaluate(node: Schema, value: Any, old: Any, found: list[str]) -> None:
    for rule in node.get("x-kubernetes-validations", []):
        is_transition = "oldSelf" in rule["rule"]
        if is_transition and old is None:
            continue
        activation = {"self": json_to_cel(value)}
        if is_transition:
            activation["oldSelf"] = json_to_cel(old)
        if not compile_rule(rule["rule"]).evaluate(activation):
            found.append(rule["message"])
    if isinstance(value, Mapping):
        old_map = old if isinstance(old, Mapping) else {}
        for key, child in value.items():
            child_schema = node.get("properties", {}).get(key)
            if child_schema is None and isinstance(node.get("additionalProperties"), Mapping):
                child_schema = node["additionalProperties"]
            if child_schema is not None:
                _evaluate(child_schema, child, old_map.get(key), found)
    elif isinstance(value, list) and "items" in node:
        # Lists here are atomic: their items have no old counterpart, as on the API server.
        for item in value:
            _evaluate(node["items"], item, None, found)
