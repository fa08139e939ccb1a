"""One controller per enabled job kind: a work queue of job keys, workers that observe, decide and act.

A reconcile reads only the cache: the job, its pods and services (by controller owner UID) and its
PodGroup. It runs the engine and hands the Decision to the ``Actor``. It never runs while creations or
deletions it made are still unseen by the watch (expectations): the watch event that settles them
enqueues the job again.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from kubetrain.api.common import ConditionType
from kubetrain.api.errors import InvalidJobError
from kubetrain.api.jobs import TrainingJob
from kubetrain.api.manifest import job_shell, parse_job
from kubetrain.engine.diagnosis import quoted_crash_loops
from kubetrain.engine.reconciler import reconcile, reject
from kubetrain.engine.types import DeleteJob, Observation, Phase, Traits
from kubetrain.frameworks.addressing import ClusterAddressing
from kubetrain.frameworks.base import Framework
from kubetrain.frameworks.labels import JOB_NAME_LABEL, OPERATOR_NAME_LABEL
from kubetrain.kube.act import Actor, Target
from kubetrain.kube.failures import FailureKeeper
from kubetrain.kube.metrics import OperatorMetrics
from kubetrain.kube.observe import (
    ChildObservations,
    ContainerKey,
    has_disruption_target,
    observe,
    observe_node,
    replica_identity,
    with_last_lines,
)
from kubetrain.kube.previous_logs import PreviousLogs
from kubetrain.kube.runtime.expectations import Expectations, expectation_key
from kubetrain.kube.runtime.queue import WorkQueue
from kubetrain.kube.runtime.reflector import strip_managed_fields
from kubetrain.kube.runtime.store import ChangeType, KubeObject, ObjectChange, Store, object_key
from kubetrain.kube.runtime.workers import run_workers

log = logging.getLogger(__name__)
outcomes = logging.getLogger("kubetrain.reconcile")

FAILURE_RECORD_RETRY = 5.0
"""Seconds until a job whose failure record could not be read is reconciled again."""
REMEMBERED_FROM_PODS = 100
"""A job of this many pods or more keeps its children's observations between reconciles
(``ChildObservations``)."""


@dataclass(frozen=True)
class ChildStores:
    """The caches every controller shares."""

    pods: Store
    services: Store
    pod_groups: Store | None
    """None when gang scheduling is off or its PodGroup CRD is missing."""
    autoscalers: Store | None = None
    """None when the cluster serves no autoscaling/v2."""
    batch_jobs: Store | None = None
    """batch/v1 Jobs running replicas (MPI v2beta1's launcher); None when no enabled kind has any."""
    nodes: Store | None = None
    """Nodes, compacted to their Ready condition and taints (``compact.compact_node``); None when the operator
    may not list them: lost nodes then go undiagnosed and the node-loss timeout unused."""


class JobController:
    def __init__(
        self,
        framework: Framework[Any],
        jobs: Store,
        children: ChildStores,
        actor: Actor,
        expectations: Expectations,
        metrics: OperatorMetrics,
        traits: Traits,
        threads: int = 1,
        addressing: ClusterAddressing | None = None,
        previous_logs: PreviousLogs | None = None,
        failures: FailureKeeper | None = None,
    ) -> None:
        self.framework = framework
        self.jobs = jobs
        self.queue: WorkQueue[str] = WorkQueue()
        self._children = children
        self._actor = actor
        self._expectations = expectations
        self._metrics = metrics
        self._traits = traits
        self._threads = max(1, threads)
        self._addressing = addressing or ClusterAddressing()
        self._previous_logs = previous_logs
        self._failures = failures
        """Keeps each job's first failure in ``<job>-failure``; None: not kept."""
        self._writes_config_files = type(framework).config_files is not Framework.config_files
        """Whether the framework has files beside its pods (it overrides ``Framework.config_files``), the only
        reader of a target's running hosts."""
        self._departed: dict[str, list[KubeObject]] = {}
        """By job key, the last state of its disrupted pods deleted since its last reconcile (``observe``'s
        ``departed``): what counts each disruption once, when it is over."""
        self._deleted: dict[str, str] = {}
        """By job key, the UID of the job this controller deleted (its TTL) while the watch still shows it:
        not reconciled again, or a second reconcile before the watch's DELETED deletes it again and records
        its ``Deleted job`` event twice (a conformance run saw it under load)."""
        self._deletions_seen: set[str] = set()
        """UIDs of pods stranded terminating on a lost node whose deletion was counted then: not again when
        they go."""
        self._remembered: dict[str, ChildObservations] = {}
        """By job key, for jobs of at least ``REMEMBERED_FROM_PODS`` pods: what observing costs a small job
        is not worth the memory of keeping it for the thousands of jobs a cluster may hold."""
        """Where the last lines of crash-looping containers come from; None: findings go without them."""

    @property
    def kind(self) -> str:
        return self.framework.kind

    # --- event handlers -------------------------------------------------------------------------

    def on_job_change(self, change: ObjectChange) -> None:
        key = object_key(change.object)
        if change.type is ChangeType.DELETED:
            self._expectations.delete_prefix(f"{key}/")
            self._actor.forget(_uid(change.object))
            self._departed.pop(key, None)
            if self._failures is not None:
                self._failures.forget(_uid(change.object))
        elif only_a_progress_report(change):
            return
        self.queue.add(key)

    def on_child_change(self, change: ObjectChange, resource: str, job_name: str, replica_type: str) -> None:
        """A pod or service of one of this kind's jobs changed: settle expectations, look at the job again."""
        namespace = (change.object.get("metadata") or {}).get("namespace")
        job_key = f"{namespace}/{job_name}"
        key = expectation_key(job_key, replica_type, resource)
        uid = (change.object.get("metadata") or {}).get("uid")
        if change.type is ChangeType.ADDED:
            self._expectations.creation_observed(key)
        elif change.type is ChangeType.MODIFIED:
            if (
                _being_deleted(change.new)
                and not _being_deleted(change.old)
                and self._on_lost_node(change.object)
            ):
                self._stranded(key, uid)
        elif change.type is ChangeType.DELETED:
            # Counted already when stranded on a lost node; again only for a deletion asked of it since (a
            # terminating pod force-deleted), which only its going settles. With another child of the key
            # awaited too, that may settle the key a watch event early: the reconcile then sees that child not
            # yet terminating and asks for its deletion again, which the engine does once per child anyway.
            if uid not in self._deletions_seen or self._expectations.pending(key)[1] > 0:
                self._expectations.deletion_observed(key)
            self._deletions_seen.discard(uid)
            if resource == "pods" and self._disrupted(change.object):
                self._departed.setdefault(job_key, []).append(change.object)
        self.queue.add(job_key)

    def on_node_lost(self, pod: KubeObject, job_name: str, replica_type: str) -> None:
        """``pod``'s node stopped reporting: if it is terminating, its deletion cannot complete until the node
        comes back, so it counts as observed now, and the reconcile that forces it off (node-loss timeout,
        stuck deletion) does not wait for it."""
        namespace = (pod.get("metadata") or {}).get("namespace")
        job_key = f"{namespace}/{job_name}"
        if _being_deleted(pod):
            self._stranded(
                expectation_key(job_key, replica_type, "pods"), (pod.get("metadata") or {}).get("uid")
            )
        self.queue.add(job_key)

    def _stranded(self, key: str, uid: str | None) -> None:
        if uid is not None and uid not in self._deletions_seen:
            self._expectations.deletion_observed(key)
            self._deletions_seen.add(uid)

    def _on_lost_node(self, pod: KubeObject) -> bool:
        node_name = (pod.get("spec") or {}).get("nodeName")
        node = self._children.nodes.get(str(node_name)) if self._children.nodes and node_name else None
        return node is not None and observe_node(node).lost

    def _disrupted(self, pod: KubeObject) -> bool:
        """A deleted pod a disruption ended: its ``DisruptionTarget``, or its node is lost (the engine
        force-deleted it there)."""
        if has_disruption_target(pod):
            return True
        node_name = (pod.get("spec") or {}).get("nodeName")
        node = self._children.nodes.get(str(node_name)) if self._children.nodes and node_name else None
        return node is not None and observe_node(node).lost

    def enqueue_all(self) -> None:
        for job in self.jobs:
            self.queue.add(object_key(job))

    # --- workers --------------------------------------------------------------------------------

    async def run_workers(self) -> None:
        await run_workers(self.queue, self.reconcile, self._failed, self._threads, on_take=self._count_queued)

    def _count_queued(self) -> None:
        self._metrics.queue_depth.labels(kind=self.kind).set(len(self.queue))

    def _failed(self, key: str, error: Exception, retry_in: float) -> None:
        self._metrics.reconcile_errors.labels(kind=self.kind).inc()
        _log_outcome(self.kind, key, "error", error=str(error), retry_in=round(retry_in, 3))

    def _expectations_satisfied(self, key: str) -> bool:
        return all(
            self._expectations.satisfied(expectation_key(key, replica_type, resource))
            for replica_type in self.framework.replica_types
            for resource in ("pods", "services")
        )

    async def _reject(self, key: str, stored: KubeObject, error: InvalidJobError) -> None:
        """A job the model cannot read is marked Failed (``InvalidSpec``) naming the field, once."""
        try:
            job = job_shell(stored)
        except InvalidJobError as unreadable:
            _log_outcome(self.kind, key, "unreadable", error=str(error), identity=str(unreadable))
            return
        decision = reject(job, error, datetime.now(UTC), self._traits, self.framework)
        outcome = await self._actor.carry_out(Target(key, stored, job, self.framework), decision)
        if outcome.written_job is not None:
            self.jobs.apply_written(strip_managed_fields(outcome.written_job))
        _log_outcome(
            self.kind,
            key,
            "invalid",
            error=str(error),
            status_written=outcome.status_written,
        )
        if outcome.errors:
            # Writing the Failed condition failed (a conflict, the API server away): that is retried.
            raise ReconcileError("; ".join(outcome.errors))

    async def reconcile(self, key: str) -> float | None:
        """Reconcile one job; returns when to look again (None: only on change)."""
        started = time.monotonic()
        stored = self.jobs.get(key)
        if stored is None:
            self._expectations.delete_prefix(f"{key}/")
            self._remembered.pop(key, None)
            self._departed.pop(key, None)
            self._deleted.pop(key, None)
            return None
        metadata = stored.get("metadata") or {}
        if metadata.get("deletionTimestamp") or self._deleted.get(key) == metadata.get("uid"):
            return None
        if not self._expectations_satisfied(key):
            _log_outcome(self.kind, key, "waiting", reason="creations or deletions not yet observed")
            return None
        try:
            job = parse_job(stored)
        except InvalidJobError as error:
            # Stored before the CRD had a rule, or under a CRD without it: fail it once, never retry.
            await self._reject(key, stored, error)
            return None
        uid = str(job.metadata.uid or "")
        big = len(self._children.pods.owned_keys(uid)) >= REMEMBERED_FROM_PODS
        pods = [] if big else self._children.pods.by_owner(uid)
        # Read by ``observe`` only when one changed since the last reconcile (5,000 services listed on each
        # reconcile of a big job were 6 % of it).
        services = self._children.services.owned(uid) if self.framework.per_replica_services else None
        gang = self._traits.gang_scheduler is not None
        pod_group = self._children.pod_groups.get(key) if gang and self._children.pod_groups else None
        autoscalers = self._children.autoscalers
        autoscaler = autoscalers.get(key) if autoscalers is not None else None
        if autoscaler is not None and not _owned_by(autoscaler, uid):
            autoscaler = None  # someone else's HPA of that name: never updated (creating one is refused)
        batch_jobs = self._children.batch_jobs.by_owner(uid) if self._children.batch_jobs else []
        runs = [(batch_job, self._children.pods.by_owner(_uid(batch_job))) for batch_job in batch_jobs]
        remembered = None
        observed_pods = None
        if big:
            remembered = self._remembered.setdefault(key, ChildObservations())
            observed_pods = remembered.observe_owned_pods(self._children.pods, uid, job, self.framework)
        else:
            self._remembered.pop(key, None)
        departed = [pod for pod in self._departed.get(key, ()) if _owned_by(pod, uid)]
        nodes = self._children.nodes
        observation = observe(
            job,
            self.framework,
            pods,
            services,
            pod_group,
            gang_scheduling=gang,
            batch_jobs=runs,
            remembered=remembered,
            services_version=self._children.services.owner_version(uid),
            nodes=nodes.get if nodes is not None else None,
            departed=departed,
            observed_pods=observed_pods,
        )
        if autoscalers is not None:
            observation = replace(observation, autoscaler=autoscaler is not None)
        now = datetime.now(UTC)
        observation = self._with_crash_output(key, job, observation, now)

        decision = reconcile(job, observation, now, self._traits, self.framework)
        planned = decision.admitted or job  # not admitted: nothing will be planned from it
        # Only a framework that writes config files (MPI's hostfile and discover_hosts.sh) reads them: for the
        # others, naming every running replica was 4 ms of each reconcile of a 5,000-replica job.
        running_hosts = (
            tuple(
                self._addressing.host(planned, replica.replica_type, replica.index)
                for replica in observation.replicas
                if replica.phase is Phase.RUNNING
                and not self.framework.is_master_role(planned, replica.replica_type, replica.index)
            )
            if self._writes_config_files
            else ()
        )
        target = Target(
            key, stored, planned, self.framework, pod_group, autoscaler, running_hosts, tuple(batch_jobs)
        )
        # Before the Decision is carried out: the failed pods' lines are read while they are still there.
        retry_failures_in = await self._keep_failures(
            key, stored, job, decision.admitted is not None, observation, now
        )
        outcome = await self._actor.carry_out(target, decision)
        if outcome.written_job is not None:
            # The write's answer, unless the watch already brought something newer (Store.apply_written).
            self.jobs.apply_written(strip_managed_fields(outcome.written_job))
        elapsed = time.monotonic() - started
        self._metrics.reconcile_seconds.labels(kind=self.kind).observe(elapsed)
        if outcome.errors:
            raise ReconcileError("; ".join(outcome.errors))
        if any(isinstance(action, DeleteJob) for action in decision.actions):
            self._deleted[key] = str(metadata.get("uid"))
        self._counted(key, departed)
        if outcome.namespace_terminating:  # nothing there can be written any more; the job goes with it
            _log_outcome(self.kind, key, "dropped", reason="its namespace is being deleted")
            return None
        state = decision.status.conditions[-1].type if decision.status.conditions else ""
        _log_outcome(
            self.kind,
            key,
            "reconciled",
            state=str(state),
            created=outcome.created,
            deleted=outcome.deleted,
            status_written=outcome.status_written,
            requeue_after=decision.requeue_after,
            duration_ms=round(elapsed * 1000, 1),
        )
        if retry_failures_in is not None:
            return min(retry_failures_in, decision.requeue_after or retry_failures_in)
        return decision.requeue_after

    def _counted(self, key: str, departed: list[KubeObject]) -> None:
        """The departed pods a reconcile has counted (its status written) are forgotten; those that departed
        meanwhile are kept for the next one."""
        left = [pod for pod in self._departed.get(key, ()) if not any(pod is seen for seen in departed)]
        if left:
            self._departed[key] = left
        else:
            self._departed.pop(key, None)

    async def _keep_failures(
        self,
        key: str,
        stored: KubeObject,
        job: TrainingJob,
        admitted: bool,
        observation: Observation,
        now: datetime,
    ) -> float | None:
        """Keep the job's failure record current (``kube.failures``); when to look again if that failed."""
        if self._failures is None or not admitted:
            return None
        try:
            return await self._failures.keep(stored, job, self.framework, observation.replicas, now)
        except Exception as error:  # reading the record failed: the reconcile goes on, and is retried later
            _log_outcome(self.kind, key, "failure record not kept", error=str(error))
            return FAILURE_RECORD_RETRY

    def _with_crash_output(
        self, key: str, job: TrainingJob, observation: Observation, now: datetime
    ) -> Observation:
        """The observation with the last lines of the crash-looping containers a finding quotes, once read
        (the read runs in the background; the job is reconciled again when its lines are in)."""
        if self._previous_logs is None:
            return observation
        wanted = quoted_crash_loops(job, self.framework, observation.replicas, now)
        if not wanted:
            return observation
        pods = self._children.pods.by_owner(str(job.metadata.uid or ""))
        by_identity = {replica_identity(pod, job, self.framework): pod for pod in pods}
        lines: dict[ContainerKey, str] = {}
        for replica, container in wanted:
            pod = by_identity.get((replica.replica_type, replica.index))
            if pod is None:
                continue
            log_key = PreviousLogs.key(pod, container.name, container.restart_count)
            tail = self._previous_logs.tail(log_key, lambda: self.queue.add(key))
            if tail:
                lines[(replica.replica_type, replica.index, container.name)] = tail
        return with_last_lines(observation, lines)


def _uid(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("uid", ""))


def _owned_by(obj: KubeObject, uid: str) -> bool:
    references = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return any(r.get("controller") and r.get("uid") == uid for r in references)


_VOLATILE_METADATA = ("resourceVersion", "managedFields")


def only_a_progress_report(change: ObjectChange) -> bool:
    """Whether the change is a later ``status.trainerStatus`` and nothing else, on a job that is not Stalled.

    Such a change needs no reconcile: the status endpoint writes one a second per reporting job, and the
    only rule that reads it (hang detection) has a wake-up at its deadline, armed by the reconcile of the
    first report, when it reads the latest report anyway. A Stalled job is reconciled, so that a report
    clears the condition at once."""
    old, new = change.old, change.new
    if change.type is not ChangeType.MODIFIED or old is None or new is None:
        return False
    old_status, new_status = dict(old.get("status") or {}), dict(new.get("status") or {})
    old_report, new_report = old_status.pop("trainerStatus", None), new_status.pop("trainerStatus", None)
    if old_report is None or old_report == new_report:
        return False  # the first report arms the deadline's wake-up
    if old_status != new_status or _stalled(new_status):
        return False
    return _without(old, _VOLATILE_METADATA) == _without(new, _VOLATILE_METADATA)


def _stalled(status: dict[str, Any]) -> bool:
    return any(
        c.get("type") == ConditionType.STALLED and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )


def _without(obj: KubeObject, metadata_fields: tuple[str, ...]) -> dict[str, Any]:
    metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in metadata_fields}
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": metadata}


class ReconcileError(Exception):
    """Some API calls of a reconcile failed; the job is retried with backoff."""


def _log_outcome(kind: str, key: str, outcome: str, **fields: Any) -> None:
    record = {
        "kind": kind,
        "job": key,
        "outcome": outcome,
        **{k: v for k, v in fields.items() if v is not None},
    }
    outcomes.info(outcome, extra={"fields": record})


def child_routing(
    obj: KubeObject, controller_names: dict[str, JobController]
) -> tuple[JobController, str, str] | None:
    """The controller, job name and replica type a pod or service belongs to, from its labels."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    controller = controller_names.get(str(labels.get(OPERATOR_NAME_LABEL, "")))
    job_name = labels.get(JOB_NAME_LABEL)
    if controller is None or not job_name:
        return None
    replica_type = controller.framework.replica_type_of({str(k): str(v) for k, v in labels.items()})
    return controller, str(job_name), replica_type or ""


def _being_deleted(child: KubeObject | None) -> bool:
    return child is not None and bool((child.get("metadata") or {}).get("deletionTimestamp"))
