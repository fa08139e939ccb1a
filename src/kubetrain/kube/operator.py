"""The operator process: caches for every enabled kind and its children, controllers, leader election,
metrics and health endpoints, and a clean shutdown.

Caches fill whether or not this process leads, so a standby takes over with a warm cache; only the leader's
workers reconcile. Losing the Lease stops this process (as controller-runtime does): a follower that still
acted could fight the new leader. Every write the leader's work makes (children, statuses, deletions,
Events, the CA ConfigMaps) goes through a session fenced by ``LeaderElector.holds_lease``, so a replica
paused past its renew deadline (SIGSTOP, a frozen VM) sends none of the writes it had queued when it
resumes, in the moment before its renew loop notices and stops it. The Lease's own requests and the status
endpoint's (every replica relays its pods' progress reports, by design) are not fenced.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from lightkube.core.resource import NamespacedResource
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.resources.autoscaling_v2 import HorizontalPodAutoscaler
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import Node, Pod, Service

from kubetrain.api.progress import TRAINJOB_REPORT_LIMITS, StatusRoute
from kubetrain.api.trainer import GROUP as TRAINER_GROUP
from kubetrain.api.trainer import VERSION as TRAINER_VERSION
from kubetrain.engine.types import ReplicaLimits, Traits
from kubetrain.frameworks.addressing import ClusterAddressing
from kubetrain.frameworks.base import Framework
from kubetrain.frameworks.labels import OPERATOR_NAME_LABEL
from kubetrain.frameworks.trainer.jobset import JOBSET_API, JOBSET_KIND
from kubetrain.kube.act import Actor, pod_group_collection
from kubetrain.kube.batch_jobs import batch_job_template
from kubetrain.kube.compact import POD_KEPT, SERVICE_KEPT, compact_batch_job, compact_node, compact_object
from kubetrain.kube.controller import ChildStores, JobController, child_routing
from kubetrain.kube.events import EventRecorder
from kubetrain.kube.failures import FailureKeeper
from kubetrain.kube.health import check_route, metrics_route, serve_http
from kubetrain.kube.metrics import OperatorMetrics
from kubetrain.kube.observe import observe_node
from kubetrain.kube.previous_logs import PreviousLogs
from kubetrain.kube.render import SCHEDULER_PLUGINS_GROUP, VOLCANO_GROUP, RenderSettings
from kubetrain.kube.replicas import availability_warning, declared_replicas
from kubetrain.kube.runtime import collector
from kubetrain.kube.runtime.client import KubeClient, collection_path
from kubetrain.kube.runtime.expectations import Expectations
from kubetrain.kube.runtime.informer import Informer, wait_for_sync
from kubetrain.kube.runtime.leader import ApiLeaseLock, ElectionSettings, LeaderElector, default_identity
from kubetrain.kube.runtime.lifecycle import Outcome, run_while_leading
from kubetrain.kube.runtime.reflector import resync_periodically
from kubetrain.kube.runtime.store import ObjectChange, Store
from kubetrain.kube.runtime.wire import KeptFields
from kubetrain.kube.status.authenticator import BATCH_JOB_OWNER, JobCaches
from kubetrain.kube.status.ca_bundle import CaPublisher
from kubetrain.kube.status.endpoint import StatusEndpoint
from kubetrain.kube.status.injection import StatusInjection
from kubetrain.kube.status.settings import StatusServerSettings
from kubetrain.kube.trainjobs import TrainJobController, TrainJobStores

log = logging.getLogger(__name__)

DEFAULT_LEASE_NAME = "1ca428e5.training-operator.kubeflow.org"
EXIT_LOST_LEASE = 1
CACHE_SYNC_TIMEOUT = 120.0


@dataclass(frozen=True)
class OperatorSettings:
    frameworks: Sequence[Framework[Any]]
    frameworks_required: bool = False
    """The user named the kinds (``--enable-scheme``): a missing CRD is an error, not a skipped kind."""
    namespace: str | None = None
    render: RenderSettings = field(default_factory=RenderSettings)
    threads: int = 1
    leader_elect: bool = False
    lease_namespace: str = "kubeflow"
    lease_name: str = DEFAULT_LEASE_NAME
    election: ElectionSettings = field(default_factory=ElectionSettings)
    resync_period: float = 300.0
    metrics_address: tuple[str, int] | None = None
    health_address: tuple[str, int] | None = None
    identity: str = field(default_factory=default_identity)
    cluster_domain: str | None = None
    """Suffix of the service names in TF_CONFIG and hostfiles (upstream's ``CUSTOM_CLUSTER_DOMAIN``)."""
    limits: ReplicaLimits = field(default_factory=ReplicaLimits)
    """Replicas one job may ask for (``--max-replicas-per-type``, ``--max-replicas-per-job``)."""
    gc_young_threshold: int = 0
    """Tune the process's garbage collector (``runtime.collector``); 0 leaves it as the host process set it
    (an operator embedded in a test or another program does not own the collector)."""
    status: StatusServerSettings | None = None
    """The status endpoint; None turns it off (and ``render.status`` must then be None too)."""
    trainer_api: bool = True
    """Serve Kubeflow Trainer v2's TrainJob (``trainer.kubeflow.org/v1alpha1``) beside the v1 kinds."""
    install_builtin_runtimes: bool = False
    """Create Trainer's built-in ClusterTrainingRuntimes that are missing, as this replica starts leading."""
    pod: tuple[str, str] | None = None
    """This replica's pod, ``(namespace, name)``, where it runs in one (a lone replica then says what it gives
    up)."""


class MissingCrdError(Exception):
    """An enabled kind's CRD is not served by the API server (install the CRDs first)."""


def job_resource(framework: Framework[Any]) -> type[NamespacedResource]:
    group, version = framework.api_version.split("/", 1)
    return create_namespaced_resource(group, version, framework.kind, framework.model.PLURAL)


TrainJobResource = create_namespaced_resource(TRAINER_GROUP, TRAINER_VERSION, "TrainJob", "trainjobs")
TrainingRuntimeResource = create_namespaced_resource(
    TRAINER_GROUP, TRAINER_VERSION, "TrainingRuntime", "trainingruntimes"
)
ClusterTrainingRuntimeResource = create_global_resource(
    TRAINER_GROUP, TRAINER_VERSION, "ClusterTrainingRuntime", "clustertrainingruntimes"
)
JobSetResource = create_namespaced_resource("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets")
TRAINJOB_ROUTE = StatusRoute(TRAINER_GROUP, TRAINER_VERSION, "trainjobs", TRAINJOB_REPORT_LIMITS)


def pod_group_resource(settings: RenderSettings) -> type[NamespacedResource]:
    if settings.is_volcano:
        return create_namespaced_resource(VOLCANO_GROUP, "v1beta1", "PodGroup", "podgroups")
    return create_namespaced_resource(SCHEDULER_PLUGINS_GROUP, "v1alpha1", "PodGroup", "podgroups")


class Operator:
    def __init__(self, client: KubeClient, settings: OperatorSettings) -> None:
        self.client = client
        self.settings = settings
        self.metrics = OperatorMetrics()
        self.expectations = Expectations()
        self.elector: LeaderElector | None = None
        writes, event_writes = client.http, client.events
        if settings.leader_elect:
            lock = ApiLeaseLock(client.http, settings.lease_namespace, settings.lease_name)
            self.elector = LeaderElector(lock, settings.identity, settings=settings.election)
            writes = client.http.fenced(self.elector.holds_lease)
            event_writes = client.events.fenced(self.elector.holds_lease)
        self.writes = writes
        """What the leader's work writes through: fenced by the Lease when leader election is on."""
        self.events = EventRecorder(event_writes, busy=self._busy)
        self.actor: Actor | None = None
        self.previous_logs: PreviousLogs | None = None
        self.failures: FailureKeeper | None = None
        """Keeps each job's first failure (``<job>-failure``)."""
        self.informers: list[Informer] = []
        self.controllers: list[JobController] = []
        self.trainjobs: TrainJobController | None = None
        """Kubeflow Trainer v2's TrainJobs, when served and enabled."""
        self.ca: CaPublisher | None = CaPublisher(writes) if settings.status is not None else None
        self.status_endpoint: StatusEndpoint | None = None

    def _busy(self) -> bool:
        """A job key is ready for a worker or a reconcile's calls are under way: events wait (they are
        best-effort, reconciles are not)."""
        pending = self.actor is not None and self.actor.writes_pending > 0
        return pending or any(len(controller.queue) for controller in self._all_controllers())

    def _all_controllers(self) -> list[JobController | TrainJobController]:
        return [*self.controllers, *([self.trainjobs] if self.trainjobs is not None else [])]

    # --- wiring ---------------------------------------------------------------------------------

    async def _served(self, path: str) -> bool:
        response = await self.client.http.get(path, params={"limit": 1})
        return response.status_code < 400

    def _informer(
        self,
        resource: type[Any],
        selector: str | None = None,
        transform: Callable[[dict[str, Any]], dict[str, Any]] = compact_object,
        kept: KeptFields[Any] | None = None,
    ) -> Informer:
        informer = Informer(
            self.client.http,
            resource,
            namespace=self.settings.namespace,
            label_selector=selector,
            transform=transform,
            kept=kept,
        )
        self.informers.append(informer)
        return informer

    async def build(self) -> None:
        settings = self.settings
        # "label exists": the caches hold the operator's children, not every pod of the cluster.
        # Compacted on the way in, what is dropped never decoded: thousands of finished jobs' pods stay
        # cached (kube.compact).
        pods = self._informer(Pod, OPERATOR_NAME_LABEL, kept=POD_KEPT)
        services = self._informer(Service, OPERATOR_NAME_LABEL, kept=SERVICE_KEPT)
        pod_groups: Informer | None = None
        if settings.render.gang_scheduler:
            if await self._served(pod_group_collection(settings.render, settings.namespace or "default")):
                pod_groups = self._informer(pod_group_resource(settings.render))
            else:
                log.error("PodGroup API not served: crd might be missing, please install crd")
        autoscalers: Informer | None = None
        if any(f.scale_replica_type for f in settings.frameworks):
            if await self._served(collection_path(HorizontalPodAutoscaler, settings.namespace)):
                # Unlabelled, as upstream makes them: all of them, few in any cluster.
                autoscalers = self._informer(HorizontalPodAutoscaler)
            else:
                log.warning("autoscaling/v2 is not served: elastic PyTorch jobs get no HPA")
        batch_jobs: Informer | None = None
        if settings.trainer_api or any(_runs_batch_jobs(f) for f in settings.frameworks):
            # Unselected, as the mpi-operator watches them: its launcher Job is labelled only `app: <job>`
            # (kubetrain's too, since it makes the same Job), so the store keeps them by owner; others are
            # cached as their identity only (kube.compact). A TrainJob's pods report through its JobSet's
            # Jobs: the status endpoint walks pod, Job, JobSet, TrainJob.
            batch_jobs = self._informer(Job, transform=compact_batch_job)
        nodes: Informer | None = None
        if await self._served(collection_path(Node, None)):
            # Cluster-scoped, unselected (a cluster has few nodes), compacted to what losing one takes.
            nodes = Informer(self.client.http, Node, transform=compact_node)
            self.informers.append(nodes)
        else:
            log.warning("nodes cannot be listed: lost nodes go undiagnosed and node-loss timeouts unused")
        children = ChildStores(
            pods.store,
            services.store,
            pod_groups.store if pod_groups else None,
            autoscalers.store if autoscalers else None,
            batch_jobs.store if batch_jobs else None,
            nodes.store if nodes else None,
        )
        addressing = ClusterAddressing(cluster_domain=settings.cluster_domain)
        previous_logs = self.previous_logs = PreviousLogs(self.client.http)
        failures = self.failures = FailureKeeper(self.client.http, self.writes, self.events)
        actor = self.actor = Actor(
            self.writes,
            self.expectations,
            self.events,
            self.metrics,
            settings.render,
            addressing,
            companion_recheck_period=settings.resync_period,
            ca=self.ca,
        )
        traits = Traits(
            colocated=False,
            gang_scheduler=settings.render.gang_scheduler,
            batch_jobs=True,
            limits=settings.limits,
        )

        for framework in settings.frameworks:
            resource = job_resource(framework)
            if not await self._served(collection_path(resource, settings.namespace)):
                message = f"{framework.kind} ({framework.api_version}) is not served: install its CRD"
                if settings.frameworks_required:
                    raise MissingCrdError(f"{message} or drop it from --enable-scheme")
                log.warning("%s; skipping it", message)
                continue
            jobs = self._informer(resource)
            controller = JobController(
                framework,
                jobs.store,
                children,
                actor,
                self.expectations,
                self.metrics,
                traits,
                settings.threads,
                addressing,
                previous_logs,
                failures,
            )
            jobs.add_handler(controller.on_job_change)
            self.controllers.append(controller)
        if settings.trainer_api:
            await self._build_trainjobs(settings.render.status)
        by_name = {c.framework.controller_name: c for c in self.controllers}
        pods.add_handler(lambda change: _route_child(change, "pods", by_name))
        services.add_handler(lambda change: _route_child(change, "services", by_name))
        if batch_jobs is not None:
            # A batch Job stands for its replica's pod: its events settle that pod's expectations.
            batch_jobs.add_handler(lambda change: _route_batch_job(change, by_name))
        if nodes is not None:
            nodes.add_handler(lambda change: _route_node(change, pods.store, by_name))
        if pod_groups is not None:
            pod_groups.add_handler(lambda change: _route_owned(change, self.controllers))
        if autoscalers is not None:
            autoscalers.add_handler(lambda change: _route_owned(change, self.controllers))
        if settings.status is not None and self.ca is not None:
            routes = {
                StatusRoute.of(c.framework.api_version, c.framework.model.PLURAL): c.jobs
                for c in self.controllers
            }
            owners = {BATCH_JOB_OWNER: batch_jobs.store} if batch_jobs is not None else {}
            if self.trainjobs is not None:
                routes[TRAINJOB_ROUTE] = self.trainjobs.jobs
                owners[(JOBSET_API, JOBSET_KIND)] = self.trainjobs.stores.jobsets
            caches = JobCaches(
                routes,
                pods.store,
                owners,
                synced=lambda: all(informer.has_synced.is_set() for informer in self.informers),
            )
            self.status_endpoint = StatusEndpoint(
                settings.status, self.client.http, caches, on_bundle=self.ca.set_bundle
            )

    async def _build_trainjobs(self, status: StatusInjection | None) -> None:
        """Trainer v2's TrainJob controller, with caches of TrainJobs, their runtimes and their JobSets."""
        namespace = self.settings.namespace
        if not await self._served(collection_path(TrainJobResource, namespace)):
            message = "TrainJob (trainer.kubeflow.org/v1alpha1) is not served: install its CRD"
            if self.settings.frameworks_required:
                raise MissingCrdError(f"{message} or drop trainjob from --enable-scheme")
            log.warning("%s; skipping it", message)
            return
        trainjobs = self._informer(TrainJobResource)
        jobsets: Informer | None = None
        if await self._served(collection_path(JobSetResource, namespace)):
            jobsets = self._informer(JobSetResource)
        else:
            # TrainJobs are still reconciled: each says, in a Warning event, what applying its JobSet met.
            log.error("JobSet CRDs must be installed in advance: TrainJobs run as JobSets (jobset.x-k8s.io)")
        runtimes = self._informer(TrainingRuntimeResource)
        cluster_runtimes = Informer(self.client.http, ClusterTrainingRuntimeResource)
        self.informers.append(cluster_runtimes)
        controller = self.trainjobs = TrainJobController(
            TrainJobStores(
                trainjobs.store, jobsets.store if jobsets else Store(), runtimes.store, cluster_runtimes.store
            ),
            self.writes,
            self.events,
            self.metrics,
            threads=self.settings.threads,
            status=status,
            ca=self.ca,
        )
        trainjobs.add_handler(controller.on_trainjob_change)
        if jobsets is not None:
            jobsets.add_handler(controller.on_owned_change)

    # --- running --------------------------------------------------------------------------------

    def _ready(self) -> str | None:
        waiting = [i.kind for i in self.informers if not i.has_synced.is_set()]
        if waiting:
            return f"caches not synced: {', '.join(waiting)}"
        return self.status_endpoint.failure if self.status_endpoint is not None else None

    def _refresh_gauges(self) -> None:
        self.metrics.events_posted.set(self.events.sent)
        self.metrics.events_queued.set(self.events.queued)
        self.metrics.events_folded.set(self.events.folded)
        for method, count in self.client.requests.by_method.items():
            self.metrics.api_requests.labels(method=method).set(count)
        for informer in self.informers:
            for reason, count in informer.reflector.restarts.items():
                self.metrics.watch_restarts.labels(resource=informer.reflector.name, reason=reason).set(count)
        for controller in self._all_controllers():
            self.metrics.queue_depth.labels(kind=controller.kind).set(len(controller.queue))
        if self.status_endpoint is not None:
            self._refresh_status_gauges(self.status_endpoint)

    def _refresh_status_gauges(self, endpoint: StatusEndpoint) -> None:
        """The endpoint's counts (its thread writes them; a copy of a dict is taken whole, under the GIL)."""
        metrics = self.metrics
        for code, count in dict(endpoint.counts.by_code).items():
            metrics.status_requests.labels(code=str(code)).set(count)
        for method, count in dict(endpoint.requests.by_method).items():
            metrics.status_api_requests.labels(method=method).set(count)
        if endpoint.writer is not None:
            metrics.status_reports_coalesced.set(endpoint.writer.counts.coalesced)
            for result, count in dict(endpoint.writer.counts.by_result).items():
                metrics.status_writes.labels(result=result).set(count)
        if endpoint.authenticator is not None:
            reviews = endpoint.authenticator.counts
            metrics.status_token_reviews.labels(outcome="reviewed").set(reviews.reviews)
            metrics.status_token_reviews.labels(outcome="cached").set(reviews.cache_hits)
            metrics.status_token_reviews.labels(outcome="throttled").set(reviews.throttled)
        if endpoint.history is not None:
            metrics.status_history_writes.set(endpoint.history.counts.written)
        if endpoint.keeper is not None:
            metrics.status_certificate_reloads.set(endpoint.keeper.reloads)
        if endpoint.listener is not None:
            connections = endpoint.listener.refresh_counts()
            metrics.status_connections.labels(state="open").set(connections.open)
            metrics.status_connections.labels(state="accepted").set(connections.accepted)
            metrics.status_connections.labels(state="refused").set(connections.refused)

    async def _serve_endpoints(self) -> list[asyncio.Server]:
        servers = []
        if self.settings.metrics_address:
            host, port = self.settings.metrics_address
            routes = {"/metrics": metrics_route(self.metrics.registry, self._refresh_gauges)}
            servers.append(await serve_http(host, port, routes))
        if self.settings.health_address:
            host, port = self.settings.health_address
            routes = {"/healthz": check_route(lambda: None), "/readyz": check_route(self._ready)}
            servers.append(await serve_http(host, port, routes))
        return servers

    async def _reconcile_all(self) -> None:
        """The leader's work: every controller's workers and its periodic resync."""
        self.metrics.is_leader.set(1)
        try:
            if self.trainjobs is not None and self.settings.install_builtin_runtimes:
                await self.trainjobs.install_builtin_runtimes()
            work = []
            for controller in self._all_controllers():
                controller.enqueue_all()
                work.append(controller.run_workers())
                work.append(resync_periodically(self.settings.resync_period, controller.enqueue_all))
            if self.ca is not None:
                work.append(self.ca.follow(self._job_namespaces))
            await asyncio.gather(*work)
        finally:
            # While the Lease is still held: run_while_leading releases it only after this work has ended,
            # and the fence drops whatever a replica that lost it still had queued.
            await self.events.flush()
            self.metrics.is_leader.set(0)

    def _job_namespaces(self) -> set[str]:
        return {
            str((job.get("metadata") or {}).get("namespace"))
            for c in self._all_controllers()
            for job in c.jobs
        }

    async def _sync_caches(self) -> None:
        """Wait for every informer's first list; with the collector tuned, freeze what survived (the caches).

        The collector stays paused from the first list until the freeze (each reflector pauses it while it
        lists, ``collector.paused``): the freeze's full collection is then the only walk of the filled
        caches, where the first collection after the lists and the freeze's would each walk all of them."""
        if not self.settings.gc_young_threshold:
            await wait_for_sync(self.informers, CACHE_SYNC_TIMEOUT)
            return
        with collector.paused():
            await wait_for_sync(self.informers, CACHE_SYNC_TIMEOUT)
            collector.freeze_survivors()

    async def run(self, stop: asyncio.Event) -> int:
        """Run until ``stop`` is set (0) or the Lease is lost (1)."""
        if self.settings.gc_young_threshold:
            collector.tune(self.settings.gc_young_threshold)
        await self.build()
        servers = await self._serve_endpoints()
        self.events.start()
        caches = [asyncio.ensure_future(informer.run()) for informer in self.informers]
        self.metrics.gc_pauses.install()
        try:
            if self.status_endpoint is not None:
                # Before any reconcile: the CA must be known when the first pods are created.
                await self.status_endpoint.start()
            synced = asyncio.ensure_future(self._sync_caches())
            stopping = asyncio.ensure_future(stop.wait())
            await asyncio.wait({synced, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if stop.is_set():
                synced.cancel()
                return 0
            synced.result()
            log.info("caches synced: %s", ", ".join(f"{i.kind}={len(i.store)}" for i in self.informers))
            await self._say_what_a_lone_replica_gives_up()
            if self.elector is None:
                await run_until_stopped(self._reconcile_all(), stop)
                return 0
            lease = f"{self.settings.lease_namespace}/{self.settings.lease_name}"
            log.info("%s: campaigning for the leader Lease %s", self.elector.identity, lease)
            outcome = await run_while_leading(self.elector, self._reconcile_all, stop)
            if outcome is Outcome.LOST_LEADERSHIP:
                log.error("lost the leader Lease; stopping so that the new leader acts alone")
                return EXIT_LOST_LEASE
            return 0
        finally:
            self.metrics.gc_pauses.remove()
            for task in caches:
                task.cancel()
            await asyncio.gather(*caches, return_exceptions=True)
            if self.previous_logs is not None:
                await self.previous_logs.close()
            if self.status_endpoint is not None:
                await self.status_endpoint.stop()
            await self.events.flush()
            await self.events.stop()
            for server in servers:
                server.close()
                with contextlib.suppress(Exception):
                    await server.wait_closed()

    async def _say_what_a_lone_replica_gives_up(self) -> None:
        if self.settings.pod is None:
            return
        try:
            declared = await declared_replicas(self.client.http, *self.settings.pod)
        except Exception as error:  # a log line is never worth stopping for
            log.debug("could not read the Deployment that runs this replica: %s", error)
            return
        warning = availability_warning(self.settings.leader_elect, declared)
        if warning is not None:
            log.warning("%s", warning)
        elif declared is not None:
            replicas = (declared.deployment, declared.replicas)
            log.info("Deployment %s runs %d replicas: one leads, the others stand by", *replicas)


async def run_until_stopped(work: Coroutine[Any, Any, None], stop: asyncio.Event) -> None:
    task = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, stopping):
            pending.cancel()
        await asyncio.gather(task, stopping, return_exceptions=True)
    if not task.cancelled() and (error := task.exception()) is not None:
        raise error


def _runs_batch_jobs(framework: Framework[Any]) -> bool:
    """Whether the framework runs any replica as a batch/v1 Job (it overrides ``runs_as_batch_job``)."""
    return type(framework).runs_as_batch_job is not Framework.runs_as_batch_job


def _route_child(change: ObjectChange, resource: str, by_name: dict[str, JobController]) -> None:
    routed = child_routing(change.object, by_name)
    if routed is not None:
        controller, job_name, replica_type = routed
        controller.on_child_change(change, resource, job_name, replica_type)


def _route_batch_job(change: ObjectChange, by_name: dict[str, JobController]) -> None:
    """A batch Job belongs where its pod template's labels say (a Job of no training job is ignored)."""
    routed = child_routing(batch_job_template(change.object), by_name)
    if routed is not None:
        controller, job_name, replica_type = routed
        controller.on_child_change(change, "pods", job_name, replica_type)


def _route_node(change: ObjectChange, pods: Store, by_name: dict[str, JobController]) -> None:
    """A node became lost or came back (its Ready condition or out-of-service taint changed): the jobs with
    pods on it are looked at again, so their NodeLost diagnosis appears (or goes) at once."""
    new = observe_node(change.object)
    if change.old is not None and change.new is not None:
        old = observe_node(change.old)
        if (old.ready, old.out_of_service) == (new.ready, new.out_of_service):
            return
    name = new.name
    for pod in pods:
        if (pod.get("spec") or {}).get("nodeName") != name:
            continue
        routed = child_routing(pod, by_name)
        if routed is None:
            continue
        controller, job_name, replica_type = routed
        if new.lost:
            controller.on_node_lost(pod, job_name, replica_type)
        else:
            controller.queue.add(f"{(pod.get('metadata') or {}).get('namespace')}/{job_name}")


def _route_owned(change: ObjectChange, controllers: list[JobController]) -> None:
    """A PodGroup or HPA is named after its job; its controller ownerReference says which kind."""
    metadata = change.object.get("metadata") or {}
    for reference in metadata.get("ownerReferences") or ():
        if not reference.get("controller"):
            continue
        for controller in controllers:
            if (
                reference.get("kind") == controller.kind
                and reference.get("apiVersion") == controller.framework.api_version
            ):
                controller.queue.add(f"{metadata.get('namespace')}/{metadata.get('name')}")
