"""The TrainJob controller: Kubeflow Trainer v2's API on the operator's runtime (caches, work queue, events).

A reconcile reads the TrainJob, its runtime and its JobSet from the caches, asks the engine
(``engine.trainjob``) what to do, and does it: each object is server-side applied as Trainer applies it
(field manager ``trainer``, ownership forced), the JobSet is deleted when the deadline passed, the status is
merge-patched when it changed, and events are recorded. The real JobSet controller runs the JobSet.

Only two reads are not cached: the runtime snapshot ConfigMap and, for MPI and gang runtimes, whether the
SSH Secret and PodGroup exist. Watching every ConfigMap and Secret of a cluster to learn about a few is
what an operator should not cost; each is read once per TrainJob and remembered (a snapshot never changes).
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubetrain.api.trainer import (
    API_VERSION,
    CLUSTER_TRAINING_RUNTIME,
    TrainJob,
    TrainJobStatus,
)
from kubetrain.engine.trainjob import MAX_EVENT_DETAIL, TrainJobObservation, reconcile_trainjob
from kubetrain.engine.trainjob_plan import runtime_key, snapshot_name
from kubetrain.frameworks.trainer.builtin import builtin_runtime_documents
from kubetrain.frameworks.trainer.constants import (
    ANCESTOR_TRAINER,
    FIELD_OWNER,
    RESOURCES_CREATION_FAILED_REASON,
)
from kubetrain.frameworks.trainer.gang import SCHEDULER_PLUGINS_API, VOLCANO_API
from kubetrain.frameworks.trainer.jobset import JOBSET_API, JOBSET_KIND, ancestor_of, pod_spec_of
from kubetrain.frameworks.trainer.mpi import ssh_secret_name
from kubetrain.kube import ssh
from kubetrain.kube.events import EventRecord, EventRecorder
from kubetrain.kube.metrics import OperatorMetrics
from kubetrain.kube.runtime.client import ApiStatusError, raise_for_status
from kubetrain.kube.runtime.http import HttpApi
from kubetrain.kube.runtime.queue import WorkQueue
from kubetrain.kube.runtime.reflector import strip_managed_fields
from kubetrain.kube.runtime.store import (
    ChangeType,
    KubeObject,
    ObjectChange,
    Store,
    controller_uid,
    object_key,
    resource_version,
)
from kubetrain.kube.runtime.workers import run_workers
from kubetrain.kube.status.ca_bundle import CaPublisher
from kubetrain.kube.status.injection import StatusInjection, inject_status_reporting

log = logging.getLogger(__name__)
outcomes = logging.getLogger("kubetrain.reconcile")

KIND = "TrainJob"
EVENT_COMPONENT = "trainer-trainjob-controller"
_PLURALS = {
    ("v1", "ConfigMap"): "configmaps",
    ("v1", "Secret"): "secrets",
    (JOBSET_API, "JobSet"): "jobsets",
    (SCHEDULER_PLUGINS_API, "PodGroup"): "podgroups",
    (VOLCANO_API, "PodGroup"): "podgroups",
}


def _latest(cached: KubeObject | None, known: _Known) -> Mapping[str, Any] | None:
    """The JobSet as last seen: the cache's, unless this operator's own apply answered a newer version (then
    that, until the cache catches up and it is forgotten)."""
    applied = known.jobset
    if applied is None:
        return cached
    if cached is not None and _version(cached) >= _version(applied):
        known.jobset = None
        return cached
    return applied


def _version(obj: Mapping[str, Any]) -> int:
    """An object's resourceVersion as a number (etcd's revision; one that is not a number counts as the
    oldest, so the cache's copy is used)."""
    try:
        return int(resource_version(obj) or "")
    except ValueError:
        return -1


def object_path(api_version: str, kind: str, namespace: str, name: str = "") -> str:
    """The URL path of a namespaced object (or of its collection when ``name`` is empty)."""
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    path = f"{base}/namespaces/{namespace}/{_PLURALS[(api_version, kind)]}"
    return f"{path}/{name}" if name else path


def trainjob_path(namespace: str, name: str) -> str:
    return f"/apis/{API_VERSION}/namespaces/{namespace}/trainjobs/{name}"


@dataclass
class _Known:
    """What one TrainJob's reconciles learnt of objects not cached (by its uid)."""

    snapshot: Mapping[str, Any] | None = None
    ssh_secret: bool = False
    pod_group: bool = False
    jobset: Mapping[str, Any] | None = None
    """The JobSet as the API server answered this operator's last apply of it, until the cache holds that
    version: a reconcile woken before the watch brings it would otherwise plan a JobSet anew, and apply the
    runtime's ``volumeClaimPolicies`` over the ones JobSet stored with its defaults, which it refuses as
    immutable (Trainer does, and records the refusal)."""


@dataclass(frozen=True)
class TrainJobStores:
    trainjobs: Store
    jobsets: Store
    runtimes: Store
    """Namespaced TrainingRuntimes."""
    cluster_runtimes: Store


@dataclass
class TrainJobController:
    stores: TrainJobStores
    http: HttpApi
    """Reads and writes (fenced by the Lease when leader election is on)."""
    events: EventRecorder
    metrics: OperatorMetrics
    threads: int = 1
    status: StatusInjection | None = None
    """Where trainer pods report their progress; None: the status endpoint is off."""
    ca: CaPublisher | None = None
    """Publishes the endpoint's CA in the namespaces the trainer pods read it from."""
    queue: WorkQueue[str] = field(default_factory=WorkQueue)
    _known: dict[str, _Known] = field(default_factory=dict)

    kind = KIND

    @property
    def jobs(self) -> Store:
        return self.stores.trainjobs

    # --- event handlers -------------------------------------------------------------------------

    def on_trainjob_change(self, change: ObjectChange) -> None:
        if change.type is ChangeType.DELETED:
            self._known.pop(str((change.object.get("metadata") or {}).get("uid")), None)
        self.queue.add(object_key(change.object))

    def on_owned_change(self, change: ObjectChange) -> None:
        """A JobSet (or another child) of a TrainJob changed: look at its TrainJob again."""
        metadata = change.object.get("metadata") or {}
        if change.type is ChangeType.DELETED and (
            known := self._known.get(controller_uid(change.object) or "")
        ):
            known.jobset = None
        for reference in metadata.get("ownerReferences") or ():
            if reference.get("controller") and reference.get("kind") == KIND:
                self.queue.add(f"{metadata.get('namespace')}/{reference.get('name')}")

    def enqueue_all(self) -> None:
        for trainjob in self.stores.trainjobs:
            self.queue.add(object_key(trainjob))

    # --- workers --------------------------------------------------------------------------------

    async def run_workers(self) -> None:
        await run_workers(self.queue, self.reconcile, self._failed, self.threads)

    def _failed(self, key: str, error: Exception, retry_in: float) -> None:
        self.metrics.reconcile_errors.labels(kind=KIND).inc()
        _log_outcome(key, "error", error=str(error), retry_in=round(retry_in, 3))

    async def reconcile(self, key: str) -> float | None:
        started = time.monotonic()
        stored = self.stores.trainjobs.get(key)
        if stored is None or (stored.get("metadata") or {}).get("deletionTimestamp"):
            return None
        try:
            trainjob = TrainJob.model_validate(stored)
        except ValueError as error:
            _log_outcome(key, "unreadable", error=str(error))
            return None
        uid = str(trainjob.metadata.uid or "")
        known = self._known.setdefault(uid, _Known())
        runtime = self._runtime(trainjob)
        jobset = _latest(self.stores.jobsets.get(key), known)
        if jobset is not None and controller_uid(jobset) != uid:
            jobset = None  # someone else's JobSet of that name: never touched
        if known.snapshot is None:
            path = object_path("v1", "ConfigMap", trainjob.namespace, snapshot_name(trainjob.name))
            known.snapshot = await self._get(path)
        await self._learn_companions(trainjob, runtime, known)
        observation = TrainJobObservation(
            runtime=runtime,
            snapshot=known.snapshot,
            jobset=jobset,
            pod_group=known.pod_group,
            ssh_secret=known.ssh_secret,
        )
        decision = reconcile_trainjob(trainjob, observation, datetime.now(UTC))

        applied, refused = 0, None
        try:
            if decision.apply and self.ca is not None:
                # Before the JobSet: its trainer pods mount the namespace's CA ConfigMap.
                await self.ca.ensure(trainjob.namespace)
            for obj in decision.apply:
                await self._apply(obj, known)
                applied += 1
        except ApiStatusError as error:
            # Said on the TrainJob (as a failed plan is), then retried: a missing JobSet CRD, a quota.
            refused = error
            # In the API server's words, as Trainer quotes them (client-go's error is the status message).
            detail = error.message or str(error)
            message = f"TrainJob resources reconciliation failed: {detail[:MAX_EVENT_DETAIL]}"
            if len(detail) > MAX_EVENT_DETAIL:
                message += " ..."
            self.events.record(
                EventRecord(stored, "Warning", RESOURCES_CREATION_FAILED_REASON, message, EVENT_COMPONENT)
            )
        if decision.delete_jobset:
            known.jobset = None
            await self._delete(object_path(JOBSET_API, "JobSet", trainjob.namespace, trainjob.name))
        for event in decision.events:
            self.events.record(
                EventRecord(stored, str(event.type), event.reason, event.message, EVENT_COMPONENT)
            )
        written = await self._write_status(stored, trainjob, decision.status)
        elapsed = time.monotonic() - started
        self.metrics.reconcile_seconds.labels(kind=KIND).observe(elapsed)
        conditions = decision.status.conditions or []
        _log_outcome(
            key,
            "reconciled",
            state=conditions[-1].type if conditions else "",
            applied=applied,
            status_written=written,
            duration_ms=round(elapsed * 1000, 1),
        )
        if refused is not None:
            raise refused
        if decision.retry is not None:
            raise TrainJobRetryError(decision.retry)
        return decision.requeue_after

    def _runtime(self, trainjob: TrainJob) -> Mapping[str, Any] | None:
        _, kind = runtime_key(trainjob)
        name = trainjob.spec.runtime_ref.name
        if kind == CLUSTER_TRAINING_RUNTIME:
            return self.stores.cluster_runtimes.get_named(None, name)
        return self.stores.runtimes.get_named(trainjob.namespace, name)

    async def _learn_companions(
        self, trainjob: TrainJob, runtime: Mapping[str, Any] | None, known: _Known
    ) -> None:
        """Whether the SSH Secret and the PodGroup exist, asked once each (they are made once)."""
        spec = (runtime or {}).get("spec") or {}
        if (spec.get("mlPolicy") or {}).get("mpi") is not None and not known.ssh_secret:
            path = object_path("v1", "Secret", trainjob.namespace, ssh_secret_name(trainjob.name))
            known.ssh_secret = await self._exists(path)
        group_policy = spec.get("podGroupPolicy") or {}
        if group_policy and not known.pod_group:
            api = VOLCANO_API if "volcano" in group_policy else SCHEDULER_PLUGINS_API
            known.pod_group = await self._exists(
                object_path(api, "PodGroup", trainjob.namespace, trainjob.name)
            )

    async def install_builtin_runtimes(self) -> None:
        """Create each of Trainer's built-in ClusterTrainingRuntimes the cache does not hold (once, as this
        replica starts leading: one edited or deleted afterwards is the cluster's choice, left so)."""
        collection = f"/apis/{API_VERSION}/clustertrainingruntimes"
        for document in builtin_runtime_documents():
            name = str(document["metadata"]["name"])
            if self.stores.cluster_runtimes.get_named(None, name) is not None:
                continue
            response = await self.http.post(collection, json=document)
            if response.status_code == 409:
                continue
            try:
                raise_for_status(response, response.content)
            except ApiStatusError as error:
                log.warning("the built-in ClusterTrainingRuntime %s could not be created: %s", name, error)
                continue
            log.info("created the built-in ClusterTrainingRuntime %s", name)

    async def _get(self, path: str) -> dict[str, Any] | None:
        response = await self.http.get(path)
        if response.status_code == 404:
            return None
        raise_for_status(response, response.content)
        found: dict[str, Any] = response.json()
        return found

    async def _exists(self, path: str) -> bool:
        return await self._get(path) is not None

    async def _apply(self, obj: Mapping[str, Any], known: _Known) -> None:
        """Server-side apply as Trainer does (``trainer``, forced); an SSH Secret gets its keys here."""
        body = ssh.with_keys(obj) if ssh.needs_keys(obj) else dict(obj)
        if body["kind"] == JOBSET_KIND and self.status is not None:
            body = with_status_reporting(body, self.status)
        metadata = body["metadata"]
        path = object_path(body["apiVersion"], body["kind"], metadata["namespace"], metadata["name"])
        response = await self.http.patch(
            f"{path}?fieldManager={FIELD_OWNER}&force=true",
            content=json.dumps(body),
            headers={"Content-Type": "application/apply-patch+yaml"},
        )
        raise_for_status(response, response.content)
        if body["kind"] == "Secret":
            known.ssh_secret = True
        elif body["kind"] == "PodGroup":
            known.pod_group = True
        elif metadata["name"].endswith("-runtime-snapshot"):
            known.snapshot = strip_managed_fields(response.json())
        elif body["kind"] == JOBSET_KIND:
            known.jobset = strip_managed_fields(response.json())

    async def _delete(self, path: str) -> None:
        response = await self.http.request("DELETE", path, json={"propagationPolicy": "Background"})
        if response.status_code != 404:
            raise_for_status(response, response.content)

    async def _write_status(self, stored: KubeObject, trainjob: TrainJob, status: TrainJobStatus) -> bool:
        old = TrainJobStatus.model_validate(stored.get("status") or {}).to_wire()
        new = status.to_wire()
        if old == new:
            return False
        patch = {"status": {**{k: None for k in old if k not in new}, **new}}
        response = await self.http.patch(
            trainjob_path(trainjob.namespace, trainjob.name) + "/status",
            json=patch,
            headers={"Content-Type": "application/merge-patch+json"},
        )
        try:
            raise_for_status(response, response.content)
        except ApiStatusError as error:
            self.metrics.api_errors.labels(verb="patch", code=str(error.code)).inc()
            raise
        self.stores.trainjobs.apply_written(strip_managed_fields(response.json()))
        return True


class TrainJobRetryError(Exception):
    """The TrainJob could not be planned now (its runtime is missing, ...): retried with backoff."""


def _log_outcome(key: str, outcome: str, **fields: Any) -> None:
    record = {
        "kind": KIND,
        "job": key,
        "outcome": outcome,
        **{k: v for k, v in fields.items() if v is not None},
    }
    outcomes.info(outcome, extra={"fields": record})


def with_status_reporting(jobset: Mapping[str, Any], status: StatusInjection) -> dict[str, Any]:
    """The JobSet with the progress variables and token volume in its trainer pods, where Trainer's
    TrainJobStatus plugin puts them (their CA from the namespace's ConfigMap, as every kind's:
    docs/progress.md)."""
    body = copy.deepcopy(dict(jobset))
    metadata = body["metadata"]
    for job in body["spec"].get("replicatedJobs") or []:
        if ancestor_of(job) == ANCESTOR_TRAINER:
            inject_status_reporting(
                pod_spec_of(job),
                status,
                api_version=API_VERSION,
                namespace=metadata["namespace"],
                plural=TrainJob.PLURAL,
                name=metadata["name"],
            )
    return body
