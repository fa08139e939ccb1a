"""The protocol every part of a runtime implements: Trainer v2's plugin phases, as plain functions of data.

A TrainJob is planned in Trainer's phase order: each plugin validates the job against the runtime, then the
ML policies shape the pod sets, the gang policy labels the pods, the JobSet's network names every pod,
counts are synced into the JobSet, and every plugin builds its objects. What a plugin needs to know of the
cluster (whether an object already exists) comes in as ``Existing``; addresses come from an ``Addressing``,
so the same plan serves the cluster (DNS names) and a local run (loopback ports).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kubetrain.api.errors import FieldError
from kubetrain.api.trainer import TrainJob
from kubetrain.frameworks.trainer.constants import NODE, TRAINER_PORT
from kubetrain.frameworks.trainer.info import Obj, RuntimeInfo


class Addressing(Protocol):
    """How one pod of a TrainJob reaches another."""

    def host(self, trainjob: str, job: str, job_index: int, pod_index: int, subdomain: str) -> str:
        """The address of pod ``pod_index`` of Job ``job_index`` of replicated job ``job``."""
        ...

    def port(self, trainjob: str, job: str, job_index: int, pod_index: int) -> int:
        """The trainer port (rendezvous, coordinator, tracker) of that pod."""
        ...


@dataclass(frozen=True)
class ClusterAddressing:
    """JobSet's pod DNS names on the job's headless Service, and Trainer's port 29500."""

    def host(self, trainjob: str, job: str, job_index: int, pod_index: int, subdomain: str) -> str:
        return f"{trainjob}-{job}-{job_index}-{pod_index}.{subdomain}"

    def port(self, trainjob: str, job: str, job_index: int, pod_index: int) -> int:
        return TRAINER_PORT


def master_host(addressing: Addressing, trainjob: str) -> str:
    """The first trainer node, where torchrun's rendezvous, JAX's coordinator and XGBoost's tracker live.
    Trainer names it on the TrainJob's own subdomain even when the runtime sets ``network.subdomain``."""
    return addressing.host(trainjob, NODE, 0, 0, trainjob)


def master_port(addressing: Addressing, trainjob: str) -> int:
    return addressing.port(trainjob, NODE, 0, 0)


@dataclass(frozen=True)
class Existing:
    """What the cluster already holds of a TrainJob's objects (some are made once, never re-applied)."""

    jobset_suspended: bool | None = None
    """The JobSet's ``spec.suspend``; None when there is no JobSet."""
    jobset_volume_claim_policies: tuple[Obj, ...] | None = None
    """The JobSet's ``spec.volumeClaimPolicies`` as stored (JobSet's defaults in); None when it has none."""
    pod_group: bool = False
    ssh_secret: bool = False


class RuntimePlugin:
    """One part of a runtime (an ML policy, a gang policy, the JobSet). Each phase does nothing unless the
    plugin overrides it."""

    name: str = ""

    def validate(self, info: RuntimeInfo, trainjob: TrainJob) -> list[FieldError]:
        """What Trainer's admission webhook refuses of the TrainJob on this runtime, field by field."""
        return []

    def enforce_ml_policy(self, info: RuntimeInfo, trainjob: TrainJob, addressing: Addressing) -> None:
        """Shape the pod sets: node counts, env, ports, volumes."""

    def enforce_pod_group_policy(self, info: RuntimeInfo, trainjob: TrainJob) -> None:
        """Label or annotate every pod for its gang scheduler."""

    def identify_pod_network(self, info: RuntimeInfo, trainjob: TrainJob, addressing: Addressing) -> None:
        """Name every pod of every pod set (``PodSet.endpoints``)."""

    def sync_parallel_count(self, info: RuntimeInfo) -> None:
        """Write the pod sets' counts into the JobSet spec."""

    def build(self, info: RuntimeInfo, trainjob: TrainJob, existing: Existing) -> list[Obj]:
        """The objects this plugin makes (without namespace or owner: the planner adds both)."""
        return []
