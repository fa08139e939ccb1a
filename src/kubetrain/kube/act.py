"""Carrying out the engine's Decision with API calls: children, PodGroup, job deletion, events, status.

Nothing is decided here. Creations and deletions raise expectations before the call (so a lagging cache
never makes the next reconcile create a duplicate) and lower them again when the call fails. Independent
calls run concurrently: a 16-replica job's pods and services go out together, not one round trip each.
The status is written through the status subresource only when it changed, with the job's
resourceVersion, so a status computed from a stale cache is refused (409) and recomputed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api.common import ConditionType, JobStatus
from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.planning import plan_replica
from kubetrain.engine.types import (
    CreateReplica,
    CreateService,
    Decision,
    DeleteAutoscaler,
    DeleteJob,
    DeletePodGroup,
    DeleteReplica,
    DeleteService,
    EmitEvent,
    EventType,
    SyncAutoscaler,
    SyncPodGroup,
)
from kubetrain.frameworks.addressing import ClusterAddressing
from kubetrain.frameworks.base import Autoscaling, Framework
from kubetrain.kube import ssh
from kubetrain.kube.batch_jobs import batch_job_template, suspension_patches
from kubetrain.kube.events import EventRecord, EventRecorder
from kubetrain.kube.metrics import OperatorMetrics
from kubetrain.kube.render import (
    SCHEDULER_PLUGINS_GROUP,
    VOLCANO_GROUP,
    RenderSettings,
    as_batch_job,
    owner_reference,
    render_companions,
    render_config_map,
    render_pod,
    render_pod_group,
    render_service,
)
from kubetrain.kube.runtime.client import ApiStatusError, raise_for_status
from kubetrain.kube.runtime.expectations import Expectations, expectation_key
from kubetrain.kube.runtime.http import HttpApi
from kubetrain.kube.status.ca_bundle import CaPublisher

log = logging.getLogger(__name__)

KubeObject = Mapping[str, Any]

MAX_IN_FLIGHT = 32
"""Concurrent writes across all workers. Against envtest on two cores (``bench/operator_throughput.py``),
32 created a 500-job burst at 81 to 96 % of a plain client's rate where 16 reached 54 to 78 %; 64 was
faster again but took peak RSS to 147 MB, near the 150 MB target."""

JOB_RESTART = "job-restart"
"""``DeleteReplica.reason`` of every replica a job restart stops (restart scope Job)."""

COMPANION_RECHECK_PERIOD = 300.0
"""Seconds between re-posts of a job's companions (upstream's default resync period)."""


def job_path(framework: Framework[Any], namespace: str, name: str) -> str:
    return f"/apis/{framework.api_version}/namespaces/{namespace}/{framework.model.PLURAL}/{name}"


HPA_API = "/apis/autoscaling/v2"
BATCH_API = "/apis/batch/v1"


def render_autoscaler(target: Target, spec: Autoscaling) -> dict[str, Any]:
    """Upstream's HPA named after the job, scaling it through its ``scale`` subresource (§4.10)."""
    job, framework = target.job, target.framework
    hpa_spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": framework.api_version, "kind": framework.kind, "name": job.name},
        "maxReplicas": spec.max_replicas,
        "metrics": [dict(metric) for metric in spec.metrics],
    }
    if spec.min_replicas is not None:
        hpa_spec["minReplicas"] = spec.min_replicas
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        # No labels, as upstream's: the operator watches every HPA and keeps those its jobs own, so the
        # HPA of a job upstream started is its own too after a switch.
        "metadata": {"name": job.name, "namespace": job.namespace, "ownerReferences": [owner_reference(job)]},
        "spec": hpa_spec,
    }


def _collection_of(obj: KubeObject) -> str:
    """The collection path of a namespaced core or RBAC object (what companions are made of)."""
    api_version = str(obj["apiVersion"])
    plural = {"ServiceAccount": "serviceaccounts", "Role": "roles", "RoleBinding": "rolebindings"}.get(
        str(obj["kind"]), f"{str(obj['kind']).lower()}s"
    )
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    return f"{base}/namespaces/{obj['metadata']['namespace']}/{plural}"


def pod_group_collection(settings: RenderSettings, namespace: str) -> str:
    if settings.is_volcano:
        return f"/apis/{VOLCANO_GROUP}/v1beta1/namespaces/{namespace}/podgroups"
    return f"/apis/{SCHEDULER_PLUGINS_GROUP}/v1alpha1/namespaces/{namespace}/podgroups"


@dataclass(frozen=True)
class Target:
    """The job a Decision is about."""

    key: str
    """``namespace/name``."""
    stored: KubeObject
    """The job as cached (wire JSON, with its resourceVersion)."""
    job: TrainingJob
    """Defaulted when admission succeeded (children are planned from it), as stored otherwise."""
    framework: Framework[Any]
    pod_group: KubeObject | None = None
    """The cached PodGroup, when gang scheduling is on and one exists."""
    autoscaler: KubeObject | None = None
    """The cached HorizontalPodAutoscaler, when one exists."""
    running_hosts: tuple[str, ...] = ()
    """Addresses of the running replicas that are not the master role (MPI's discover_hosts.sh)."""
    batch_jobs: tuple[KubeObject, ...] = ()
    """The cached batch/v1 Jobs the job owns (MPI v2beta1's launcher)."""


@dataclass
class Outcome:
    created: int = 0
    deleted: int = 0
    status_written: bool = False
    written_job: dict[str, Any] | None = None
    """The job as the status write returned it (fresher than the cache)."""
    errors: list[str] = field(default_factory=list)
    namespace_terminating: bool = False
    """A write was refused because the job's namespace is being deleted: not an error to retry."""


class Actor:
    def __init__(
        self,
        http: HttpApi,
        expectations: Expectations,
        events: EventRecorder,
        metrics: OperatorMetrics,
        settings: RenderSettings,
        addressing: ClusterAddressing | None = None,
        companion_recheck_period: float = COMPANION_RECHECK_PERIOD,
        clock: Callable[[], float] = time.monotonic,
        ca: CaPublisher | None = None,
    ) -> None:
        self._http = http
        self._expectations = expectations
        self._events = events
        self._metrics = metrics
        self._settings = settings
        self._addressing = addressing or ClusterAddressing()
        self._in_flight = asyncio.Semaphore(MAX_IN_FLIGHT)
        self.writes_pending = 0
        """Calls started and not finished (waiting for a slot or in flight)."""
        self._companion_recheck_period = companion_recheck_period
        self._clock = clock
        self._companions_posted: dict[str, float] = {}
        """Job UID → when its companions were last posted (by ``clock``)."""
        self._ca = ca
        """Publishes the status endpoint's CA in a namespace before pods there mount it (None: it is off)."""

    def forget(self, uid: str) -> None:
        """The job is gone: drop what is remembered about it, so a long-lived operator does not grow."""
        self._companions_posted.pop(uid, None)

    async def carry_out(self, target: Target, decision: Decision) -> Outcome:
        outcome = Outcome()
        for action in decision.actions:
            if isinstance(action, EmitEvent):
                self._event(target, action.type, action.reason, action.message)
        for finding in decision.findings:
            # On every reconcile while it holds: the recorder folds the repeats into one Event with a count.
            self._event(target, EventType.WARNING, finding.reason, finding.message)
        suspended = bool(target.job.run_policy.suspend)
        # Until the reconcile that finishes the job, included: upstream's MPI controllers rewrite
        # discover_hosts.sh before their status rules fail the job (a worker that failed is no longer in it).
        was_finished = target.job.status.is_finished
        if not was_finished and (not suspended or target.framework.companions_while_suspended):
            # What the pods mount or run as must exist before them (MPIJob v1: RBAC and <job>-config).
            await self._guard(outcome, "ensure companions", self._ensure_companions(target))
        if not decision.status.is_finished:
            await self._guard(outcome, "sync batch Job suspension", self._sync_batch_job_suspension(target))
        if self._ca is not None and any(isinstance(a, CreateReplica) for a in decision.actions):
            # Pods mount the CA (optionally: a failure here delays no pod, and is retried with the job).
            await self._guard(
                outcome, "publish the status endpoint's CA", self._ca.ensure(target.job.namespace)
            )
        # The PodGroup first: the gang scheduler must know the group before its pods arrive.
        for action in decision.actions:
            if isinstance(action, SyncPodGroup):
                await self._guard(outcome, "sync PodGroup", self._sync_pod_group(target, action.min_member))
        calls: list[tuple[str, Awaitable[None]]] = []
        for action in decision.actions:
            if isinstance(action, CreateReplica):
                calls.append((f"create pod {action}", self._create_pod(target, action, outcome)))
            elif isinstance(action, CreateService):
                calls.append((f"create service {action}", self._create_service(target, action, outcome)))
            elif isinstance(action, DeleteReplica):
                calls.append((f"delete pod {action}", self._delete_pod(target, action, outcome)))
            elif isinstance(action, DeleteService):
                calls.append((f"delete service {action}", self._delete_service(target, action, outcome)))
            elif isinstance(action, DeletePodGroup):
                calls.append(("delete PodGroup", self._delete_pod_group(target)))
            elif isinstance(action, SyncAutoscaler):
                calls.append(("sync HPA", self._sync_autoscaler(target, action.spec)))
            elif isinstance(action, DeleteAutoscaler):
                calls.append(("delete HPA", self._delete_autoscaler(target)))
        if any(isinstance(a, DeleteReplica) and a.reason == JOB_RESTART for a in decision.actions):
            self._job_metric(self._metrics.jobs_restarted, target)  # one job restart, however many pods
        await asyncio.gather(*(self._guard(outcome, what, call) for what, call in calls))
        if any(isinstance(action, DeleteJob) for action in decision.actions):
            await self._guard(outcome, "delete job", self._delete_job(target))
            return outcome
        await self._guard(outcome, "write status", self._write_status(target, decision.status, outcome))
        return outcome

    # --- children -------------------------------------------------------------------------------

    def _pods_key(self, target: Target, replica_type: str) -> str:
        return expectation_key(target.key, replica_type, "pods")

    def _services_key(self, target: Target, replica_type: str) -> str:
        return expectation_key(target.key, replica_type, "services")

    async def _create_pod(self, target: Target, action: CreateReplica, outcome: Outcome) -> None:
        job, framework = target.job, target.framework
        plan = plan_replica(job, action.replica_type, action.index, self._addressing, framework)
        rendered = render_pod(job, plan, framework, self._addressing, self._settings)
        key = self._pods_key(target, action.replica_type)
        if framework.runs_as_batch_job(job, action.replica_type):
            collection = f"{BATCH_API}/namespaces/{job.namespace}/jobs"
            manifest = as_batch_job(job, rendered.manifest)
            created = await self._create(
                key, collection, manifest, target, "Job", action.replica_type, plan.name
            )
            outcome.created += created
            return
        collection = f"/api/v1/namespaces/{job.namespace}/pods"
        created = await self._create(
            key, collection, rendered.manifest, target, "Pod", action.replica_type, plan.name
        )
        outcome.created += created

    async def _create_service(self, target: Target, action: CreateService, outcome: Outcome) -> None:
        job, framework = target.job, target.framework
        manifest = render_service(job, action.replica_type, action.index, framework)
        key = self._services_key(target, action.replica_type)
        name = manifest["metadata"]["name"]
        collection = f"/api/v1/namespaces/{job.namespace}/services"
        created = await self._create(key, collection, manifest, target, "Service", action.replica_type, name)
        outcome.created += created

    async def _create(
        self,
        key: str,
        collection: str,
        manifest: dict[str, Any],
        target: Target,
        kind: str,
        replica_type: str,
        name: str,
    ) -> int:
        self._expectations.expect_creations(key)
        try:
            response = await self._http.post(collection, json=manifest)
            raise_for_status(response, response.content)
        except ApiStatusError as error:
            self._expectations.lower_on_error(key, creations=1)
            if error.code == 409:
                # It exists already: made by a previous process, or by a request of ours whose answer was
                # lost (the API server crashed). Its watch event may have come before this expectation was
                # raised (a re-list after the crash), so none is left to lower it: waiting for one wedged the
                # job for the expectations' five minutes. A later event only lowers the count below zero.
                return 0
            self._api_error("create", error)
            self._event(target, EventType.WARNING, f"FailedCreate{kind}", f"Error creating: {error}")
            raise
        except Exception:
            self._expectations.lower_on_error(key, creations=1)
            raise
        self._child_event(target, replica_type, kind, name, "Create")
        return 1

    async def _delete_pod(self, target: Target, action: DeleteReplica, outcome: Outcome) -> None:
        name = target.framework.pod_name(target.job, action.replica_type, action.index)
        path = f"/api/v1/namespaces/{target.job.namespace}/pods/{name}"
        body: dict[str, Any] | None = {"gracePeriodSeconds": 0} if action.force else None
        if target.framework.runs_as_batch_job(target.job, action.replica_type):
            # The Job and, in the background, its pods.
            path = f"{BATCH_API}/namespaces/{target.job.namespace}/jobs/{name}"
            body = {**(body or {}), "propagationPolicy": "Background"}
        if action.reason == "restart":
            self._job_metric(self._metrics.jobs_restarted, target)
        deleted = await self._delete(
            self._pods_key(target, action.replica_type), path, target, "Pod", action.replica_type, name, body
        )
        outcome.deleted += deleted

    async def _delete_service(self, target: Target, action: DeleteService, outcome: Outcome) -> None:
        name = target.framework.pod_name(target.job, action.replica_type, action.index)
        path = f"/api/v1/namespaces/{target.job.namespace}/services/{name}"
        deleted = await self._delete(
            self._services_key(target, action.replica_type),
            path,
            target,
            "Service",
            action.replica_type,
            name,
        )
        outcome.deleted += deleted

    async def _delete(
        self,
        key: str,
        path: str,
        target: Target,
        kind: str,
        replica_type: str,
        name: str,
        body: dict[str, Any] | None = None,
    ) -> int:
        self._expectations.expect_deletions(key)
        try:
            response = await self._http.request("DELETE", path, json=body)
            raise_for_status(response, response.content)
        except ApiStatusError as error:
            self._expectations.lower_on_error(key, deletions=1)
            if error.code == 404:
                return 0
            self._api_error("delete", error)
            self._event(target, EventType.WARNING, f"FailedDelete{kind}", f"Error deleting: {error}")
            raise
        except Exception:
            self._expectations.lower_on_error(key, deletions=1)
            raise
        self._child_event(target, replica_type, kind, name, "Delete")
        return 1

    # --- companions -----------------------------------------------------------------------------

    async def _ensure_companions(self, target: Target) -> None:
        """Create the framework's companion objects, again once per recheck period, and keep
        ``<job>-config`` current.

        Upstream's MPI v1 controller re-creates a deleted ServiceAccount/Role/RoleBinding on its next
        reconcile, reading them from informers. Companions are not watched here (three more informers
        for objects that are never changed), so instead they are posted again once per recheck period
        (the resync period when the operator wires it): a POST answered 409 costs what a GET would, and
        in steady state a job pays it once per period, not once per reconcile. A deleted companion is
        thus back within one period.
        """
        uid = str((target.stored.get("metadata") or {}).get("uid", ""))
        posted = self._companions_posted.get(uid)
        now = self._clock()
        if posted is None or now - posted >= self._companion_recheck_period:
            for obj in render_companions(target.job, target.framework):
                await self._create_companion(obj)
            self._companions_posted[uid] = now
        hosts = list(target.running_hosts)
        desired = render_config_map(target.job, target.framework, self._addressing, hosts)
        if desired is None:
            return
        path = f"{_collection_of(desired)}/{desired['metadata']['name']}"
        current = await self._http.get(path)
        if current.status_code == 404:
            response = await self._http.post(_collection_of(desired), json=desired)
        elif current.status_code < 400 and current.json().get("data") != desired["data"]:
            response = await self._http.put(path, json={**current.json(), "data": desired["data"]})
        else:
            raise_for_status(current, current.content)
            return
        raise_for_status(response, response.content)

    async def _create_companion(self, obj: dict[str, Any]) -> None:
        """Create one companion; an SSH-auth Secret gets its key pair here, once (or again when an
        existing one holds a different key set, as mpi-operator does)."""
        collection = _collection_of(obj)
        body = ssh.with_keys(obj) if ssh.needs_keys(obj) else obj
        response = await self._http.post(collection, json=body)
        if response.status_code != 409:
            raise_for_status(response, response.content)
            return
        if not ssh.needs_keys(obj):
            return
        path = f"{collection}/{obj['metadata']['name']}"
        current = await self._http.get(path)
        raise_for_status(current, current.content)
        if ssh.needs_keys(current.json()):
            response = await self._http.put(path, json=ssh.with_keys(current.json()))
            raise_for_status(response, response.content)

    async def _sync_batch_job_suspension(self, target: Target) -> None:
        """A batch Job follows the job's ``runPolicy.suspend`` (mpi-operator §4.12 step 8)."""
        job, framework = target.job, target.framework
        for batch_job in target.batch_jobs:
            metadata = batch_job.get("metadata") or {}
            template_labels = (batch_job_template(batch_job).get("metadata") or {}).get("labels") or {}
            labels = {str(k): str(v) for k, v in template_labels.items()}
            replica_type = framework.replica_type_of(labels)
            index = framework.replica_index_of(job, labels)
            if replica_type is None or index is None or replica_type not in job.replica_specs:
                continue
            plan = plan_replica(job, replica_type, index, self._addressing, framework)
            pod = render_pod(job, plan, framework, self._addressing, self._settings).manifest
            fresh = {"metadata": pod["metadata"], "spec": pod["spec"]}
            path = f"{BATCH_API}/namespaces/{job.namespace}/jobs/{metadata['name']}"
            headers = {"Content-Type": "application/merge-patch+json"}
            for subresource, body in suspension_patches(batch_job, bool(job.run_policy.suspend), fresh):
                response = await self._http.patch(f"{path}{subresource}", json=body, headers=headers)
                raise_for_status(response, response.content)

    # --- PodGroup, job ------------------------------------------------------------------------

    async def _sync_pod_group(self, target: Target, min_member: int) -> None:
        existing = target.pod_group
        queue = ((existing or {}).get("spec") or {}).get("queue") or None
        priorities = await self._priority_values(target.job)
        desired = render_pod_group(target.job, min_member, self._settings, priorities, existing_queue=queue)
        collection = pod_group_collection(self._settings, target.job.namespace)
        if existing is None:
            response = await self._http.post(collection, json=desired)
            if response.status_code == 409:
                return
        elif (existing.get("spec") or {}) != {**(existing.get("spec") or {}), **desired["spec"]}:
            updated = {**existing, "spec": {**(existing.get("spec") or {}), **desired["spec"]}}
            response = await self._http.put(f"{collection}/{target.job.name}", json=updated)
        else:
            return
        raise_for_status(response, response.content)

    async def _priority_values(self, job: TrainingJob) -> dict[str, int] | None:
        """PriorityClass values, which order replica types for the computed minResources; only looked up
        when a template names a class and the policy gives no minResources."""
        policy = job.run_policy.scheduling_policy
        named = any(
            (spec.template.get("spec") or {}).get("priorityClassName") for spec in job.replica_specs.values()
        )
        if not named or (policy is not None and policy.min_resources):
            return None
        response = await self._http.get("/apis/scheduling.k8s.io/v1/priorityclasses")
        raise_for_status(response, response.content)
        return {
            item["metadata"]["name"]: int(item.get("value", 0)) for item in response.json().get("items") or []
        }

    async def _delete_pod_group(self, target: Target) -> None:
        collection = pod_group_collection(self._settings, target.job.namespace)
        try:
            response = await self._http.delete(f"{collection}/{target.job.name}")
            raise_for_status(response, response.content)
        except ApiStatusError as error:
            if error.code == 404:
                return
            self._event(target, EventType.WARNING, "FailedDeletePodGroup", f"Error deleting: {error}")
            raise
        self._event(
            target, EventType.NORMAL, "SuccessfulDeletePodGroup", f"Deleted PodGroup: {target.job.name}"
        )

    async def _sync_autoscaler(self, target: Target, spec: Autoscaling) -> None:
        desired = render_autoscaler(target, spec)
        collection = f"{HPA_API}/namespaces/{target.job.namespace}/horizontalpodautoscalers"
        existing = target.autoscaler
        if existing is None:
            response = await self._http.post(collection, json=desired)
            if response.status_code == 409:
                return
        elif {k: (existing.get("spec") or {}).get(k) for k in desired["spec"]} != desired["spec"]:
            # Only the fields kubetrain sets: the API server defaults others, which are no difference.
            updated = {**existing, "spec": {**(existing.get("spec") or {}), **desired["spec"]}}
            response = await self._http.put(f"{collection}/{target.job.name}", json=updated)
        else:
            return
        raise_for_status(response, response.content)

    async def _delete_autoscaler(self, target: Target) -> None:
        path = f"{HPA_API}/namespaces/{target.job.namespace}/horizontalpodautoscalers/{target.job.name}"
        response = await self._http.delete(path)
        if response.status_code != 404:
            raise_for_status(response, response.content)

    async def _delete_job(self, target: Target) -> None:
        path = job_path(target.framework, target.job.namespace, target.job.name)
        uid = (target.stored.get("metadata") or {}).get("uid")
        # Preconditions: never delete a newer job that took the name meanwhile.
        body = {"propagationPolicy": "Background", "preconditions": {"uid": uid}}
        response = await self._http.request("DELETE", path, json=body)
        if response.status_code != 404:
            raise_for_status(response, response.content)
            self._job_metric(self._metrics.jobs_deleted, target)

    # --- status ---------------------------------------------------------------------------------

    async def _write_status(self, target: Target, status: JobStatus, outcome: Outcome) -> None:
        stored_status = JobStatus.model_validate(target.stored.get("status") or {})
        new_wire = status.to_wire()
        if stored_status.to_wire() == new_wire:
            return
        body = {**target.stored, "status": new_wire}
        path = job_path(target.framework, target.job.namespace, target.job.name) + "/status"
        response = await self._http.put(path, json=body)
        try:
            raise_for_status(response, response.content)
        except ApiStatusError as error:
            if error.code != 409:
                self._api_error("update", error)
            raise
        outcome.status_written = True
        outcome.written_job = response.json()
        # Counted once written: a refused write is recomputed and would count the transition again.
        self._count_transitions(target, stored_status, status)

    def _count_transitions(self, target: Target, old: JobStatus, new: JobStatus) -> None:
        """Upstream's job counters, each on the transition into its condition."""
        counters: tuple[tuple[ConditionType, Any], ...] = (
            (ConditionType.CREATED, self._metrics.jobs_created),
            (ConditionType.SUCCEEDED, self._metrics.jobs_successful),
            (ConditionType.FAILED, self._metrics.jobs_failed),
        )
        for condition, counter in counters:
            if new.is_true(condition) and not old.is_true(condition):
                self._job_metric(counter, target)

    # --- helpers --------------------------------------------------------------------------------

    def _child_event(self, target: Target, replica_type: str, kind: str, name: str, action: str) -> None:
        event = target.framework.child_event(target.job, replica_type, kind, name, action)
        if event is not None:
            self._event(target, EventType.NORMAL, *event)

    def _event(self, target: Target, type_: EventType, reason: str, message: str) -> None:
        component = target.framework.event_source or target.framework.controller_name
        self._events.record(EventRecord(target.stored, str(type_), reason, message, component))

    def _job_metric(self, counter: Any, target: Target) -> None:
        counter.labels(job_namespace=target.job.namespace, framework=target.framework.framework_label).inc()

    def _api_error(self, verb: str, error: ApiStatusError) -> None:
        self._metrics.api_errors.labels(verb=verb, code=str(error.code)).inc()

    async def _guard(self, outcome: Outcome, what: str, call: Awaitable[None]) -> None:
        """Run one call; remember its failure instead of abandoning the calls beside it."""
        self.writes_pending += 1
        try:
            async with self._in_flight:
                await call
        except ApiStatusError as error:
            if error.namespace_terminating:
                outcome.namespace_terminating = True
            else:
                outcome.errors.append(f"{what}: {error}")
        except Exception as error:
            self._metrics.api_errors.labels(verb="transport", code="0").inc()
            outcome.errors.append(f"{what}: {type(error).__name__}: {error}")
        finally:
            self.writes_pending -= 1
