"""The base every wire model derives from: camelCase on the wire, tolerant or strict on input.

Objects read back from an API server may carry fields a newer server added, so unknown fields are
ignored by default. User input is validated with ``context={"strict": True}``: then an unknown
field is an error that names it and lists the valid ones, because a misspelt ``restartPolicy``
silently ignored is a job that behaves differently from what its author wrote.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    PlainSerializer,
    PlainValidator,
    ValidationInfo,
    model_validator,
)
from pydantic.alias_generators import to_camel


def _format_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


Time = Annotated[datetime, PlainSerializer(_format_time, return_type=str)]
"""A Kubernetes ``metav1.Time``: RFC 3339 in UTC with second precision on the wire."""


def _int_or_string(value: Any) -> int | str:
    # One check, one error: a plain ``int | str`` union reports a failure once per member, at
    # paths ending in ``.int`` and ``.str`` that exist in no manifest.
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("must be an integer or a string")
    return value


IntOrString = Annotated[int | str, PlainValidator(_int_or_string, json_schema_input_type=int | str)]
"""A Kubernetes ``IntOrString`` (ports by number or name, resource quantities)."""


class WireModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="ignore",
        # A command validates one or two kinds: building every model's validator at import cost the
        # CLI 0.06 to 0.1 s of CPU on each start (bench/cli_latency.py), so each is built on first use.
        defer_build=True,
        # Field docstrings become the CRDs' descriptions, but through api.crd's schema generator, not
        # pydantic's use_attribute_docstrings: that reads and tokenizes every model's source at import,
        # 0.05 s of every CLI command and operator start, for what only the CRD generator reads.
    )

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_fields_when_strict(cls, data: Any, info: ValidationInfo) -> Any:
        if not (info.context and info.context.get("strict")) or not isinstance(data, dict):
            return data
        known = {f.alias or name for name, f in cls.model_fields.items()} | set(cls.model_fields)
        unknown = sorted(str(key) for key in data if key not in known)
        if unknown:
            valid = ", ".join(sorted(f.alias or name for name, f in cls.model_fields.items()))
            raise ValueError(f"unknown field(s) {', '.join(unknown)}; valid fields are: {valid}")
        return data

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready dict the API server would store (camelCase, unset fields omitted)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
