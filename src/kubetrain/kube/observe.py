"""What the operator sees of a job: its pods, services and PodGroup, turned into the engine's ``Observation``.

Pure functions of the cached wire JSON. Only children whose controller ownerReference is the job count
(upstream filters the same way), so a pod of an older job with the same name is never mistaken for ours.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.types import Observation, ObservedReplica, Phase, PodGroupState
from kubetrain.frameworks.base import Framework
from kubetrain.frameworks.labels import (
    REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL,
)

KubeObject = Mapping[str, Any]

_PHASES = {phase.value: phase for phase in Phase}


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def canonical_types(job: TrainingJob, framework: Framework[Any]) -> dict[str, str]:
    """Lowercase label value → CamelCase replica type, from the framework's types and the job's keys."""
    names = {name.lower(): name for name in framework.replica_types}
    names.update({name.lower(): name for name in job.replica_specs})
    return names


def replica_identity(obj: KubeObject, types: Mapping[str, str]) -> tuple[str, int] | None:
    """``(type, index)`` from a child's labels; None when the labels are missing or malformed."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    type_label = labels.get(REPLICA_TYPE_LABEL)
    index_label = labels.get(REPLICA_INDEX_LABEL)
    if type_label is None or index_label is None:
        return None
    try:
        index = int(index_label)
    except ValueError:
        return None
    return types.get(str(type_label), str(type_label)), index


def _container_statuses(pod: KubeObject) -> list[Mapping[str, Any]]:
    status = pod.get("status") or {}
    return list(status.get("containerStatuses") or [])


def exit_code(pod: KubeObject, container: str) -> int | None:
    """The exit code of ``container`` once terminated (its current or, after a restart, its last state)."""
    for status in _container_statuses(pod):
        if status.get("name") != container:
            continue
        for state_key in ("state", "lastState"):
            terminated = (status.get(state_key) or {}).get("terminated")
            if terminated and terminated.get("exitCode") is not None:
                return int(terminated["exitCode"])
    return None


def _is_ready(pod: KubeObject) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _main_container(pod: KubeObject, framework: Framework[Any]) -> str:
    containers = (pod.get("spec") or {}).get("containers") or []
    names = [str(c.get("name", "")) for c in containers]
    if framework.default_container in names or not names:
        return framework.default_container
    return names[0]


def observe_pod(
    pod: KubeObject, types: Mapping[str, str], framework: Framework[Any]
) -> ObservedReplica | None:
    identity = replica_identity(pod, types)
    if identity is None:
        return None
    status = pod.get("status") or {}
    metadata = pod.get("metadata") or {}
    deletion = parse_time(metadata.get("deletionTimestamp"))
    phase = _PHASES.get(str(status.get("phase") or "Pending"), Phase.UNKNOWN)
    # A running pod reports no exit code; the last one of a restarted container is only history.
    code = exit_code(pod, _main_container(pod, framework)) if phase is not Phase.RUNNING else None
    return ObservedReplica(
        replica_type=identity[0],
        index=identity[1],
        phase=phase,
        exit_code=code,
        restart_count=sum(int(s.get("restartCount") or 0) for s in _container_statuses(pod)),
        terminating=deletion is not None,
        deletion_timestamp=deletion,
        ready=_is_ready(pod),
        reason=status.get("reason"),
    )


def observe(
    job: TrainingJob,
    framework: Framework[Any],
    pods: Iterable[KubeObject],
    services: Iterable[KubeObject] | None,
    pod_group: KubeObject | None = None,
    *,
    gang_scheduling: bool = False,
) -> Observation:
    """The job's children as the engine sees them; ``pods``/``services`` are the job's owned children."""
    types = canonical_types(job, framework)
    replicas = tuple(
        replica for replica in (observe_pod(pod, types, framework) for pod in pods) if replica is not None
    )
    observed_services = None
    if services is not None:
        identities = (replica_identity(service, types) for service in services)
        observed_services = frozenset(identity for identity in identities if identity is not None)
    group = None
    if gang_scheduling:
        phase = ((pod_group or {}).get("status") or {}).get("phase")
        group = PodGroupState(exists=pod_group is not None, phase=phase)
    return Observation(replicas=replicas, services=observed_services, pod_group=group)
