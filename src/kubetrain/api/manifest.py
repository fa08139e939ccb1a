"""Reading job manifests: YAML or JSON documents into typed ``TrainingJob`` models."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from kubetrain.api.errors import FieldError, InvalidJobError, from_pydantic
from kubetrain.api.jobs import JOB_MODELS, TrainingJob

MODELS_BY_TYPE: dict[tuple[str, str], type[TrainingJob]] = {
    (model.API_VERSION, model.KIND): model for model in JOB_MODELS
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


def parse_job(obj: Mapping[str, Any], *, strict: bool = False) -> TrainingJob:
    """Turn a wire dict into its typed model.

    ``strict=True`` is for user input: unknown fields are errors. Objects read from a server are
    parsed leniently so that fields a newer server added do not break reads.
    """
    if not isinstance(obj, Mapping):
        raise InvalidJobError([FieldError("", f"a job manifest must be a mapping, got {type(obj).__name__}")])
    model = model_for(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    try:
        return model.model_validate(dict(obj), context={"strict": strict})
    except ValidationError as error:
        raise from_pydantic(error) from None


def load_documents(text: str) -> list[dict[str, Any]]:
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as error:
        raise InvalidJobError([FieldError("", f"not valid YAML: {error}")]) from None
    for doc in docs:
        if not isinstance(doc, dict):
            raise InvalidJobError(
                [FieldError("", f"each YAML document must be a mapping, got {type(doc).__name__}")]
            )
    return docs


def load_jobs(path: Path, *, strict: bool = True) -> list[TrainingJob]:
    """Every job in a manifest file (``-`` is not special: callers read stdin themselves)."""
    return [parse_job(doc, strict=strict) for doc in load_documents(path.read_text())]
