"""The operator's /metrics (upstream's counter names plus the runtime's), /healthz and /readyz."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pytest
from operator_support import StartOperator, create_job, eventually, pytorch_job, wait_pods

from kubetrain.envtest.kubeapi import KubeApi
from waiting import PATIENCE

pytestmark = pytest.mark.cluster


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def fetch(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=PATIENCE) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return 0, ""


def test_metrics_count_jobs_with_upstream_names_and_probes_answer(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    metrics, health = free_port(), free_port()
    start_operator(
        "--metrics-bind-address", f"127.0.0.1:{metrics}", "--health-probe-bind-address", f"127.0.0.1:{health}"
    )
    eventually(lambda: fetch(health, "/readyz")[0] == 200, what="ready once the caches synced")
    assert fetch(health, "/healthz") == (200, "ok")
    create_job(kube_api, namespace, pytorch_job("j", workers=1))
    wait_pods(kube_api, namespace, ["j-master-0", "j-worker-0"])
    created = f'training_operator_jobs_created_total{{framework="pytorch",job_namespace="{namespace}"}} 1.0'
    eventually(lambda: created in fetch(metrics, "/metrics")[1], what="the created-jobs counter")
    text = fetch(metrics, "/metrics")[1]
    for name in (
        "kubetrain_reconcile_duration_seconds_bucket",
        "kubetrain_work_queue_depth",
        "kubetrain_api_requests",
        "kubetrain_leader 1.0",
        'kubetrain_gc_pause_seconds_count{generation="2"}',
        "process_resident_memory_bytes",
        "python_gc_collections_total",
    ):
        assert name in text, f"{name} missing from /metrics"
