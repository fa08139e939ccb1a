"""Admission: a job as stored becomes a defaulted, validated job, or an error naming every bad field."""

from __future__ import annotations

from typing import Any, TypeVar

from kubetrain.api.errors import InvalidJobError
from kubetrain.api.jobs import TrainingJob
from kubetrain.frameworks.base import Framework
from kubetrain.frameworks.registry import framework_for

JobT = TypeVar("JobT", bound=TrainingJob)


def admit(job: JobT, framework: Framework[Any] | None = None) -> JobT:
    """The framework's defaults applied (in a copy) and every validation rule checked.

    Raises ``InvalidJobError`` listing every ``FieldError`` found, so one run of ``plan`` or
    ``submit`` shows the user all there is to fix.
    """
    framework = framework or framework_for(job)
    defaulted: JobT = framework.set_defaults(job)
    errors = framework.validate(defaulted)
    if errors:
        raise InvalidJobError(errors)
    return defaulted
