"""A TrainJob on this machine: its runtime resolved, its JobSet planned for this machine's addresses, and
that JobSet run as a ``JobSetRun`` by the same runner as every other kind.

The runtime is the one the manifest file carries beside the TrainJob (a ``TrainingRuntime`` or
``ClusterTrainingRuntime`` document), else one named with ``--runtime-file``, else one of the built-in
ClusterTrainingRuntimes kubetrain ships (Trainer v2.3.0's). The JobSet is planned twice: once to learn its
pods, then with the addresses the substrate gives them (loopback ports for processes), so that every
``PET_MASTER_ADDR``, ``JAX_COORDINATOR_ADDRESS`` and hostfile entry points at the right process.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from kubetrain.api.common import ConditionType, JobStatus
from kubetrain.api.errors import FieldError, InvalidJobError, from_pydantic
from kubetrain.api.jobset_run import JobSetRun
from kubetrain.api.trainer import (
    API_VERSION,
    CLUSTER_TRAINING_RUNTIME,
    ClusterTrainingRuntime,
    TrainingRuntime,
    TrainJob,
    TrainJobStatus,
)
from kubetrain.engine.planning import desired_replicas
from kubetrain.engine.trainjob import set_condition
from kubetrain.engine.trainjob_plan import plan, runtime_key
from kubetrain.engine.types import Traits
from kubetrain.frameworks.addressing import Addressing
from kubetrain.frameworks.jobset_run import from_jobset
from kubetrain.frameworks.trainer.builtin import builtin_runtimes
from kubetrain.frameworks.trainer.constants import MPI_HOSTFILE_NAME, TRAINER_PORT
from kubetrain.frameworks.trainer.mpi import hostfile_name
from kubetrain.frameworks.trainer.plugin import ClusterAddressing as TrainerClusterAddressing

LOCAL_NAMESPACE = "default"


@dataclass(frozen=True)
class TrainJobRun:
    trainjob: TrainJob
    run: JobSetRun
    """The TrainJob's JobSet, planned for this machine, as the runner runs it."""
    addressing: Addressing
    """The addresses its env was planned with (the runner must give the replicas the same)."""


def is_trainjob(document: Mapping[str, Any]) -> bool:
    return document.get("apiVersion") == API_VERSION and document.get("kind") == TrainJob.KIND


def is_runtime(document: Mapping[str, Any]) -> bool:
    return document.get("apiVersion") == API_VERSION and document.get("kind") in (
        ClusterTrainingRuntime.KIND,
        TrainingRuntime.KIND,
    )


def parse_trainjob(document: Mapping[str, Any]) -> TrainJob:
    try:
        trainjob = TrainJob.model_validate(dict(document), context={"strict": True})
    except ValidationError as error:
        raise from_pydantic(error) from None
    if not trainjob.name:
        raise InvalidJobError([FieldError("metadata.name", "Required value: name the TrainJob")])
    if trainjob.metadata.namespace is None:
        trainjob.metadata.namespace = LOCAL_NAMESPACE
    return trainjob


def parse_runtimes(documents: Iterable[Mapping[str, Any]]) -> list[TrainingRuntime]:
    found: list[TrainingRuntime] = []
    for document in documents:
        model = (
            ClusterTrainingRuntime if document.get("kind") == CLUSTER_TRAINING_RUNTIME else TrainingRuntime
        )
        try:
            found.append(model.model_validate(dict(document), context={"strict": True}))
        except ValidationError as error:
            raise from_pydantic(error, str(document.get("kind"))) from None
    return found


def resolve_runtime(trainjob: TrainJob, runtimes: Sequence[TrainingRuntime]) -> TrainingRuntime:
    """The runtime the TrainJob names: among ``runtimes`` (the user's), else a built-in one."""
    _, kind = runtime_key(trainjob)
    name = trainjob.spec.runtime_ref.name
    for runtime in runtimes:
        if kind == runtime.KIND and runtime.name == name:
            return runtime
    builtin = builtin_runtimes()
    if kind == CLUSTER_TRAINING_RUNTIME and name in builtin:
        return builtin[name]
    given = ", ".join(f"{r.KIND}/{r.name}" for r in runtimes) or "none"
    raise InvalidJobError(
        [
            FieldError(
                "spec.runtimeRef.name",
                f"{kind} {name!r} is neither in the manifest (given: {given}) nor built in "
                f"({', '.join(sorted(builtin))}); put the runtime in the file or name it with --runtime-file",
            )
        ]
    )


@dataclass(frozen=True)
class _ThroughReplicas:
    """Trainer's addresses (a JobSet pod by replicated job, Job index and completion index) on the runner's
    replicas: pod ``(job, j, p)`` is replica ``(job, j * parallelism + p)``. Processes share this host, so
    each is its allocated loopback port; containers each have the JobSet pod's DNS names on the job network,
    so Trainer's own names and port serve as they are."""

    replicas: Addressing
    run: JobSetRun

    def _index(self, job: str, job_index: int, pod_index: int) -> int:
        shape = self.run.spec.shapes.get(job)
        return job_index * (shape.parallelism if shape else 1) + pod_index

    def host(self, trainjob: str, job: str, job_index: int, pod_index: int, subdomain: str) -> str:
        if not self.replicas.colocated:
            return TrainerClusterAddressing().host(trainjob, job, job_index, pod_index, subdomain)
        return self.replicas.host(self.run, job, self._index(job, job_index, pod_index))

    def port(self, trainjob: str, job: str, job_index: int, pod_index: int) -> int:
        return self.replicas.port(self.run, job, self._index(job, job_index, pod_index), TRAINER_PORT)


def prepare(
    trainjob: TrainJob,
    runtime: TrainingRuntime,
    address: Any,
    traits: Traits,
) -> TrainJobRun:
    """The run of ``trainjob``; ``address(job, keys)`` is the substrate's ``addressing``."""
    shaped = plan(trainjob, runtime.spec).jobset
    if shaped is None:
        raise InvalidJobError([FieldError("spec.runtimeRef", "the runtime plans no JobSet")])
    shape = from_jobset(shaped)
    replicas: Addressing = address(shape, desired_replicas(shape, traits))
    planned = plan(trainjob, runtime.spec, addressing=_ThroughReplicas(replicas, shape))
    assert planned.jobset is not None
    hostfile = next(
        (
            o["data"][MPI_HOSTFILE_NAME]
            for o in planned.objects
            if o["metadata"]["name"] == hostfile_name(trainjob.name)
        ),
        None,
    )
    run = from_jobset(planned.jobset, trainjob.to_wire(), hostfile)
    return TrainJobRun(trainjob, run, replicas)


def trainjob_status(status: JobStatus, now: Any) -> TrainJobStatus:
    """The TrainJob's status from its run's: ``Complete`` or ``Failed`` as the JobSet's, its progress."""
    found = TrainJobStatus(trainer_status=status.trainer_status)
    for source, target in ((ConditionType.SUCCEEDED, "Complete"), (ConditionType.FAILED, "Failed")):
        condition = status.condition(source)
        if condition is not None and condition.status == "True":
            when = condition.last_transition_time or now
            set_condition(found, target, "True", condition.reason or "", condition.message or "", when)
    return found
