"""Reading job manifests: YAML or JSON documents into typed ``TrainingJob`` models."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from kubetrain.api.crd import replica_map_field
from kubetrain.api.errors import FieldError, InvalidJobError, from_pydantic
from kubetrain.api.jobs import JOB_MODELS, TrainingJob
from kubetrain.api.jobset_run import JobSetRun

if TYPE_CHECKING:
    import yaml

_RUNNABLE_MODELS: tuple[type[TrainingJob], ...] = (*JOB_MODELS, JobSetRun)
MODELS_BY_TYPE: dict[tuple[str, str], type[TrainingJob]] = {
    (model.API_VERSION, model.KIND): model for model in _RUNNABLE_MODELS
}


def model_for(api_version: str, kind: str) -> type[TrainingJob]:
    try:
        return MODELS_BY_TYPE[(api_version, kind)]
    except KeyError:
        supported = ", ".join(f"{k} ({v})" for v, k in sorted(MODELS_BY_TYPE))
        raise InvalidJobError(
            [
                FieldError(
                    "kind",
                    f"unsupported apiVersion/kind {api_version}/{kind}; supported: {supported}",
                )
            ]
        ) from None


MAX_NESTING = 64
"""How deeply a manifest may nest. A pod template's deepest real field is about 15 levels down; far
deeper input is hostile and would exhaust the recursion of every later step that copies it."""

MAX_VALUES = 200_000
"""How many values (objects, lists, scalars) one manifest may hold. Real jobs hold hundreds; YAML
aliases can make a small file expand to billions, which every later step would walk."""


def parse_job(obj: Mapping[str, Any], *, strict: bool = False) -> TrainingJob:
    """Turn a wire dict into its typed model.

    ``strict=True`` is for user input: unknown fields are errors. Objects read from a server are
    parsed leniently so that fields a newer server added do not break reads. Anything the model
    cannot read is an ``InvalidJobError`` naming the field.
    """
    if not isinstance(obj, Mapping):
        raise InvalidJobError([FieldError("", f"a job manifest must be a mapping, got {type(obj).__name__}")])
    nesting_errors = _nesting_errors(obj)
    if nesting_errors:
        raise InvalidJobError(nesting_errors)
    model = model_for(_text(obj.get("apiVersion")), _text(obj.get("kind")))
    try:
        return model.model_validate(dict(obj), context={"strict": strict})
    except ValidationError as error:
        raise from_pydantic(error) from None


def job_shell(obj: Mapping[str, Any]) -> TrainingJob:
    """What can be read of a job whose spec the model cannot read: its identity, status and managedBy.

    The operator fails such a job (reason ``InvalidSpec``) rather than retrying it; for that it needs
    the job's metadata and conditions, not its spec. Raises ``InvalidJobError`` for an unknown kind.
    """
    model = model_for(_text(obj.get("apiVersion")), _text(obj.get("kind")))
    spec = obj.get("spec")
    run_policy = spec.get("runPolicy") if isinstance(spec, Mapping) else None
    managed_by = run_policy.get("managedBy") if isinstance(run_policy, Mapping) else None
    shell: dict[str, Any] = {
        "apiVersion": model.API_VERSION,
        "kind": model.KIND,
        "metadata": obj.get("metadata"),
        "spec": {
            replica_map_field(model): {},
            **({"runPolicy": {"managedBy": managed_by}} if isinstance(managed_by, str) else {}),
        },
    }
    try:
        return model.model_validate({**shell, "status": obj.get("status") or {}})
    except ValidationError:
        # An unreadable status is rebuilt from scratch: the Failed condition is what matters.
        try:
            return model.model_validate(shell)
        except ValidationError as error:
            raise from_pydantic(error) from None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _nesting_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    """The first path nested deeper than ``MAX_NESTING``, or too many values in all.

    Iterative, so depth itself cannot overflow the stack, and it stops after ``MAX_VALUES``."""
    stack: list[tuple[Any, str, int]] = [(obj, "", 0)]
    seen = 0
    while stack:
        value, path, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            return [FieldError("", f"Too many: the manifest holds more than {MAX_VALUES} values")]
        if depth > MAX_NESTING:
            return [FieldError(path, f"Invalid value: nested more than {MAX_NESTING} levels deep")]
        if isinstance(value, Mapping):
            stack += [
                (child, f"{path}.{key}" if path else str(key), depth + 1) for key, child in value.items()
            ]
        elif isinstance(value, list):
            stack += [(child, f"{path}[{index}]", depth + 1) for index, child in enumerate(value)]
    return []


@functools.cache
def _unique_key_loader() -> type[yaml.SafeLoader]:
    """libyaml's ``SafeLoader`` (about 10x faster) that refuses a key written twice in one mapping, as
    ``kubectl`` does: PyYAML would silently keep the last value, so the job would run with a setting its
    author did not see. Made on first use: commands that read no YAML (``get``) skip importing yaml."""
    import yaml

    safe_loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class UniqueKeyLoader(safe_loader):  # type: ignore[valid-type,misc]
        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # `<<: *anchor` may be overridden by the keys written beside it
                key = self.construct_object(key_node, deep=deep)
                if isinstance(key, list | dict):
                    raise yaml.constructor.ConstructorError(
                        None, None, "a mapping key must be a scalar", key_node.start_mark
                    )
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r}", key_node.start_mark
                    )
                seen.add(key)
            mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
            return mapping

    return UniqueKeyLoader


def load_documents(text: str) -> list[dict[str, Any]]:
    import yaml

    try:
        docs = [d for d in yaml.load_all(text, Loader=_unique_key_loader()) if d is not None]
    except yaml.YAMLError as error:
        raise InvalidJobError([FieldError("", f"not valid YAML: {error}")]) from None
    except (ValueError, RecursionError) as error:
        # A number past Python's 4,300-digit conversion limit, or nesting deeper than the parser's stack.
        reason = "nested too deeply" if isinstance(error, RecursionError) else str(error)
        raise InvalidJobError([FieldError("", f"not valid YAML: {reason}")]) from None
    for doc in docs:
        if not isinstance(doc, dict):
            raise InvalidJobError(
                [FieldError("", f"each YAML document must be a mapping, got {type(doc).__name__}")]
            )
    return docs


def load_jobs(path: Path, *, strict: bool = True) -> list[TrainingJob]:
    """Every job in a manifest file (``-`` is not special: callers read stdin themselves)."""
    return [parse_job(doc, strict=strict) for doc in load_documents(path.read_text())]
