"""How a JobSet runs, as rules the engine applies to a ``JobSetRun`` (the JobSet and Job controllers' part,
for the substrates that have none: ``kubetrain run``).

- Each replicated job is a replica type; its Jobs' pods are its replicas, each with its Job's completion
  index in the ``batch.kubernetes.io/job-completion-index`` annotation the downward API reads.
- A pod that fails is restarted (a Job retries failed pods) until the run's ``backoffLimit`` (the Jobs'
  ``backoffLimit``, Kubernetes' default 6) is spent; then its Job has failed, and so has the JobSet
  (``FailedJobs``). JobSet's ``failurePolicy.maxRestarts`` (re-creating every Job) is not carried out here.
- The JobSet completes (``AllJobsCompleted``) when every Job of its ``successPolicy`` targets has succeeded
  (``All``, the default) or any one has (``Any``).
- A replicated job with ``dependsOn`` starts once each named one is Ready (or done) or Complete.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from kubetrain.api.common import ConditionType, ReplicaSpec, RestartPolicy, RunPolicy
from kubetrain.api.errors import FieldError
from kubetrain.api.jobset_run import JobSetRun, JobSetRunSpec, MPIRun, ReplicatedJobShape
from kubetrain.frameworks.addressing import Addressing
from kubetrain.frameworks.base import (
    Awaited,
    ConditionProposal,
    EnvTarget,
    EnvVar,
    Framework,
    StatusContext,
)
from kubetrain.frameworks.mpi_common import OPEN_MPI_ROOT_ENV
from kubetrain.frameworks.trainer.constants import MPI_HOSTFILE_DIR, MPI_HOSTFILE_NAME

COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
JOB_INDEX_ANNOTATION = "jobset.sigs.k8s.io/job-index"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX_LABEL = JOB_INDEX_ANNOTATION
COMPLETION_INDEX_LABEL = COMPLETION_INDEX_ANNOTATION
"""The labels the JobSet and Job controllers put on every pod of a JobSet (the indexes as annotations too)."""
DEFAULT_BACKOFF_LIMIT = 6
"""A Job's ``backoffLimit`` when its template sets none (Kubernetes' default)."""
COMPLETED_REASON = "AllJobsCompleted"
COMPLETED_MESSAGE = "jobset completed successfully"
FAILED_REASON = "FailedJobs"
FAILED_MESSAGE = "jobset failed due to one or more job failures"


class JobSetRunFramework(Framework[JobSetRun]):
    model: ClassVar[type[JobSetRun]] = JobSetRun
    scheme_name: ClassVar[str] = "jobsetrun"
    framework_label: ClassVar[str] = "jobset"
    controller_name: ClassVar[str] = "jobsetrun-controller"
    replica_types: ClassVar[tuple[str, ...]] = ()
    """A JobSet's replica types are its replicated jobs' names: ``materialised_replica_types`` reads them."""
    default_container: ClassVar[str] = "node"
    default_port_name: ClassVar[str | None] = None
    default_port: ClassVar[int | None] = None
    default_restart_policy: ClassVar[RestartPolicy] = RestartPolicy.ON_FAILURE
    env_target: ClassVar[EnvTarget] = EnvTarget.ALL_CONTAINERS
    per_replica_services: ClassVar[bool] = False

    def set_defaults(self, job: JobSetRun) -> JobSetRun:
        return job

    def validate(self, job: JobSetRun) -> list[FieldError]:
        errors = []
        for name in job.replica_specs:
            for dependency in _shape(job, name).depends_on or []:
                if dependency.get("name") not in job.replica_specs:
                    errors.append(
                        FieldError(
                            f"spec.replicatedJobs.{name}.dependsOn",
                            f"names {dependency.get('name')!r}, which is no replicated job of this JobSet",
                        )
                    )
        return errors

    config_mount_path: ClassVar[str | None] = MPI_HOSTFILE_DIR
    """Only an MPI run has config files: the launcher's hostfile, where Trainer mounts it."""
    local_root_env: ClassVar[Mapping[str, str]] = OPEN_MPI_ROOT_ENV

    def materialised_replica_types(self, job: JobSetRun, colocated: bool) -> tuple[str, ...]:
        """Every replicated job; on one host an MPI run's launcher alone (mpirun starts every rank here, as
        an MPIJob's does)."""
        mpi = job.spec.mpi
        if colocated and mpi is not None:
            return (mpi.launcher,) if mpi.launcher in job.replica_specs else ()
        return tuple(job.replica_specs)

    def config_files(
        self, job: JobSetRun, addressing: Addressing, running_hosts: Sequence[str]
    ) -> dict[str, str]:
        mpi = job.spec.mpi
        if mpi is None or not addressing.colocated:
            return {}
        return {MPI_HOSTFILE_NAME: f"localhost slots={mpi.slots}\n"}

    def is_master_role(self, job: JobSetRun, replica_type: str, index: int) -> bool:
        return False

    def replica_env(
        self, job: JobSetRun, replica_type: str, index: int, addressing: Addressing
    ) -> list[EnvVar]:
        return []  # planned into the templates already, for the substrate's addresses

    def pod_name(self, job: JobSetRun, replica_type: str, index: int) -> str:
        """JobSet's pod host name: ``<jobset>-<replicated job>-<job index>-<completion index>``."""
        job_index, completion = divmod(index, _shape(job, replica_type).parallelism)
        return f"{job.name}-{replica_type}-{job_index}-{completion}"

    def replica_labels(self, job: JobSetRun, replica_type: str, index: int) -> dict[str, str]:
        """kubetrain's replica labels and the ones a JobSet's pod has on a cluster, so that one lookup (the
        SDK's, ``kubectl -l jobset.sigs.k8s.io/jobset-name=...``) finds a TrainJob's pods in both places."""
        job_index, completion = divmod(index, _shape(job, replica_type).parallelism)
        return {
            **super().replica_labels(job, replica_type, index),
            JOBSET_NAME_LABEL: job.name,
            REPLICATED_JOB_LABEL: replica_type,
            JOB_INDEX_LABEL: str(job_index),
            COMPLETION_INDEX_LABEL: str(completion),
        }

    def replica_type_of(self, labels: Mapping[str, str]) -> str | None:
        """A JobSet pod's replicated job (the cluster's pods carry no kubetrain replica labels)."""
        return labels.get(REPLICATED_JOB_LABEL) or super().replica_type_of(labels)

    def replica_index_of(self, job: JobSetRun, labels: Mapping[str, str]) -> int | None:
        """A JobSet pod's replica: ``job index * parallelism + completion index``."""
        replica_type = labels.get(REPLICATED_JOB_LABEL)
        if replica_type is None:
            return super().replica_index_of(job, labels)
        try:
            job_index = int(labels.get(JOB_INDEX_LABEL, "0"))
            completion = int(labels[COMPLETION_INDEX_LABEL])
        except (KeyError, ValueError):
            return None
        return job_index * _shape(job, replica_type).parallelism + completion

    def replica_annotations(self, job: JobSetRun, replica_type: str, index: int) -> dict[str, str]:
        job_index, completion = divmod(index, _shape(job, replica_type).parallelism)
        return {COMPLETION_INDEX_ANNOTATION: str(completion), JOB_INDEX_ANNOTATION: str(job_index)}

    def condition_message(self, job: JobSetRun, type_: ConditionType, value: bool, default: str) -> str:
        return default.replace(f"{self.kind} ", f"{job.shown_kind} ", 1)

    def limit_failure(self, job: JobSetRun, reason: str, message: str) -> tuple[str, str]:
        """A pod failing past its Job's backoffLimit fails its Job, and the JobSet with it."""
        return FAILED_REASON, FAILED_MESSAGE

    def startup_dependencies(self, job: JobSetRun, replica_type: str) -> tuple[tuple[str, Awaited], ...]:
        found: list[tuple[str, Awaited]] = []
        for dependency in _shape(job, replica_type).depends_on or []:
            status: Awaited = "Complete" if dependency.get("status") == "Complete" else "ReadyOrSucceeded"
            found.append((str(dependency.get("name")), status))
        return tuple(found)

    def status_rules(self, context: StatusContext) -> Sequence[ConditionProposal]:
        job = context.job
        assert isinstance(job, JobSetRun)
        phases: dict[tuple[str, int], str] = {(r.replica_type, r.index): r.phase for r in context.replicas}
        succeeded_jobs: dict[str, int] = {}
        for name, spec in job.replica_specs.items():
            shape = _shape(job, name)
            pods = 1 if spec.replicas is None else spec.replicas
            for job_index in range(shape.jobs):
                indices = range(job_index * shape.parallelism, min((job_index + 1) * shape.parallelism, pods))
                if any(phases.get((name, i)) == "Failed" for i in indices):
                    return [ConditionProposal(ConditionType.FAILED, FAILED_REASON, FAILED_MESSAGE)]
                if all(phases.get((name, i)) == "Succeeded" for i in indices):
                    succeeded_jobs[name] = succeeded_jobs.get(name, 0) + 1
        policy = job.spec.success_policy or {}
        targets = [
            t for t in policy.get("targetReplicatedJobs") or job.replica_specs if t in job.replica_specs
        ]
        done = [succeeded_jobs.get(t, 0) == _shape(job, t).jobs for t in targets]
        if policy.get("operator") == "Any":
            complete = any(succeeded_jobs.get(t, 0) > 0 for t in targets)
        else:
            complete = bool(done) and all(done)
        if complete:
            return [ConditionProposal(ConditionType.SUCCEEDED, COMPLETED_REASON, COMPLETED_MESSAGE)]
        if any(phase == "Running" for phase in phases.values()):
            return [
                ConditionProposal(
                    ConditionType.RUNNING, "JobSetRunning", f"{job.shown_kind} {job.name} is running."
                )
            ]
        return []


def _shape(job: JobSetRun, replica_type: str) -> ReplicatedJobShape:
    return job.spec.shapes.get(replica_type) or ReplicatedJobShape()


def from_jobset(
    jobset: Mapping[str, Any], trainjob: Mapping[str, Any] | None = None, hostfile: str | None = None
) -> JobSetRun:
    """The planned JobSet (``engine.trainjob_plan``'s) as a run: its pod templates, counts and order; with
    an MPI runtime's ``hostfile``, the slots it lists."""
    spec = jobset.get("spec") or {}
    replicated: dict[str, ReplicaSpec] = {}
    shapes: dict[str, ReplicatedJobShape] = {}
    backoff = 0
    for job in spec.get("replicatedJobs") or []:
        name = str(job["name"])
        job_spec = (job.get("template") or {}).get("spec") or {}
        parallelism = int(job_spec.get("parallelism") or 1)
        jobs = int(job.get("replicas") if job.get("replicas") is not None else 1)
        template = copy.deepcopy(job_spec.get("template") or {})
        replicated[name] = ReplicaSpec(
            replicas=jobs * parallelism, template=template, restart_policy=RestartPolicy.ON_FAILURE
        )
        shapes[name] = ReplicatedJobShape(jobs=jobs, parallelism=parallelism, depends_on=job.get("dependsOn"))
        limit = job_spec.get("backoffLimit")
        backoff = max(backoff, int(limit) if limit is not None else DEFAULT_BACKOFF_LIMIT)
    metadata = jobset.get("metadata") or {}
    # The TrainJob's annotations opt the run into kubetrain's rules (a progress deadline), as a v1 job's do.
    annotations = ((trainjob or {}).get("metadata") or {}).get("annotations") or None
    return JobSetRun(
        metadata={
            "name": metadata.get("name"),
            "namespace": metadata.get("namespace"),
            "annotations": annotations,
        },
        spec=JobSetRunSpec(
            replicated_jobs=replicated,
            shapes=shapes,
            success_policy=spec.get("successPolicy"),
            trainjob=dict(trainjob) if trainjob is not None else None,
            mpi=MPIRun(slots=_slots(hostfile)) if hostfile is not None else None,
            # A suspended JobSet (its TrainJob's spec.suspend) holds its pods as a suspended job does.
            run_policy=RunPolicy(backoff_limit=backoff, suspend=True if spec.get("suspend") else None),
        ),
    )


def _slots(hostfile: str) -> int:
    """Every host's ``slots=N`` of an Open MPI hostfile, summed (a host without it counts 1)."""
    total = 0
    for line in hostfile.splitlines():
        fields = dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)
        if line.strip():
            total += int(fields.get("slots", "1"))
    return total
