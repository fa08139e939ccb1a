"""What the operator's batch/v1 Job cache holds of a Job that is not its own (a CronJob's run): the Job as
the API server serves it, decoded 2,000 times and kept as ``compact_object`` kept it before (whole, less
managedFields) and as ``compact_batch_job`` keeps it now (its identity only). tracemalloc, per Job.

Usage::

    .venv/bin/python bench/batch_job_cache.py
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from typing import Any

from kubetrain.kube.compact import compact_batch_job, compact_object

COPIES = 2000

SERVED: dict[str, Any] = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {
        "creationTimestamp": "2026-11-26T09:00:00Z",
        "generation": 1,
        "labels": {
            "batch.kubernetes.io/controller-uid": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
            "batch.kubernetes.io/job-name": "nightly-report-29400000",
            "controller-uid": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
            "job-name": "nightly-report-29400000",
        },
        "name": "nightly-report-29400000",
        "namespace": "analytics",
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "blockOwnerDeletion": True,
                "controller": True,
                "kind": "CronJob",
                "name": "nightly-report",
                "uid": "1a2b3c4d-5e6f-7081-92a3-b4c5d6e7f809",
            }
        ],
        "resourceVersion": "123456",
        "uid": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
    },
    "spec": {
        "backoffLimit": 6,
        "completionMode": "NonIndexed",
        "completions": 1,
        "manualSelector": False,
        "parallelism": 1,
        "podReplacementPolicy": "TerminatingOrFailed",
        "selector": {
            "matchLabels": {"batch.kubernetes.io/controller-uid": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"}
        },
        "suspend": False,
        "template": {
            "metadata": {
                "labels": {
                    "batch.kubernetes.io/controller-uid": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
                    "batch.kubernetes.io/job-name": "nightly-report-29400000",
                    "controller-uid": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
                    "job-name": "nightly-report-29400000",
                }
            },
            "spec": {
                "containers": [
                    {
                        "command": [
                            "python",
                            "/app/report.py",
                            "--since",
                            "24h",
                            "--out",
                            "s3://reports/nightly",
                        ],
                        "env": [
                            {"name": "DB_HOST", "value": "postgres.analytics.svc"},
                            {"name": "DB_USER", "valueFrom": {"secretKeyRef": {"key": "user", "name": "db"}}},
                            {
                                "name": "DB_PASSWORD",
                                "valueFrom": {"secretKeyRef": {"key": "password", "name": "db"}},
                            },
                        ],
                        "image": "registry.example.com/analytics/report:2026.11.3",
                        "imagePullPolicy": "IfNotPresent",
                        "name": "report",
                        "resources": {
                            "limits": {"memory": "2Gi"},
                            "requests": {"cpu": "500m", "memory": "1Gi"},
                        },
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File",
                        "volumeMounts": [{"mountPath": "/config", "name": "config"}],
                    }
                ],
                "dnsPolicy": "ClusterFirst",
                "restartPolicy": "OnFailure",
                "schedulerName": "default-scheduler",
                "securityContext": {},
                "terminationGracePeriodSeconds": 30,
                "volumes": [{"configMap": {"defaultMode": 420, "name": "report-config"}, "name": "config"}],
            },
        },
    },
    "status": {
        "completionTime": "2026-11-26T09:03:10Z",
        "conditions": [
            {
                "lastProbeTime": "2026-11-26T09:03:10Z",
                "lastTransitionTime": "2026-11-26T09:03:10Z",
                "message": "Reached expected number of succeeded pods",
                "reason": "CompletionsReached",
                "status": "True",
                "type": "SuccessCriteriaMet",
            },
            {
                "lastProbeTime": "2026-11-26T09:03:10Z",
                "lastTransitionTime": "2026-11-26T09:03:10Z",
                "message": "Reached expected number of succeeded pods",
                "reason": "CompletionsReached",
                "status": "True",
                "type": "Complete",
            },
        ],
        "ready": 0,
        "startTime": "2026-11-26T09:00:00Z",
        "succeeded": 1,
        "terminating": 0,
        "uncountedTerminatedPods": {},
    },
}


def kept_bytes(keep: Callable[[dict[str, Any]], dict[str, Any]], text: str) -> float:
    """Bytes held per Job once ``COPIES`` decoded copies are kept as ``keep`` keeps them."""
    tracemalloc.start()
    kept = [keep(json.loads(text)) for _ in range(COPIES)]
    size, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept
    return size / COPIES


def main() -> None:
    text = json.dumps(SERVED)
    for name, keep in (
        ("whole (compact_object, before)", compact_object),
        ("compact_batch_job", compact_batch_job),
    ):
        print(f"{name}: {kept_bytes(keep, text) / 1024:.2f} KB a Job ({len(text)} bytes of JSON)")


if __name__ == "__main__":
    main()
