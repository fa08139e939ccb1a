"""The operator's Prometheus metrics: upstream's job counters plus the runtime's health signals.

Upstream names and labels (§6.2) so existing dashboards and alerts keep working; the rest is ours.
Each operator gets its own registry, so tests can run several in one process.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, GCCollector, Histogram, ProcessCollector

from kubetrain.kube.runtime.collector import PauseRecorder

_JOB_LABELS = ("job_namespace", "framework")


def _job_counter(registry: CollectorRegistry, name: str, what: str) -> Counter:
    return Counter(f"training_operator_jobs_{name}", what, _JOB_LABELS, registry=registry)


@dataclass
class OperatorMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.jobs_created = _job_counter(r, "created", "Jobs seen for the first time")
        self.jobs_deleted = _job_counter(r, "deleted", "Jobs deleted by the operator (TTL)")
        self.jobs_successful = _job_counter(r, "successful", "Jobs that succeeded")
        self.jobs_failed = _job_counter(r, "failed", "Jobs that failed")
        self.jobs_restarted = _job_counter(r, "restarted", "Job restarts (a replica restarted)")
        self.reconcile_seconds = Histogram(
            "kubetrain_reconcile_duration_seconds",
            "Time to reconcile one job key, observation to last API call",
            ("kind",),
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
        )
        self.reconcile_errors = Counter(
            "kubetrain_reconcile_errors", "Reconciles that failed and were retried", ("kind",), registry=r
        )
        self.queue_depth = Gauge(
            "kubetrain_work_queue_depth", "Job keys ready to reconcile", ("kind",), registry=r
        )
        self.api_errors = Counter(
            "kubetrain_api_errors",
            "API calls the server refused or that failed",
            ("verb", "code"),
            registry=r,
        )
        self.api_requests = Gauge(
            "kubetrain_api_requests", "API requests sent since start, by HTTP method", ("method",), registry=r
        )
        self.watch_restarts = Gauge(
            "kubetrain_watch_restarts",
            "Watch restarts since start, by watched kind and reason",
            ("resource", "reason"),
            registry=r,
        )
        self.events_posted = Gauge(
            "kubetrain_events_posted", "Kubernetes Events posted since start", registry=r
        )
        self.events_folded = Gauge(
            "kubetrain_events_folded",
            "Repeats of a recent Event that raised its count instead of posting a new one",
            registry=r,
        )
        self.events_queued = Gauge(
            "kubetrain_events_queued", "Kubernetes Events recorded and not yet posted", registry=r
        )
        self.is_leader = Gauge("kubetrain_leader", "1 while this process holds the leader Lease", registry=r)
        # The status endpoint (counts since start; absent while it is off).
        self.status_requests = Gauge(
            "kubetrain_status_requests",
            "Reports the status endpoint answered, by HTTP code",
            ("code",),
            registry=r,
        )
        self.status_reports_coalesced = Gauge(
            "kubetrain_status_reports_coalesced",
            "Accepted reports replaced by a later one of the same job before they were written",
            registry=r,
        )
        self.status_writes = Gauge(
            "kubetrain_status_writes",
            "Status writes of trainerStatus, by result (written, older, job_gone, failed, not_reconciled)",
            ("result",),
            registry=r,
        )
        self.status_token_reviews = Gauge(
            "kubetrain_status_token_reviews",
            "Tokens checked: reviewed by the API server, answered from the cache, or refused (review rate)",
            ("outcome",),
            registry=r,
        )
        self.status_history_writes = Gauge(
            "kubetrain_status_history_writes", "Writes of jobs' progress-history ConfigMaps", registry=r
        )
        self.status_api_requests = Gauge(
            "kubetrain_status_api_requests",
            "API requests the status endpoint sent since start, by HTTP method",
            ("method",),
            registry=r,
        )
        self.status_connections = Gauge(
            "kubetrain_status_connections",
            "The status endpoint's TLS connections: open now, accepted since start, refused at its bound",
            ("state",),
            registry=r,
        )
        self.status_certificate_reloads = Gauge(
            "kubetrain_status_certificate_reloads",
            "Times the served certificate changed without a restart",
            registry=r,
        )
        self.gc_pauses = PauseRecorder()
        r.register(self.gc_pauses)
        # What controller-runtime's registry exports for a Go operator: memory, CPU, file descriptors.
        ProcessCollector(registry=r)
        GCCollector(registry=r)
