"""A small framework for engine-only rules: a ``ToyJob`` with Master/Worker and PyTorch-like rules.

The engine must work for any framework behind the protocol, so its own rules are tested against
this one; realistic end-to-end cases use the real frameworks.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from pydantic import Field

from kubetrain.api.common import (
    CleanPodPolicy,
    ConditionType,
    JobStatus,
    ObjectMeta,
    ReplicaSpec,
    RestartPolicy,
    RunPolicy,
)
from kubetrain.api.errors import FieldError
from kubetrain.api.jobs import JobSpec, TrainingJob
from kubetrain.engine.types import Observation, ObservedReplica, Phase, PodGroupState
from kubetrain.frameworks.addressing import Addressing
from kubetrain.frameworks.base import ConditionProposal, EnvTarget, EnvVar, Framework, StatusContext

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
KIND = "ToyJob"


class ToyJobSpec(JobSpec):
    REPLICA_SPECS_FIELD: ClassVar[str] = "toy_replica_specs"
    toy_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)


class ToyJob(TrainingJob):
    KIND: ClassVar[str] = KIND
    PLURAL: ClassVar[str] = "toyjobs"
    kind: str = KIND
    spec: ToyJobSpec


class ToyFramework(Framework[ToyJob]):
    """Master decides success when present, else every Worker must succeed; failures per PyTorch."""

    model: ClassVar[type[TrainingJob]] = ToyJob
    scheme_name: ClassVar[str] = "toyjob"
    framework_label: ClassVar[str] = "toy"
    controller_name: ClassVar[str] = "toyjob-controller"
    replica_types: ClassVar[tuple[str, ...]] = ("Master", "Worker")
    default_container: ClassVar[str] = "toy"
    default_port_name: ClassVar[str | None] = "toy-port"
    default_port: ClassVar[int | None] = 1234
    default_restart_policy: ClassVar[RestartPolicy] = RestartPolicy.ON_FAILURE
    scale_replica_type: ClassVar[str | None] = "Worker"
    env_target: ClassVar[EnvTarget] = EnvTarget.ALL_CONTAINERS

    def set_defaults(self, job: ToyJob) -> ToyJob:
        specs = {
            replica_type: spec.model_copy(
                update={
                    "replicas": 1 if spec.replicas is None else spec.replicas,
                    "restart_policy": spec.restart_policy or self.default_restart_policy,
                }
            )
            for replica_type, spec in job.replica_specs.items()
        }
        policy = job.run_policy.model_copy(
            update={"clean_pod_policy": job.run_policy.clean_pod_policy or CleanPodPolicy.NONE}
        )
        return job.with_replica_specs(specs).with_run_policy(policy)

    def validate(self, job: ToyJob) -> list[FieldError]:
        errors = [
            FieldError(
                f"spec.toyReplicaSpecs.{t}", f"unsupported replica type; supported: {self.replica_types}"
            )
            for t in job.replica_specs
            if t not in self.replica_types
        ]
        return errors

    def is_master_role(self, job: ToyJob, replica_type: str, index: int) -> bool:
        return replica_type == "Master"

    def replica_env(self, job: ToyJob, replica_type: str, index: int, addressing: Addressing) -> list[EnvVar]:
        return [
            {"name": "TOY_MASTER", "value": addressing.host(job, "Master", 0)},
            {"name": "TOY_RANK", "value": str(index)},
        ]

    def status_rules(self, context: StatusContext) -> list[ConditionProposal]:
        job, statuses = context.job, context.replica_statuses
        deciding = "Master" if "Master" in job.replica_specs else "Worker"
        proposals: list[ConditionProposal] = []
        decider = statuses.get(deciding)
        if decider is not None:
            if decider.active > 0:
                proposals.append(
                    ConditionProposal(
                        ConditionType.RUNNING, f"{KIND}Running", f"{KIND} {job.name} is running."
                    )
                )
            wanted = job.replica_specs[deciding].replicas or 0
            if wanted - decider.succeeded == 0:
                proposals.append(
                    ConditionProposal(ConditionType.SUCCEEDED, f"{KIND}Succeeded", f"{KIND} {job.name} done.")
                )
                return proposals
        for replica_type, status in statuses.items():
            spec = job.replica_specs[replica_type]
            if status.failed > 0 and (spec.replicas or 0) > status.succeeded + status.active:
                if spec.restart_policy is RestartPolicy.NEVER:
                    proposals.append(
                        ConditionProposal(
                            ConditionType.FAILED,
                            f"{KIND}Failed",
                            f"{KIND} {job.name} is failed because {status.failed} {replica_type} "
                            "replica(s) failed.",
                        )
                    )
                else:
                    proposals.append(
                        ConditionProposal(
                            ConditionType.RESTARTING,
                            f"{KIND}Restarting",
                            f"{KIND} {job.name} is restarting because {status.failed} {replica_type} "
                            "replica(s) failed.",
                        )
                    )
        return proposals


FRAMEWORK = ToyFramework()


def toy_job(
    *,
    masters: int | None = 1,
    workers: int | None = 2,
    policy: RestartPolicy | None = None,
    run_policy: RunPolicy | None = None,
    status: JobStatus | None = None,
    template: dict[str, Any] | None = None,
    name: str = "toy",
) -> ToyJob:
    specs: dict[str, ReplicaSpec] = {}
    default_template = {"spec": {"containers": [{"name": "toy", "image": "toy:1"}]}}
    for replica_type, count in (("Master", masters), ("Worker", workers)):
        if count is not None:
            specs[replica_type] = ReplicaSpec(
                replicas=count, restart_policy=policy, template=template or default_template
            )
    return ToyJob(
        metadata=ObjectMeta(name=name, namespace="ns"),
        spec=ToyJobSpec(toy_replica_specs=specs, run_policy=run_policy or RunPolicy()),
        status=status or JobStatus(),
    )


def replica(
    replica_type: str,
    index: int,
    phase: Phase = Phase.RUNNING,
    **fields: Any,
) -> ObservedReplica:
    return ObservedReplica(replica_type, index, phase, **fields)


def everything_running(job: TrainingJob, *, services: bool = True) -> Observation:
    """Every wanted replica Running, with its service."""
    replicas = tuple(
        replica(replica_type, index)
        for replica_type, spec in job.replica_specs.items()
        for index in range(spec.replicas if spec.replicas is not None else 1)
    )
    keys = frozenset((r.replica_type, r.index) for r in replicas)
    return Observation(replicas=replicas, services=keys if services else None)


def observe(
    *replicas: ObservedReplica,
    services: frozenset[tuple[str, int]] | None = None,
    pod_group: PodGroupState | None = None,
) -> Observation:
    return Observation(replicas=tuple(replicas), services=services, pod_group=pod_group)
