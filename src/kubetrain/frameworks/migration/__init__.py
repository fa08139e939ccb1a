"""v1 jobs as Kubeflow Trainer v2 TrainJobs: ``kubetrain migrate``'s conversion, pure.

A v1 job becomes a TrainJob (plus a namespaced TrainingRuntime named after it, unless a built-in runtime
carries it whole) whose processes find their peers as they did: the same env names, from Trainer's policies.
What does not carry over comes back as notes naming the v1 field and saying why; a kind no runtime can run as
it ran is refused, field by field. docs/migration.md ("From v1 jobs to TrainJob") has the whole mapping.
"""

from __future__ import annotations

from kubetrain.api.errors import FieldError
from kubetrain.api.jobs import JAXJob, MPIJob, MPIJobV2, PyTorchJob, TrainingJob, XGBoostJob
from kubetrain.api.trainer import MAX_NAME, NAME_PATTERN
from kubetrain.frameworks.migration.jax import JAXRendezvous
from kubetrain.frameworks.migration.mpi import migrate_mpi
from kubetrain.frameworks.migration.pytorch import PyTorchRendezvous
from kubetrain.frameworks.migration.refused import refusal
from kubetrain.frameworks.migration.result import Migration, Note, NotMigratableError
from kubetrain.frameworks.migration.single import Rendezvous, migrate_single
from kubetrain.frameworks.migration.xgboost import XGBoostRendezvous
from kubetrain.frameworks.registry import framework_for

__all__ = ["Migration", "NotMigratableError", "Note", "migrate"]

RENDEZVOUS: dict[type[TrainingJob], Rendezvous] = {
    PyTorchJob: PyTorchRendezvous(),
    XGBoostJob: XGBoostRendezvous(),
    JAXJob: JAXRendezvous(),
}


def migrate(job: TrainingJob) -> Migration:
    """``job`` (as written, not defaulted) as a TrainJob; ``NotMigratableError`` says why it cannot be one."""
    import re

    refused = refusal(job)
    if refused is not None:
        raise refused
    if not job.name or len(job.name) > MAX_NAME or not re.match(NAME_PATTERN, job.name):
        raise NotMigratableError(
            [
                FieldError(
                    "metadata.name",
                    f"{job.name!r} cannot name a TrainJob: it must be at most {MAX_NAME} lowercase letters, "
                    "digits and '-', starting with a letter",
                )
            ]
        )
    framework = framework_for(job)
    invalid = framework.validate(framework.set_defaults(job))
    if invalid:
        raise NotMigratableError(invalid)
    if isinstance(job, MPIJob | MPIJobV2):
        return migrate_mpi(job)
    return migrate_single(job, RENDEZVOUS[type(job)])
