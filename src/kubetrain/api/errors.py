"""Errors that name the field at fault and what would be valid there."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


@dataclass(frozen=True)
class FieldError:
    path: str
    """Dotted wire path, e.g. ``spec.pytorchReplicaSpecs.Master.replicas``."""
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class InvalidJobError(ValueError):
    """A job manifest that cannot be accepted; ``errors`` lists every problem found."""

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors))


def map_key(key: object) -> str:
    """A map entry's path step, ``[key]``; a key holding brackets is quoted (``["a]b"]``) so the
    path still reads back unambiguously."""
    text = str(key)
    return f"[{json.dumps(text, ensure_ascii=False)}]" if "[" in text or "]" in text else f"[{text}]"


def field_path(loc: tuple[int | str, ...], prefix: str = "") -> str:
    parts = [prefix] if prefix else []
    for item in loc:
        if isinstance(item, int):
            parts[-1:] = [f"{parts[-1]}[{item}]"] if parts else [f"[{item}]"]
        elif "[" in item or "]" in item:
            parts[-1:] = [f"{parts[-1]}{map_key(item)}"] if parts else [map_key(item)]
        else:
            parts.append(str(item))
    return ".".join(parts)


def from_pydantic(error: ValidationError, prefix: str = "") -> InvalidJobError:
    found: list[FieldError] = []
    for detail in error.errors(include_url=False):
        message = detail["msg"].removeprefix("Value error, ")
        if detail["type"] == "missing":
            message = "Required value: must be specified"
        elif detail["type"] == "enum":
            expected = detail.get("ctx", {}).get("expected", "")
            message = f"Unsupported value {detail['input']!r}: supported values: {expected}"
        found.append(FieldError(field_path(tuple(detail["loc"]), prefix), message))
    return InvalidJobError(found)
