"""What a listing shows of a job (``kubetrain get``), read from its wire form without building its model.

Building a model means importing pydantic and every kind's model and building a validator: about 0.2 s of a
command that prints a few columns. The objects listed were validated when they were stored (by the CRD schema
on a cluster, by admission for a local run), but a listing must still never fail on one odd object: a field
of the wrong shape reads as absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

REPLICA_SPECS_SUFFIX = "ReplicaSpecs"
"""Every kind names its replica map ``<framework>ReplicaSpecs`` (``pytorchReplicaSpecs``, ``mpiReplicaSpecs``,
...): the one spec field with this suffix (a unit test holds every model to it)."""
FINISHED = ("Succeeded", "Complete", "Failed")
"""The final states: a v1 job's Succeeded or Failed, a TrainJob's Complete or Failed."""

TRAINER_GROUP = "trainer.kubeflow.org"
"""Kubeflow Trainer v2's API group: its TrainJob has no replica map and no Created/Running conditions."""
TRAINJOB_CONDITION_STATES = ("Complete", "Failed", "Suspended", "Stalled")
"""A TrainJob's conditions that say its state when True, in this order: the Kubeflow SDK's Complete and
Failed, then Suspended, then kubetrain's Stalled (its progress deadline passed), as a v1 job's STATE shows
them."""
NODES = "node"
"""What a TrainJob's training pods are called in a listing (Trainer's ``node`` replicated job)."""


@dataclass(frozen=True)
class NodeTally:
    """A TrainJob's training nodes (the pods of its ``node`` and ``launcher`` replicated jobs), as its pods or
    local processes show them now."""

    seen: int
    """Its training pods that exist (locally: every node process of the run)."""
    active: int
    """Of them, those Pending or Running: the cell ``node 2/2`` counts these, as v1 jobs count active pods."""
    running: int
    """Of them, those Running or Succeeded: the Kubeflow SDK calls the job Running once all nodes are."""


@dataclass(frozen=True)
class LiveCounts:
    """What a listing reads of a job's pods beside the job: their restarts, and a TrainJob's nodes."""

    restarts: int
    """Container restarts of the job's live pods (or local processes)."""
    nodes: NodeTally | None = None
    """A TrainJob's training nodes; None for a v1 job."""


def trainjob_state(true_conditions: tuple[str, ...], nodes: NodeTally | None, num_nodes: int | None) -> str:
    """A TrainJob's state as the Kubeflow SDK (0.5.0, ``TrainerClient.get_job``) decides it: ``Complete`` or
    ``Failed`` from its conditions, then ``Suspended`` (a state the SDK leaves as Created) and kubetrain's
    ``Stalled``, else ``Running`` once all ``num_nodes`` training nodes are Running or Succeeded, else
    ``Created``. ``num_nodes`` is ``spec.trainer.numNodes``; when the TrainJob leaves it to its runtime, the
    nodes its pods show."""
    for state in TRAINJOB_CONDITION_STATES:
        if state in true_conditions:
            return state
    if nodes is None or nodes.seen == 0:
        return "Created"
    wanted = num_nodes if num_nodes is not None else nodes.seen
    return "Running" if nodes.running >= wanted else "Created"


@dataclass(frozen=True)
class ReplicaCounts:
    replica_type: str
    desired: int
    active: int


@dataclass(frozen=True)
class JobSummary:
    api_version: str
    kind: str
    name: str
    namespace: str
    labels: Mapping[str, str]
    created: datetime | None
    condition_types: tuple[str, ...]
    """Types of the conditions in order; the CRD's State column is the last one."""
    message: str
    """The last condition's message."""
    replicas: tuple[ReplicaCounts, ...]
    """In the spec's order."""
    replaced_restarts: int
    """Restarts of replicas already replaced, kept in the status (``ReplicaStatus.restarts``)."""
    progress: int | None = None
    """``status.trainerStatus.progressPercentage``: how complete the training says it is."""
    remaining_seconds: int | None = None
    """``status.trainerStatus.estimatedRemainingSeconds``, as of ``reported_at``."""
    reported_at: datetime | None = None
    """``status.trainerStatus.lastUpdatedTime``."""
    metrics: tuple[tuple[str, str], ...] = ()
    """The latest reported metrics, ``(name, value)``."""
    derived_state: str | None = None
    """A TrainJob's state (``trainjob_state``): it has no Created/Running conditions to read it from."""

    @property
    def state(self) -> str:
        if self.derived_state is not None:
            return self.derived_state
        return self.condition_types[-1] if self.condition_types else ""

    def remaining_at(self, now: datetime) -> float | None:
        """Seconds of training left at ``now`` by the last estimate; None when unknown or finished."""
        if self.remaining_seconds is None or self.reported_at is None or self.state in FINISHED:
            return None
        return max(0.0, self.remaining_seconds - (now - self.reported_at).total_seconds())

    @classmethod
    def from_wire(cls, wire: Mapping[str, Any], nodes: NodeTally | None = None) -> JobSummary:
        """``nodes``: a TrainJob's training nodes as its pods show them (None: not known, as for a v1 job)."""
        metadata = _mapping(wire.get("metadata"))
        spec = _mapping(wire.get("spec"))
        status = _mapping(wire.get("status"))
        conditions = [_mapping(c) for c in _list(status.get("conditions"))]
        statuses = _mapping(status.get("replicaStatuses"))
        specs = next((_mapping(v) for k, v in spec.items() if str(k).endswith(REPLICA_SPECS_SUFFIX)), {})
        labels = _mapping(metadata.get("labels"))
        trainer = _mapping(status.get("trainerStatus"))
        metrics = (_mapping(m) for m in _list(trainer.get("metrics")))
        replicas = tuple(
            ReplicaCounts(
                replica_type=str(replica_type),
                desired=_count(_mapping(replica_spec).get("replicas"), default=1),
                active=_count(_mapping(statuses.get(replica_type)).get("active")),
            )
            for replica_type, replica_spec in specs.items()
        )
        derived_state = None
        if is_trainjob(wire):
            true_conditions = tuple(str(c.get("type")) for c in conditions if c.get("status") == "True")
            num_nodes = _int(_mapping(spec.get("trainer")).get("numNodes"))
            derived_state = trainjob_state(true_conditions, nodes, num_nodes)
            if nodes is not None:
                desired = num_nodes if num_nodes is not None else nodes.seen
                replicas = (ReplicaCounts(NODES, desired, nodes.active),)
            elif num_nodes is not None:
                replicas = (ReplicaCounts(NODES, num_nodes, 0),)
        return cls(
            api_version=str(wire.get("apiVersion") or ""),
            kind=str(wire.get("kind") or ""),
            name=str(metadata.get("name") or ""),
            namespace=str(metadata.get("namespace") or "default"),
            labels={str(k): str(v) for k, v in labels.items()},
            created=read_time(metadata.get("creationTimestamp")) or read_time(status.get("startTime")),
            condition_types=tuple(str(c.get("type") or "") for c in conditions),
            message=_message(conditions, derived_state),
            replicas=replicas,
            replaced_restarts=sum(_count(_mapping(s).get("restarts")) for s in statuses.values()),
            progress=_int(trainer.get("progressPercentage")),
            remaining_seconds=_int(trainer.get("estimatedRemainingSeconds")),
            reported_at=read_time(trainer.get("lastUpdatedTime")),
            metrics=tuple(
                (str(m["name"]), str(m["value"]))
                for m in metrics
                if isinstance(m.get("name"), str) and isinstance(m.get("value"), str)
            ),
            derived_state=derived_state,
        )


def is_trainjob(wire: Mapping[str, Any]) -> bool:
    """A Kubeflow Trainer v2 TrainJob (``trainer.kubeflow.org``), not a ``kubeflow.org/v1`` job."""
    return wire.get("kind") == "TrainJob" and str(wire.get("apiVersion") or "").startswith(
        f"{TRAINER_GROUP}/"
    )


def _message(conditions: list[Mapping[str, Any]], derived_state: str | None) -> str:
    """The last condition's message; a TrainJob's, of the condition its state comes from (a resumed job's
    last condition is ``Suspended`` False, whose message is no longer its state's)."""
    if derived_state is not None:
        found = next((c for c in reversed(conditions) if c.get("type") == derived_state), None)
        return str(found.get("message") or "") if found is not None else ""
    return str(conditions[-1].get("message") or "") if conditions else ""


def is_finished(wire: Mapping[str, Any]) -> bool:
    """A Succeeded, Complete or Failed condition is True."""
    conditions = [_mapping(c) for c in _list(_mapping(wire.get("status")).get("conditions"))]
    return any(c.get("type") in FINISHED and c.get("status") == "True" for c in conditions)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _count(value: object, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_time(value: object) -> datetime | None:
    """A wire timestamp (RFC 3339); None when absent or unreadable."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
