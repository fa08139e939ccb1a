"""A small validator for Kubernetes structural schemas: what the API server checks, done in-process.

The same schema that goes into a CRD (``api.crd``) is checked here, so a job that never meets an
API server (``kubetrain run``, ``plan``) or one stored before the schema had a rule (or under a CRD
without it) is refused with the same field path the API server would name. It covers the keywords
kubetrain's schemas use: ``type``, ``properties``, ``required``, ``additionalProperties``, ``items``,
``enum``, ``minimum``/``maximum``, ``maxItems``, ``maxLength``, ``maxProperties``, ``pattern`` and
``x-kubernetes-int-or-string``. CEL rules (``x-kubernetes-validations``) are not evaluated: the
frameworks' validation carries the same rules in Python.

Paths use Kubernetes' field-path syntax: ``.name`` for a field, ``[0]`` for a list item and
``[key]`` for a map entry (``metadata.labels[app.kubernetes.io/name]``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

from kubetrain.api.errors import FieldError, map_key

Schema = Mapping[str, Any]

MAX_ERRORS = 20
"""Errors reported for one value: enough to fix a manifest in one go, bounded for hostile input."""

_SHOWN_MAX = 40


def schema_errors(value: Any, schema: Schema, path: str, *, limit: int = MAX_ERRORS) -> list[FieldError]:
    """Every way ``value`` breaks ``schema`` (at most ``limit``), each at its wire path under ``path``."""
    found: list[FieldError] = []
    for error in _check(value, schema, path):
        found.append(error)
        if len(found) >= limit:
            break
    return found


def _check(value: Any, schema: Schema, path: str) -> Iterator[FieldError]:
    if schema.get("x-kubernetes-int-or-string"):
        if not (isinstance(value, str) or _is_int(value)):
            yield _wrong_type(path, "an integer or a string", value)
            return
    else:
        expected = schema.get("type")
        if expected is not None and not _has_type(value, expected):
            yield _wrong_type(path, _expected_words(schema), value)
            return
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(json.dumps(v) for v in schema["enum"])
        yield FieldError(path, f"Unsupported value: {_shown(value)}: supported values: {supported}")
        return
    if isinstance(value, str):
        yield from _check_string(value, schema, path)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield from _check_number(value, schema, path)
    elif isinstance(value, list):
        yield from _check_list(value, schema, path)
    elif isinstance(value, dict):
        yield from _check_object(value, schema, path)


def _check_string(value: str, schema: Schema, path: str) -> Iterator[FieldError]:
    limit = schema.get("maxLength")
    if limit is not None and len(value) > limit:
        yield FieldError(path, f"Too long: may not be more than {limit} characters, got {len(value)}")
    pattern = schema.get("pattern")
    if pattern is not None and not _compiled(pattern).search(value):
        yield FieldError(path, f"Invalid value: {_shown(value)}: {schema.get('description') or pattern}")


def _check_number(value: float, schema: Schema, path: str) -> Iterator[FieldError]:
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and value < low:
        yield FieldError(path, f"Invalid value: {_shown(value)}: must be greater than or equal to {low}")
    if high is not None and value > high:
        yield FieldError(path, f"Invalid value: {_shown(value)}: must be less than or equal to {high}")


def _check_list(value: list[Any], schema: Schema, path: str) -> Iterator[FieldError]:
    limit = schema.get("maxItems")
    if limit is not None and len(value) > limit:
        yield FieldError(path, f"Too many: {len(value)}: must have at most {limit} items")
        return
    items = schema.get("items")
    if items is not None:
        for index, item in enumerate(value):
            yield from _check(item, items, f"{path}[{index}]")


def _check_object(value: dict[Any, Any], schema: Schema, path: str) -> Iterator[FieldError]:
    limit = schema.get("maxProperties")
    if limit is not None and len(value) > limit:
        yield FieldError(path, f"Too many: {len(value)}: must have at most {limit} items")
        return
    for name in schema.get("required", ()):
        if value.get(name) is None:
            yield FieldError(_child(path, name), "Required value: must be specified")
    properties: Mapping[str, Schema] = schema.get("properties", {})
    for name, child in properties.items():
        if value.get(name) is not None:
            yield from _check(value[name], child, _child(path, name))
    values = schema.get("additionalProperties")
    if isinstance(values, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                yield FieldError(
                    f"{path}{map_key(key)}", f"Invalid value: {_shown(key)}: a map key must be a string"
                )
            elif item is None:
                # A null map value is "unset" on the wire (the API server drops it).
                continue
            else:
                yield from _check(item, values, f"{path}{map_key(key)}")


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _has_type(value: Any, expected: str) -> bool:
    if expected == "object":
        return isinstance(value, dict)
    if expected == "array":
        return isinstance(value, list)
    if expected == "string":
        return isinstance(value, str)
    if expected == "integer":
        return _is_int(value)
    if expected == "number":
        return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)
    if expected == "boolean":
        return isinstance(value, bool)
    return True


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _expected_words(schema: Schema) -> str:
    expected = schema.get("type")
    if expected == "object":
        names = list(schema.get("properties", {}))
        if names:
            shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
            return f"an object {{{shown}}}"
        values = schema.get("additionalProperties")
        if isinstance(values, Mapping) and values.get("type") == "string":
            return "a map of strings"
        return "an object"
    if expected == "array":
        items = schema.get("items", {})
        if items.get("type") == "string":
            return "a list of strings"
        if items.get("type") == "object":
            return f"a list of {_expected_words(items).replace('an object', 'objects', 1)}"
        return "a list"
    return {
        "string": "a string",
        "integer": "an integer",
        "number": "a number",
        "boolean": "true or false",
    }.get(str(expected), str(expected))


def _wrong_type(path: str, expected: str, value: Any) -> FieldError:
    return FieldError(path, f"Invalid value: {_shown(value)}: must be {expected}")


def _shown(value: Any) -> str:
    """A value as an error message may quote it: short, and never a whole nested structure."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if _is_int(value) and abs(value) > 10**_SHOWN_MAX:
        # str() of a huge int raises past 4300 digits; its size is what matters here.
        return "a number of more than 40 digits"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _SHOWN_MAX else text[: _SHOWN_MAX - 4] + '..."'


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)
