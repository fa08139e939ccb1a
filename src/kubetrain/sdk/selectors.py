"""Label selectors as kubectl's ``-l`` takes them: ``a=b,c!=d,e,!f`` (equality and existence)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class Operator(StrEnum):
    EQUAL = "="
    NOT_EQUAL = "!="
    EXISTS = "exists"
    NOT_EXISTS = "!exists"


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: Operator
    value: str = ""

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator is Operator.EQUAL:
            return labels.get(self.key) == self.value
        if self.operator is Operator.NOT_EQUAL:
            return labels.get(self.key) != self.value
        if self.operator is Operator.EXISTS:
            return self.key in labels
        return self.key not in labels


def parse_selector(selector: str | None) -> list[Requirement]:
    """The requirements of ``selector``; ``ValueError`` naming the one that cannot be read."""
    if not selector:
        return []
    requirements = []
    for text in (r.strip() for r in selector.split(",")):
        if not text or " in " in text or "(" in text:
            raise ValueError(
                f"label selector {selector!r}: cannot read requirement {text!r}; "
                "use key=value, key!=value, key or !key, separated by commas"
            )
        if "!=" in text:
            key, value = (part.strip() for part in text.split("!=", 1))
            requirements.append(Requirement(key, Operator.NOT_EQUAL, value))
        elif "=" in text:
            key, value = (part.strip() for part in text.replace("==", "=").split("=", 1))
            requirements.append(Requirement(key, Operator.EQUAL, value))
        elif text.startswith("!"):
            requirements.append(Requirement(text[1:].strip(), Operator.NOT_EXISTS))
        else:
            requirements.append(Requirement(text, Operator.EXISTS))
    return requirements


def matches(selector: str | None, labels: Mapping[str, str]) -> bool:
    return all(r.matches(labels) for r in parse_selector(selector))
