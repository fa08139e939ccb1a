"""Admission: a job as stored becomes a defaulted, validated job, or an error naming every bad field."""

from __future__ import annotations

from typing import Any, TypeVar

from kubetrain.api.errors import FieldError, InvalidJobError
from kubetrain.api.jobs import TrainingJob
from kubetrain.api.podtemplate import checked_pod_template_schema
from kubetrain.api.structural import schema_errors
from kubetrain.api.validation import invalid, non_negative_errors
from kubetrain.engine.fault_policy import fault_policy_errors
from kubetrain.engine.progress import progress_deadline_errors
from kubetrain.engine.types import ReplicaLimits
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


def size_errors(job: TrainingJob, limits: ReplicaLimits) -> list[FieldError]:
    """Replica counts over the limits: a job may not ask for more than a cluster could ever run.

    Checked on the job as written, before defaulting: nothing per replica (names, statuses,
    expectations, plans, processes) may be built for a count that is refused anyway."""
    errors: list[FieldError] = []
    total = 0
    for replica_type, spec in job.replica_specs.items():
        count = spec.replicas or 0
        total += max(count, 0)
        if count > limits.per_type:
            errors.append(
                invalid(
                    f"{job.replica_specs_path}.{replica_type}.replicas",
                    _count(count),
                    f"must be at most {limits.per_type} (the limit per replica type; the operator's "
                    "--max-replicas-per-type sets it)",
                )
            )
    if total > limits.per_job and not errors:
        errors.append(
            invalid(
                job.replica_specs_path,
                _count(total),
                f"replicas of all types add up to more than {limits.per_job} "
                "(the limit per job; the operator's --max-replicas-per-job sets it)",
            )
        )
    return errors


def _count(value: int) -> int | str:
    # str() of an int past 4,300 digits raises; such a count is shown by its size.
    return value if value.bit_length() <= 64 else f"a number of {value.bit_length()} bits"


def template_errors(job: TrainingJob) -> list[FieldError]:
    """Pod-template fields kubetrain reads or writes, checked against the schema the CRD carries."""
    schema = checked_pod_template_schema()
    errors: list[FieldError] = []
    for replica_type, spec in job.replica_specs.items():
        errors += schema_errors(spec.template, schema, f"{job.replica_specs_path}.{replica_type}.template")
    return errors


def admit(job: JobT, framework: Framework[Any] | None = None, limits: ReplicaLimits | None = None) -> JobT:
    """The framework's defaults applied (in a copy) and every validation rule checked.

    Raises ``InvalidJobError`` listing every ``FieldError`` found, so one run of ``plan`` or
    ``submit`` shows the user all there is to fix. Sizes and template types are checked first, on
    the job as written: defaulting reads the templates, and nothing may be built for a refused size.
    """
    early = size_errors(job, limits or ReplicaLimits()) + template_errors(job)
    if early:
        raise InvalidJobError(early)
    framework = framework or framework_for(job)
    defaulted: JobT = framework.set_defaults(job)
    errors = (
        counts_errors(defaulted)
        + progress_deadline_errors(defaulted)
        + fault_policy_errors(defaulted, framework)
        + framework.validate(defaulted)
    )
    if errors:
        raise InvalidJobError(errors)
    return defaulted
