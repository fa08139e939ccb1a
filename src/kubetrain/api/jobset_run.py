"""A planned JobSet as a job the local runner can run: each replicated job a replica type, each of its pods a
replica (index ``jobIndex * parallelism + completionIndex``).

Kubernetes runs a TrainJob's JobSet with the JobSet and Job controllers; on one machine nothing does, so the
planned JobSet is turned into this shape and run by the same engine as every other kind
(``frameworks.jobset_run`` says how a JobSet succeeds, fails and starts its jobs in order). It is an internal
kind: users write TrainJobs (or JobSets); ``kubetrain run`` records the run under it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from kubetrain.api.base import WireModel
from kubetrain.api.common import ReplicaSpec
from kubetrain.api.jobs import JobSpec, TrainingJob
from kubetrain.api.progress import TRAINJOB_REPORT_LIMITS, StatusRoute

API_VERSION = "kubetrain.dev/v1alpha1"


class ReplicatedJobShape(WireModel):
    """What the engine cannot read from a replica spec: how a replicated job's pods group into Jobs."""

    jobs: int = 1
    """The JobSet's ``replicas`` of it: how many Jobs."""
    parallelism: int = 1
    """Pods per Job (its ``parallelism`` and ``completions``, Indexed)."""
    depends_on: list[dict[str, str]] | None = None
    """JobSet's ``dependsOn``: ``[{name, status: Ready|Complete}]``."""


class MPIRun(WireModel):
    """An MPI runtime's JobSet on one host: mpirun in the launcher starts every rank here."""

    launcher: str = "launcher"
    """The replicated job that runs mpirun (the only one started on one host)."""
    slots: int = 1
    """Ranks in all: every node's slots (the hostfile's, summed)."""


class JobSetRunSpec(JobSpec):
    REPLICA_SPECS_FIELD: ClassVar[str] = "replicated_jobs"
    replicated_jobs: dict[str, ReplicaSpec]
    """Each replicated job's pods: ``replicas`` = Jobs x parallelism, the pod template, the restart policy."""
    shapes: dict[str, ReplicatedJobShape] = Field(default_factory=dict)
    """How each replicated job's pods group into Jobs, and what it waits for."""
    success_policy: dict[str, Any] | None = None
    """JobSet's ``successPolicy``: ``operator`` (All, Any) over ``targetReplicatedJobs`` (default: all)."""
    trainjob: dict[str, Any] | None = None
    """The TrainJob this run carries out, as written (what listings show)."""
    mpi: MPIRun | None = None
    """Set for an MPI runtime: on one host only its launcher runs, with every slot on this host."""


class JobSetRun(TrainingJob):
    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "JobSetRun"
    PLURAL: ClassVar[str] = "jobsetruns"
    api_version: str = API_VERSION
    kind: str = "JobSetRun"
    spec: JobSetRunSpec

    @property
    def shown_kind(self) -> str:
        """The TrainJob it carries out, which is what its author wrote and looks for."""
        return "TrainJob" if self.spec.trainjob is not None else self.KIND

    @classmethod
    def status_route(cls) -> StatusRoute:
        """A TrainJob's: its training reports to Trainer's path, within Trainer's limits."""
        return StatusRoute("trainer.kubeflow.org", "v1alpha1", "trainjobs", TRAINJOB_REPORT_LIMITS)
