"""``--pytorch-init-container-template-file``: the PyTorch workers' init containers from a user's file.

Upstream reads a Go template whose result is a YAML list of containers, with the variables
``.MasterAddr``, ``.InitContainerImage`` and ``.MaxTries``. Only those three substitutions are supported
(``{{.MasterAddr}}``, spaces allowed inside the braces): any other action is refused when the file is
read, so a template written for Go's richer language fails at start instead of rendering wrongly.
The template is checked once at start (it must render to a list of containers, each with ``name`` and
``image``) and rendered per job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

DEFAULT_TEMPLATE_PATH = Path("/etc/config/initContainer.yaml")
"""Upstream's default; when no file is there, the built-in container is used."""

VARIABLES = ("MasterAddr", "InitContainerImage", "MaxTries")
_ACTION = re.compile(r"\{\{(.*?)\}\}")
_VARIABLE = re.compile(r"\s*\.(" + "|".join(VARIABLES) + r")\s*")
_SUPPORTED = ", ".join("{{." + name + "}}" for name in VARIABLES)
_CHECK_VALUES = {"MasterAddr": "job-master-0", "InitContainerImage": "alpine:3.10", "MaxTries": 100}
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class InitTemplateError(ValueError):
    """The template file is missing, uses an unsupported action, or does not render to containers."""


@dataclass(frozen=True)
class InitContainerTemplateFile:
    """A parsed template: literal text between variable names, alternating (text, name, text, ...)."""

    source: str
    """Where the template came from, for messages."""
    parts: tuple[str, ...]

    def render_text(self, values: dict[str, Any]) -> str:
        return "".join(str(values[part]) if i % 2 else part for i, part in enumerate(self.parts))

    def __call__(self, *, master_addr: str, image: str, max_tries: int) -> list[dict[str, Any]]:
        values = {"MasterAddr": master_addr, "InitContainerImage": image, "MaxTries": max_tries}
        return _containers(self.render_text(values), self.source)


def parse_template(text: str, source: str) -> InitContainerTemplateFile:
    """Split ``text`` at its ``{{ }}`` actions and check it renders to a list of containers."""
    parts: list[str] = []
    position = 0
    for match in _ACTION.finditer(text):
        _refuse_unclosed(text, position, match.start(), source)
        variable = _VARIABLE.fullmatch(match.group(1))
        if variable is None:
            raise InitTemplateError(
                f"{source}, line {_line_of(text, match.start())}: unsupported template action "
                f"{match.group(0)!r}; only {_SUPPORTED} are supported"
            )
        parts += [text[position : match.start()], variable.group(1)]
        position = match.end()
    _refuse_unclosed(text, position, len(text), source)
    template = InitContainerTemplateFile(source, (*parts, text[position:]))
    _containers(template.render_text(_CHECK_VALUES), source)
    return template


def load_template(path: Path | None) -> InitContainerTemplateFile | None:
    """The template at ``path``; at upstream's default path when ``path`` is None, where a missing file
    means the built-in container (None). A path the user named must exist."""
    if path is None:
        if not DEFAULT_TEMPLATE_PATH.is_file():
            return None
        path = DEFAULT_TEMPLATE_PATH
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise InitTemplateError(f"cannot read {path}: {error.strerror or error}") from None
    return parse_template(text, str(path))


def _containers(rendered: str, source: str) -> list[dict[str, Any]]:
    try:
        loaded = yaml.load(rendered, Loader=_Loader)
    except yaml.MarkedYAMLError as error:
        # The construct's start (context) reads better than where the parser gave up (often the end).
        mark = error.context_mark or error.problem_mark
        where = f", line {mark.line + 1}" if mark is not None else ""
        problem = " ".join(filter(None, (error.context, error.problem)))
        raise InitTemplateError(f"{source}{where}: the rendered template is not YAML: {problem}") from None
    except yaml.YAMLError as error:
        raise InitTemplateError(f"{source}: the rendered template is not YAML: {error}") from None
    if not isinstance(loaded, list):
        raise InitTemplateError(
            f"{source}: the rendered template must be a YAML list of containers (- name: ..., image: ...)"
        )
    for index, container in enumerate(loaded):
        if not isinstance(container, dict):
            raise InitTemplateError(f"{source}: item {index} of the list is not a container (a mapping)")
        for key in ("name", "image"):
            if not isinstance(container.get(key), str) or not container[key]:
                raise InitTemplateError(f"{source}: container {index} needs a non-empty string {key!r}")
    return loaded


def _refuse_unclosed(text: str, start: int, end: int, source: str) -> None:
    """Literal text holds no ``{{``: an action spanning lines, or one never closed, is not supported."""
    opening = text.find("{{", start, end)
    if opening >= 0:
        raise InitTemplateError(
            f"{source}, line {_line_of(text, opening)}: '{{{{' is not closed by '}}}}' on the same line; "
            f"only {_SUPPORTED} are supported"
        )


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1
