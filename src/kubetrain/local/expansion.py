"""``$(VAR)`` references in env values, command and args, expanded exactly as Kubernetes does.

Kubernetes (``third_party/forked/golang/expansion``) replaces ``$(NAME)`` with the value of a
variable the container defines, turns ``$$`` into a literal ``$`` (so ``$$(NAME)`` stays
``$(NAME)``) and leaves a reference to an unknown variable, or an unclosed one, as written. A
manifest that works on a cluster must mean the same thing here, so this is a faithful port rather
than ``os.path.expandvars``.
"""

from __future__ import annotations

from collections.abc import Mapping

_OPERATOR = "$"
_OPENER = "("
_CLOSER = ")"


def expand(text: str, variables: Mapping[str, str]) -> str:
    """``text`` with every ``$(NAME)`` whose ``NAME`` is in ``variables`` replaced."""
    out: list[str] = []
    checkpoint = 0
    cursor = 0
    while cursor < len(text):
        if text[cursor] == _OPERATOR and cursor + 1 < len(text):
            out.append(text[checkpoint:cursor])
            read, is_reference, advance = _read_reference(text[cursor + 1 :])
            if is_reference:
                out.append(variables.get(read, f"{_OPERATOR}{_OPENER}{read}{_CLOSER}"))
            else:
                out.append(read)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    out.append(text[checkpoint:])
    return "".join(out)


def _read_reference(rest: str) -> tuple[str, bool, int]:
    """What follows a ``$``: (text to emit or the name read, whether it is a name, chars consumed)."""
    first = rest[0]
    if first == _OPERATOR:
        return _OPERATOR, False, 1
    if first == _OPENER:
        closing = rest.find(_CLOSER, 1)
        if closing != -1:
            return rest[1:closing], True, closing + 1
        return _OPERATOR + _OPENER, False, 1
    return _OPERATOR + first, False, 1


def expand_all(items: list[str], variables: Mapping[str, str]) -> list[str]:
    return [expand(item, variables) for item in items]
