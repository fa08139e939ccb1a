"""Admission: a job as stored becomes a defaulted, validated job, or an error naming every bad field."""

from __future__ import annotations

from typing import Any, TypeVar

from kubetrain.api.errors import FieldError, InvalidJobError
from kubetrain.api.jobs import TrainingJob
from kubetrain.api.validation import non_negative_errors
from kubetrain.frameworks.base import Framework
from kubetrain.frameworks.registry import framework_for

JobT = TypeVar("JobT", bound=TrainingJob)


def counts_errors(job: TrainingJob) -> list[FieldError]:
    """Counts and durations no kind may have negative (the CRD schema says so too, but local runs
    and objects that bypassed it reach the engine without it)."""
    errors: list[FieldError] = []
    for replica_type, spec in job.replica_specs.items():
        errors += non_negative_errors(f"{job.replica_specs_path}.{replica_type}.replicas", spec.replicas)
    policy = job.run_policy
    for name, value in (
        ("ttlSecondsAfterFinished", policy.ttl_seconds_after_finished),
        ("activeDeadlineSeconds", policy.active_deadline_seconds),
        ("backoffLimit", policy.backoff_limit),
    ):
        errors += non_negative_errors(f"spec.runPolicy.{name}", value)
    return errors


def admit(job: JobT, framework: Framework[Any] | None = None) -> JobT:
    """The framework's defaults applied (in a copy) and every validation rule checked.

    Raises ``InvalidJobError`` listing every ``FieldError`` found, so one run of ``plan`` or
    ``submit`` shows the user all there is to fix.
    """
    framework = framework or framework_for(job)
    defaulted: JobT = framework.set_defaults(job)
    errors = counts_errors(defaulted) + framework.validate(defaulted)
    if errors:
        raise InvalidJobError(errors)
    return defaulted
