"""What the operator sees of a job: its pods, services and PodGroup, turned into the engine's ``Observation``.

Pure functions of the cached wire JSON. Only children whose controller ownerReference is the job count
(upstream filters the same way), so a pod of an older job with the same name is never mistaken for ours.
``ChildObservations`` remembers a big job's pods' observations and services' identities from one reconcile to
the next.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.node_loss import OUT_OF_SERVICE_TAINT
from kubetrain.engine.types import (
    Disruption,
    Observation,
    ObservedContainer,
    ObservedNode,
    ObservedReplica,
    Phase,
    PodGroupState,
)
from kubetrain.frameworks.base import Framework
from kubetrain.kube.batch_jobs import batch_job_template
from kubetrain.kube.render import SCHEDULER_PLUGINS_POD_GROUP_LABEL, VOLCANO_GROUP_NAME_ANNOTATION
from kubetrain.kube.runtime.store import Store

KubeObject = Mapping[str, Any]

_PHASES = {phase.value: phase for phase in Phase}
_NEVER = datetime.min.replace(tzinfo=UTC)
DEFAULT_SCHEDULER = "default-scheduler"
_EMPTY: Mapping[str, Any] = {}
_CONTAINER_KINDS = (
    (True, "initContainers", "initContainerStatuses"),
    (False, "containers", "containerStatuses"),
)


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def canonical_types(job: TrainingJob, framework: Framework[Any]) -> dict[str, str]:
    """Lowercase label value → CamelCase replica type, from the framework's types and the job's keys."""
    names = {name.lower(): name for name in framework.replica_types}
    names.update({name.lower(): name for name in job.replica_specs})
    return names


def replica_identity(
    obj: KubeObject, job: TrainingJob, framework: Framework[Any], types: Mapping[str, str] | None = None
) -> tuple[str, int] | None:
    """``(type, index)`` from a child's labels, as the framework labels them; None when malformed.
    ``types`` is ``canonical_types(job, framework)``, when the caller has it for many children."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if not all(isinstance(value, str) for value in labels.values()):
        # The API server's labels are strings: a copy only for what did not come from it (copying every
        # pod's labels on every reconcile allocated 10,000 dicts per reconcile of a 5,000-replica job).
        labels = {str(k): str(v) for k, v in labels.items()}
    replica_type = framework.replica_type_of(labels)
    index = framework.replica_index_of(job, labels)
    if replica_type is None or index is None:
        return None
    types = canonical_types(job, framework) if types is None else types
    return types.get(replica_type.lower(), replica_type), index


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


def _container_warnings(statuses: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    warnings: list[tuple[str, str]] = []
    for status in statuses:
        name = status.get("name")
        state = status.get("state") or {}
        terminated = state.get("terminated") or {}
        code = int(terminated.get("exitCode") or 0)
        if code != 0:
            message = terminated.get("message") or ""
            warnings.append(
                (
                    str(terminated.get("reason") or "Error"),
                    f"container {name} exitCode: {code} terminated message: {message}",
                )
            )
        waiting = state.get("waiting") or {}
        if waiting.get("message"):
            warnings.append(
                (
                    str(waiting.get("reason") or "Waiting"),
                    f"container {name} waiting message: {waiting['message']}",
                )
            )
    return warnings


def pod_warnings(pod: KubeObject) -> tuple[tuple[str, str], ...]:
    """The abnormal signs of a pod, as upstream's ``RecordAbnormalPods`` reads them.

    Container statuses when the pod has any, else init container statuses (a pod with the former is
    past its init containers), else its latest condition when that is not True (unschedulable).
    """
    status = pod.get("status") or {}
    for key in ("containerStatuses", "initContainerStatuses"):
        statuses = status.get(key) or []
        if statuses:
            return tuple(_container_warnings(statuses))
    conditions = status.get("conditions") or []
    if not conditions:
        return ()
    latest = max(conditions, key=lambda c: parse_time(c.get("lastTransitionTime")) or _NEVER)
    if latest.get("status") == "True":
        return ()
    reason = str(latest.get("reason") or latest.get("type") or "Unknown")
    return ((reason, f"condition message: {latest.get('message') or ''}"),)


def conditions_of(pod: KubeObject) -> Mapping[str, Mapping[str, Any]]:
    """The pod's conditions by type (read once per pod)."""
    return {c.get("type"): c for c in (pod.get("status") or _EMPTY).get("conditions") or ()}


def unschedulable_message(conditions: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The scheduler's reason while it cannot place the pod (``PodScheduled`` False, ``Unschedulable``)."""
    scheduled = conditions.get("PodScheduled")
    if scheduled is None or scheduled.get("status") != "False" or scheduled.get("reason") != "Unschedulable":
        return None
    return str(scheduled.get("message") or "Unschedulable")


def disruption_of(conditions: Mapping[str, Mapping[str, Any]]) -> Disruption | None:
    """The pod's ``DisruptionTarget`` condition, while True: who is ending it and why."""
    target = conditions.get("DisruptionTarget")
    if target is None or target.get("status") != "True":
        return None
    return Disruption(str(target.get("reason") or "DisruptionTarget"), str(target.get("message") or ""))


def has_disruption_target(pod: KubeObject) -> bool:
    """Cheaply, for every deleted pod the watch reports: whether it carries a True ``DisruptionTarget``."""
    return disruption_of(conditions_of(pod)) is not None


def ready_since(conditions: Mapping[str, Mapping[str, Any]]) -> datetime | None:
    """When the pod last became Ready, while it is."""
    ready = conditions.get("Ready")
    if ready is None or ready.get("status") != "True":
        return None
    return parse_time(ready.get("lastTransitionTime"))


def gang_scheduled(pod: KubeObject) -> bool:
    """The pod is in a PodGroup (Volcano's annotation, scheduler-plugins' label) and names a scheduler other
    than the default one: a gang scheduler places it together with its group."""
    metadata = pod.get("metadata") or {}
    in_group = VOLCANO_GROUP_NAME_ANNOTATION in (metadata.get("annotations") or {}) or (
        SCHEDULER_PLUGINS_POD_GROUP_LABEL in (metadata.get("labels") or {})
    )
    scheduler = (pod.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER
    return in_group and scheduler != DEFAULT_SCHEDULER


def observed_containers(pod: KubeObject) -> tuple[ObservedContainer, ...]:
    """The pod's init containers, then its containers: as its spec declares them, and their statuses. An init
    container that completed at its first try is left out."""
    spec = pod.get("spec") or _EMPTY
    status = pod.get("status") or _EMPTY
    observed: list[ObservedContainer] = []
    for init, spec_key, status_key in _CONTAINER_KINDS:
        declared_containers = spec.get(spec_key)
        if not declared_containers:
            continue
        statuses = {s.get("name"): s for s in status.get(status_key) or ()}
        for declared in declared_containers:
            container_status = statuses.get(declared.get("name")) or _EMPTY
            if init and _completed_once(container_status):
                continue  # nothing about it can go wrong any more: every pod of a job has some
            observed.append(_observed_container(declared, container_status, init))
    return tuple(observed)


def _completed_once(status: Mapping[str, Any]) -> bool:
    terminated = (status.get("state") or _EMPTY).get("terminated")
    return terminated is not None and terminated.get("exitCode") == 0 and not status.get("restartCount")


def _observed_container(
    declared: Mapping[str, Any], status: Mapping[str, Any], init: bool
) -> ObservedContainer:
    state = status.get("state") or _EMPTY
    running = state.get("running")
    waiting = state.get("waiting") or _EMPTY
    # The current run once it ended, else the previous one (after a restart).
    ended = state.get("terminated") or (status.get("lastState") or _EMPTY).get("terminated") or _EMPTY
    exit_code = ended.get("exitCode")
    resources = declared.get("resources")
    memory = (resources.get("limits") or _EMPTY).get("memory") if resources else None
    return ObservedContainer(
        str(declared.get("name") or ""),
        str(declared.get("image") or ""),
        str(status.get("imageID") or ""),
        init,
        None if running is None else parse_time(running.get("startedAt")),
        waiting.get("reason"),
        waiting.get("message"),
        None if exit_code is None else int(exit_code),
        ended.get("reason"),
        ended.get("message") or None,
        None,
        None if memory is None else str(memory),
        int(status.get("restartCount") or 0),
        parse_time(ended.get("finishedAt")),
    )


def observe_pod(
    pod: KubeObject, job: TrainingJob, framework: Framework[Any], types: Mapping[str, str] | None = None
) -> ObservedReplica | None:
    identity = replica_identity(pod, job, framework, types)
    if identity is None:
        return None
    status = pod.get("status") or {}
    metadata = pod.get("metadata") or {}
    deletion = parse_time(metadata.get("deletionTimestamp"))
    phase = _PHASES.get(str(status.get("phase") or "Pending"), Phase.UNKNOWN)
    # A running pod reports no exit code; the last one of a restarted container is only history.
    code = exit_code(pod, _main_container(pod, framework)) if phase is not Phase.RUNNING else None
    conditions = conditions_of(pod)
    ready = conditions.get("Ready")
    return ObservedReplica(
        replica_type=identity[0],
        index=identity[1],
        phase=phase,
        exit_code=code,
        restart_count=sum(int(s.get("restartCount") or 0) for s in _container_statuses(pod)),
        terminating=deletion is not None,
        deletion_timestamp=deletion,
        ready=ready is not None and ready.get("status") == "True",
        reason=status.get("reason"),
        warnings=pod_warnings(pod),
        containers=observed_containers(pod),
        unschedulable=unschedulable_message(conditions),
        placed=bool((pod.get("spec") or {}).get("nodeName")),
        ready_since=ready_since(conditions),
        gang_scheduled=gang_scheduled(pod),
        disruption=disruption_of(conditions),
        created_at=parse_time(metadata.get("creationTimestamp")),
        node=(pod.get("spec") or _EMPTY).get("nodeName") or None,
    )


def observe_node(node: KubeObject) -> ObservedNode:
    """A node as losing it goes: its ``Ready`` condition and its out-of-service taint."""
    ready = conditions_of(node).get("Ready") or _EMPTY
    taints = (node.get("spec") or _EMPTY).get("taints") or ()
    return ObservedNode(
        name=str((node.get("metadata") or _EMPTY).get("name") or ""),
        # A node without a Ready condition yet has never reported: the node controller marks it Unknown.
        ready=str(ready.get("status") or "Unknown"),
        since=parse_time(ready.get("lastTransitionTime")),
        reason=ready.get("reason"),
        message=ready.get("message"),
        out_of_service=any(taint.get("key") == OUT_OF_SERVICE_TAINT for taint in taints),
    )


NodeLookup = Callable[[str], KubeObject | None]
"""A cached node by name (``Store.get``)."""


def observe_nodes(replicas: Iterable[ObservedReplica], nodes: NodeLookup) -> tuple[ObservedNode, ...]:
    """The nodes ``replicas`` are bound to, as cached (a node not cached, deleted or unseen, is left out)."""
    names = sorted({replica.node for replica in replicas if replica.node})
    return tuple(observe_node(node) for node in map(nodes, names) if node is not None)


ContainerKey = tuple[str, int, str]
"""``(replica type, index, container name)``."""


def with_last_lines(observation: Observation, last_lines: Mapping[ContainerKey, str]) -> Observation:
    """``observation`` with the last lines read for some containers (their previous run's log)."""
    if not last_lines:
        return observation
    replicas = []
    for replica in observation.replicas:
        containers = tuple(
            replace(c, last_lines=last_lines[key])
            if (key := (replica.replica_type, replica.index, c.name)) in last_lines
            else c
            for c in replica.containers
        )
        replicas.append(
            replace(replica, containers=containers) if containers != replica.containers else replica
        )
    return replace(observation, replicas=tuple(replicas))


class ChildObservations:
    """``observe_pod``'s answers and the services' identities for one job, kept until the next reconcile of
    that job.

    A pod's observation, like a service's identity, depends only on that object and on the job's spec, so
    while its resourceVersion and the job's generation stay the same, the last answer stands. Every change of
    any pod of a running job reconciles the whole job, and observing its pods was two thirds of that
    reconcile's CPU (``bench/reconcile_curve.py``: 5,000 replicas); once they were remembered, reading the
    5,000 services' identities from their labels was three quarters of what observing cost. With this, only
    the children that changed are read again. Each reconcile keeps the answers for the children it saw, so a
    deleted child's answer goes with the next reconcile.

    ``observe_owned_pods`` goes further: reading the pods from their cache, it asks the cache which changed
    since the last reconcile and looks at those alone, so a reconcile's observing costs what changed, not the
    job's size (the pass over 5,000 pods to find the one that changed was a seventh of a reconcile)."""

    def __init__(self) -> None:
        self._spec: tuple[Any, Any] | None = None
        self._answers: dict[str, tuple[str, ObservedReplica | None]] = {}
        self._owned: list[str] | None = None
        """The pods' keys ``observe_owned_pods`` last read (``Store.owned_keys``: the same list while no pod
        joins or leaves), with their observations in that order, and the cache's cursor then."""
        self._owned_observed: list[ObservedReplica | None] = []
        self._owned_positions: dict[str, int] = {}
        self._cursor: int | None = None
        self._service_spec: tuple[Any, Any] | None = None
        self._identities: dict[str, tuple[str, tuple[str, int] | None]] = {}
        self._services_seen: tuple[int, frozenset[tuple[str, int]]] | None = None
        """The services' version in their cache (``Store.owner_version``) when last read, and the answer."""

    def observe_pods(
        self,
        pods: Iterable[KubeObject],
        job: TrainingJob,
        framework: Framework[Any],
        types: Mapping[str, str],
    ) -> list[ObservedReplica | None]:
        spec = (job.metadata.uid, job.metadata.generation)
        previous = self._answers if spec == self._spec else {}
        answers: dict[str, tuple[str, ObservedReplica | None]] = {}
        observed: list[ObservedReplica | None] = []
        for pod in pods:
            metadata = pod.get("metadata") or _EMPTY
            uid, version = metadata.get("uid"), metadata.get("resourceVersion")
            if not uid or not version:
                observed.append(observe_pod(pod, job, framework, types))
                continue
            answer = previous.get(uid)
            replica = (
                answer[1]
                if answer is not None and answer[0] == version
                else observe_pod(pod, job, framework, types)
            )
            answers[uid] = (version, replica)
            observed.append(replica)
        self._spec, self._answers = spec, answers
        return observed

    def observe_owned_pods(
        self,
        store: Store,
        uid: str,
        job: TrainingJob,
        framework: Framework[Any],
    ) -> list[ObservedReplica | None]:
        """``observe_pods`` of the pods ``uid`` controls in ``store``, in ``Store.by_owner``'s order; when
        the same pods as last time are there and the job's spec is the same, only those changed since are
        looked at."""
        types = canonical_types(job, framework)
        keys = store.owned_keys(uid)
        changed, cursor = store.changes_since(uid, self._cursor)
        same = keys is self._owned and (job.metadata.uid, job.metadata.generation) == self._spec
        self._cursor = cursor
        if not same or changed is None:
            observed = self.observe_pods((store.get(key) or {} for key in keys), job, framework, types)
            self._owned, self._owned_observed = keys, observed
            self._owned_positions = {key: position for position, key in enumerate(keys)}
            return list(observed)
        for key in dict.fromkeys(changed):
            pod = store.get(key)
            position = self._owned_positions.get(key)
            if pod is None or position is None:  # cannot be with the same keys; never trust it
                self._owned = None
                return self.observe_owned_pods(store, uid, job, framework)
            self._owned_observed[position] = self._observe_one(pod, job, framework, types)
        return list(self._owned_observed)

    def _observe_one(
        self, pod: KubeObject, job: TrainingJob, framework: Framework[Any], types: Mapping[str, str]
    ) -> ObservedReplica | None:
        metadata = pod.get("metadata") or _EMPTY
        uid, version = metadata.get("uid"), metadata.get("resourceVersion")
        replica = observe_pod(pod, job, framework, types)
        if uid and version:
            self._answers[uid] = (version, replica)
        return replica

    def service_identities(
        self,
        services: Iterable[KubeObject],
        job: TrainingJob,
        framework: Framework[Any],
        types: Mapping[str, str],
        version: int | None = None,
    ) -> frozenset[tuple[str, int]]:
        """The ``(type, index)`` each service stands for (``replica_identity``), malformed ones left out.

        ``version`` is the services' ``Store.owner_version``: when it is the one last read, no service was
        added, changed or removed since, and the last answer is returned without looking at any (a running
        job's services never change: reading 5,000 of them cost each reconcile 10 ms)."""
        spec = (job.metadata.uid, job.metadata.generation)
        seen = self._services_seen
        if version is not None and spec == self._service_spec and seen is not None and seen[0] == version:
            return seen[1]
        previous = self._identities if spec == self._service_spec else {}
        answers: dict[str, tuple[str, tuple[str, int] | None]] = {}
        identities: set[tuple[str, int]] = set()
        for service in services:
            metadata = service.get("metadata") or _EMPTY
            uid, resource_version = metadata.get("uid"), metadata.get("resourceVersion")
            if not uid or not resource_version:
                identity = replica_identity(service, job, framework, types)
            else:
                answer = previous.get(uid)
                if answer is None or answer[0] != resource_version:
                    answer = (resource_version, replica_identity(service, job, framework, types))
                answers[uid] = answer
                identity = answer[1]
            if identity is not None:
                identities.add(identity)
        self._service_spec, self._identities = spec, answers
        read = frozenset(identities)
        self._services_seen = (version, read) if version is not None else None
        return read


def observe(
    job: TrainingJob,
    framework: Framework[Any],
    pods: Iterable[KubeObject],
    services: Iterable[KubeObject] | None,
    pod_group: KubeObject | None = None,
    *,
    gang_scheduling: bool = False,
    batch_jobs: Iterable[tuple[KubeObject, Sequence[KubeObject]]] = (),
    remembered: ChildObservations | None = None,
    services_version: int | None = None,
    nodes: NodeLookup | None = None,
    departed: Iterable[KubeObject] = (),
    observed_pods: Sequence[ObservedReplica | None] | None = None,
) -> Observation:
    """The job's children as the engine sees them; ``pods``/``services`` are the job's owned children,
    ``batch_jobs`` its owned batch/v1 Jobs, each with the pods it owns; ``remembered`` the job's pods'
    observations and services' identities from its last reconcile, if kept, and ``services_version`` the
    services' ``Store.owner_version`` (``ChildObservations.service_identities``); ``nodes`` the cached nodes
    by name (None: not watched); ``departed`` the last state of the job's disrupted pods deleted since its
    last reconcile; ``observed_pods`` the pods' observations when made already
    (``ChildObservations.observe_owned_pods``): ``pods`` are not looked at then."""
    types = canonical_types(job, framework)  # once, not once per child
    if observed_pods is not None:
        observed: Sequence[ObservedReplica | None] = observed_pods
    elif remembered is not None:
        observed = remembered.observe_pods(pods, job, framework, types)
    else:
        observed = [observe_pod(pod, job, framework, types) for pod in pods]
    replicas = tuple(replica for replica in observed if replica is not None)
    replicas += tuple(
        replica
        for batch_job, job_pods in batch_jobs
        if (replica := observe_batch_job(batch_job, job_pods, job, framework)) is not None
    )
    observed_services = None
    if services is not None and remembered is not None:
        observed_services = remembered.service_identities(services, job, framework, types, services_version)
    elif services is not None:
        identities = (replica_identity(service, job, framework, types) for service in services)
        observed_services = frozenset(identity for identity in identities if identity is not None)
    group = None
    if gang_scheduling:
        phase = ((pod_group or {}).get("status") or {}).get("phase")
        group = PodGroupState(exists=pod_group is not None, phase=phase)
    gone = tuple(
        replica
        for replica in (observe_pod(pod, job, framework, types) for pod in departed)
        if replica is not None
    )
    return Observation(
        replicas=replicas,
        services=observed_services,
        pod_group=group,
        nodes=observe_nodes((*replicas, *gone), nodes) if nodes is not None else (),
        departed=gone,
    )


BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"


def _true_condition(obj: KubeObject, type_: str) -> Mapping[str, Any] | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == type_ and c.get("status") == "True"), None)


def _last_failed_pod(pods: Sequence[KubeObject]) -> KubeObject | None:
    failed = [p for p in pods if (p.get("status") or {}).get("phase") == Phase.FAILED.value]
    return max(
        failed, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or ""), default=None
    )


def observe_batch_job(
    batch_job: KubeObject, pods: Sequence[KubeObject], job: TrainingJob, framework: Framework[Any]
) -> ObservedReplica | None:
    """One replica run by a batch/v1 Job, as mpi-operator reads its launcher Job (§4.12).

    ``Complete`` → Succeeded; ``Failed`` → Failed with the Job's reason and message (past its
    backoffLimit, the reason becomes ``BackoffLimitExceeded/<last failed pod's reason>`` and the message
    gains that pod's message); otherwise Running when one of its pods runs, else Pending. Its pods' own
    failures and restarts are the Job controller's to retry, so they are not reported.
    """
    identity = replica_identity(batch_job_template(batch_job), job, framework)
    if identity is None:
        return None
    deletion = parse_time((batch_job.get("metadata") or {}).get("deletionTimestamp"))
    terminating = deletion is not None
    attempts_failed = int((batch_job.get("status") or {}).get("failed") or 0)
    if _true_condition(batch_job, "Complete") is not None:
        return ObservedReplica(
            *identity,
            Phase.SUCCEEDED,
            exit_code=0,
            retried_failures=attempts_failed,
            terminating=terminating,
            deletion_timestamp=deletion,
        )
    failed = _true_condition(batch_job, "Failed")
    if failed is not None:
        reason = str(failed.get("reason") or "") or None
        message = str(failed.get("message") or "") or None
        last = _last_failed_pod(pods)
        if reason == BACKOFF_LIMIT_EXCEEDED and last is not None:
            pod_status = last.get("status") or {}
            reason = f"{reason}/{pod_status.get('reason') or ''}"
            message = f"{message or ''}: {pod_status.get('message') or ''}"
        return ObservedReplica(
            *identity,
            Phase.FAILED,
            reason=reason,
            message=message,
            retried_failures=max(attempts_failed - 1, 0),
            terminating=terminating,
            deletion_timestamp=deletion,
        )
    live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
    running = [p for p in live if (p.get("status") or {}).get("phase") == Phase.RUNNING.value]
    return ObservedReplica(
        *identity,
        Phase.RUNNING if running else Phase.PENDING,
        ready=any(_is_ready(p) for p in running),
        retried_failures=attempts_failed,
        terminating=terminating,
        deletion_timestamp=deletion,
    )
