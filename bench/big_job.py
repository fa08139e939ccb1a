"""One big PyTorchJob (1 master + W workers) under kubetrain's operator and upstream's v1.9.0, alternately, on
one envtest with fake nodes.

For each W and each run, both operators (the order alternating between runs) are started in a namespace of
their own, each at its defaults unless ``--kubetrain-flags`` / ``--upstream-flags`` say otherwise, and
running as a ServiceAccount rather than envtest's admin: the admin is in ``system:masters``, which API
Priority and Fairness exempts, while an operator's ServiceAccount falls in the ``service-accounts``
FlowSchema (priority level ``workload-low``), as in a real cluster. Then the bench:

1. posts the job and waits until every pod and service exists (**created**, from the POST);
2. patches every pod's ``status.phase`` to ``Running`` (32 in flight, as a kubelet of each node would), and
   waits until the job's ``status.replicaStatuses`` shows every replica active, as a watch on the job
   delivers it (**all Running in status**, from the POST; and **status lag**, from the last pod patched);
3. reports the operator's peak RSS (sampled every 100 ms) and CPU seconds over the run, and the API
   requests the operator made, from the API server's ``apiserver_request_total`` (pods and services
   created, job status writes, Events; the bench's own requests are other verbs or subresources).

The namespace's pods are deleted with no grace period, and the namespace waited out, between runs. The
fake node has room for every pod. There is no kubelet: pods run when the bench says so.

Usage::

    kubetrain envtest start --dir /tmp/envtest-big
    .venv/bin/python bench/big_job.py --kubeconfig /tmp/envtest-big/admin.kubeconfig \\
        --workers 1000 5000 --runs 1 --markdown
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import secrets
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from operator_throughput import (
    BENCH_NODE,
    count,
    cpu_seconds,
    create_namespace,
    delete_namespace,
    record_run,
    sample_rss,
    wait_until,
)

from kubetrain.envtest import peers
from kubetrain.envtest.crds import install_crds
from kubetrain.envtest.kubeapi import ApiError, KubeApi
from kubetrain.envtest.nodes import HEARTBEAT_SECONDS, NodeShape, fake_node, refresh_ready, renew_lease
from kubetrain.kube.runtime.client import KubeClient, connect, raise_for_status

KUBETRAIN = Path(sys.executable).parent / "kubetrain"
KUBETRAIN_READY = "caches synced"
PATCH_CONCURRENCY = 32
OPERATOR_WRITES = {
    # (verb, group, resource, subresource) of apiserver_request_total that only the operator makes in a run
    # (the scheduler posts its Events through events.k8s.io, the pod driver patches pods/status).
    ("POST", "", "pods", ""): "pod creates",
    ("POST", "", "services", ""): "service creates",
    ("PUT", "kubeflow.org", "pytorchjobs", "status"): "status writes",
    ("PATCH", "kubeflow.org", "pytorchjobs", "status"): "status writes",
    ("POST", "", "events", ""): "events",
    ("PATCH", "", "events", ""): "events",
}
TOO_MANY = ("429", "", "", "")
REQUEST_LINE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")


def big_job(name: str, namespace: str, workers: int) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "pytorch", "image": "example.com/trainer:1"}]}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": template},
                "Worker": {"replicas": workers, "template": template},
            }
        },
    }


@dataclass
class Run:
    operator: str
    workers: int
    flags: list[str]
    created_s: float
    running_s: float
    status_lag_s: float
    peak_rss_mb: float
    cpu_s: float
    requests: dict[str, float]
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    notes: list[str] = field(default_factory=list)
    reconciles: int = 0
    """Reconciles of the job, from the operator's own histogram."""
    reconcile_mean_ms: float = 0.0
    """Their mean wall time (a reconcile awaits its writes: under a rate limit that is most of it)."""


async def apiserver_requests(client: KubeClient) -> dict[tuple[str, str, str, str], float]:
    response = await client.http.get("/metrics")
    raise_for_status(response, response.content)
    text = response.content.decode()
    totals: dict[tuple[str, str, str, str], float] = {}
    for line in text.splitlines():
        match = REQUEST_LINE.match(line)
        if not match:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group("labels")))
        key = (
            labels.get("verb", ""),
            labels.get("group", ""),
            labels.get("resource", ""),
            labels.get("subresource", ""),
        )
        totals[key] = totals.get(key, 0.0) + float(match.group("value"))
        if labels.get("code") == "429":
            totals[TOO_MANY] = totals.get(TOO_MANY, 0.0) + float(match.group("value"))
    return totals


def operator_writes(
    before: dict[tuple[str, str, str, str], float], after: dict[tuple[str, str, str, str], float]
) -> dict[str, float]:
    writes: dict[str, float] = {}
    for key, name in OPERATOR_WRITES.items():
        writes[name] = writes.get(name, 0.0) + after.get(key, 0.0) - before.get(key, 0.0)
    # API Priority and Fairness pushing back, on anyone's requests (the bench's own never queue: admin).
    writes["429s"] = after.get(TOO_MANY, 0.0) - before.get(TOO_MANY, 0.0)
    return writes


def service_account_kubeconfig(api: KubeApi, admin: Path, namespace: str, name: str) -> Path:
    """A kubeconfig that authenticates as ServiceAccount ``namespace/name``, bound to cluster-admin (what
    each operator may do is not what is measured here; who APF takes it for is)."""
    with contextlib.suppress(ApiError):
        api.create(
            f"/api/v1/namespaces/{namespace}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
        )
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"bench-{namespace}-{name}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }
    with contextlib.suppress(ApiError):
        api.create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding)
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 7200},
    }
    token = api.create(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", request)["status"][
        "token"
    ]
    config = yaml.safe_load(admin.read_text())
    cluster = config["clusters"][0]
    path = admin.parent / f"sa-{namespace}.kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [cluster],
                "users": [{"name": name, "user": {"token": token}}],
                "contexts": [{"name": name, "context": {"cluster": cluster["name"], "user": name}}],
                "current-context": name,
            }
        )
    )
    return path


async def start_operator(
    operator: str,
    flags: list[str],
    kubeconfig: Path,
    namespace: str,
    log: Path,
    metrics_port: int | None = None,
) -> subprocess.Popen[bytes]:
    """The operator watching ``namespace``, once its controller runs; its /metrics on ``metrics_port``."""
    if operator == "kubetrain":
        metrics = f"127.0.0.1:{metrics_port}" if metrics_port else "0"
        command = [str(KUBETRAIN), "operator", "--kubeconfig", str(kubeconfig), "--namespace", namespace]
        command += ["--enable-scheme", "pytorchjob", "--health-probe-bind-address", "0"]
        command += ["--metrics-bind-address", metrics, *flags]
        process = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT)
        await wait_until(lambda: KUBETRAIN_READY in log.read_text(), 60, "kubetrain operator start")
        return process
    with KubeApi.from_kubeconfig(kubeconfig) as api:
        started = await asyncio.to_thread(
            peers.start_training_operator,
            api,
            kubeconfig,
            namespace,
            log,
            ["pytorchjob"],
            flags,
            metrics_port=metrics_port,
        )
    return started.process


RECONCILE_METRICS = {
    # What each operator calls its reconcile histogram (seconds, wall time: a reconcile awaits its writes).
    "kubetrain": ("kubetrain_reconcile_duration_seconds", 'kind="PyTorchJob"'),
    "upstream": ("controller_runtime_reconcile_time_seconds", 'controller="pytorchjob-controller"'),
}


def reconciles(operator: str, port: int) -> tuple[float, float]:
    """(count, seconds in all) of the operator's reconciles so far, from its own /metrics."""
    name, label = RECONCILE_METRICS[operator]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    found = {"count": 0.0, "sum": 0.0}
    for line in text.splitlines():
        for part in found:
            if line.startswith(f"{name}_{part}{{") and label in line:
                found[part] += float(line.rsplit(" ", 1)[1])
    return found["count"], found["sum"]


def all_active(job: dict[str, Any], workers: int) -> bool:
    replicas = (job.get("status") or {}).get("replicaStatuses") or {}
    master = int((replicas.get("Master") or {}).get("active") or 0)
    active = int((replicas.get("Worker") or {}).get("active") or 0)
    return master == 1 and active == workers


async def when_all_active(client: KubeClient, collection: str, name: str, workers: int) -> float:
    """The moment (monotonic) the job's status first showed every replica active, as a watch delivers it:
    a poll would round the status lag up to its interval. Listed again if the stream ends early."""
    selector = {"fieldSelector": f"metadata.name={name}"}
    while True:
        listing = (await client.http.get(collection, params=selector)).json()
        if any(all_active(job, workers) for job in listing.get("items") or []):
            return time.monotonic()
        params = {
            **selector,
            "watch": "true",
            "resourceVersion": listing["metadata"]["resourceVersion"],
            "timeoutSeconds": 3600,
        }
        async with client.http.stream("GET", collection, params=params, timeout=None) as response:
            async for line in response.aiter_lines():
                if line.strip() and all_active(json.loads(line).get("object") or {}, workers):
                    return time.monotonic()


async def run_every_pod(client: KubeClient, namespace: str, names: list[str]) -> None:
    gate = asyncio.Semaphore(PATCH_CONCURRENCY)
    headers = {"Content-Type": "application/merge-patch+json"}
    body = json.dumps({"status": {"phase": "Running"}})

    async def run(name: str) -> None:
        async with gate:
            response = await client.http.patch(
                f"/api/v1/namespaces/{namespace}/pods/{name}/status", content=body, headers=headers
            )
            raise_for_status(response, response.content)

    await asyncio.gather(*(run(name) for name in names))


async def measure(operator: str, workers: int, flags: list[str], admin: Path, timeout: float) -> Run:
    client = connect(admin, qps=0, burst=1, timeout=120)
    namespace = f"big-{operator}-{secrets.token_hex(3)}"
    await create_namespace(client, namespace)
    log = Path(f"/tmp/kubetrain-big-job-{namespace}.log")
    with KubeApi.from_kubeconfig(admin) as api:
        kubeconfig = service_account_kubeconfig(api, admin, namespace, "operator")
    load_before = os.getloadavg()
    port = peers.free_port()
    process = await start_operator(operator, flags, kubeconfig, namespace, log, port)
    peak = [0]
    sampler = asyncio.create_task(sample_rss(process.pid, peak))
    try:
        requests_before = await apiserver_requests(client)
        cpu_at_start = cpu_seconds(process.pid)
        started = time.monotonic()
        collection = f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs"
        response = await client.http.post(collection, json=big_job("big", namespace, workers))
        raise_for_status(response, response.content)
        base = f"/api/v1/namespaces/{namespace}"
        expected = workers + 1
        while (
            await count(client, f"{base}/pods") < expected
            or await count(client, f"{base}/services") < expected
        ):
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"{operator}: not every pod and service exists after {timeout:.0f} s")
            await asyncio.sleep(0.25)
        created = time.monotonic() - started
        names = ["big-master-0", *(f"big-worker-{i}" for i in range(workers))]
        watching = asyncio.create_task(when_all_active(client, collection, "big", workers))
        await run_every_pod(client, namespace, names)
        last_patch = time.monotonic()
        try:
            done = await asyncio.wait_for(watching, 2 * timeout - (last_patch - started))
        except TimeoutError:
            raise TimeoutError(f"{operator}: the status never showed every replica active") from None
        cpu = cpu_seconds(process.pid) - cpu_at_start
        await asyncio.sleep(3)  # the last Events, posted after the status write
        requests_after = await apiserver_requests(client)
        reconciled, reconcile_seconds = reconciles(operator, port)
    finally:
        sampler.cancel()
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(30)
        process.kill()
        await delete_namespace(client, namespace, timeout=600)
        await client.aclose()
    return Run(
        operator=operator,
        workers=workers,
        flags=flags,
        created_s=created,
        running_s=done - started,
        status_lag_s=done - last_patch,
        peak_rss_mb=peak[0] / 2**20,
        cpu_s=cpu,
        requests=operator_writes(requests_before, requests_after),
        load_before=load_before,
        load_after=os.getloadavg(),
        reconciles=int(reconciled),
        reconcile_mean_ms=reconcile_seconds * 1000 / max(reconciled, 1),
    )


def prepare(admin: Path, crds: Path) -> None:
    with KubeApi.from_kubeconfig(admin) as api:
        install_crds(api, crds)
        version = str(api.get("/version")["gitVersion"])
        shape = NodeShape(cpu="100000", memory="400Ti", pods=20_000, gpus=0)
        with contextlib.suppress(ApiError):
            api.create("/api/v1/nodes", fake_node(BENCH_NODE, 9, shape, version))


@contextlib.contextmanager
def node_kept_ready(admin: Path, name: str) -> Iterator[None]:
    """The bench's own fake node kept Ready while the bench runs, as envtest's heartbeat keeps its nodes:
    envtest's controller-manager marks a node whose Lease is an hour old unreachable, and evicts its pods
    (finished ones too) 300 s later, which emptied a reused state in the middle of a session."""
    stopping = threading.Event()

    def beat() -> None:
        with KubeApi.from_kubeconfig(admin) as api:
            while not stopping.is_set():
                with contextlib.suppress(Exception):  # a missed beat is retried; the lease outlives three
                    renew_lease(api, name)
                    refresh_ready(api, name)
                stopping.wait(HEARTBEAT_SECONDS)

    thread = threading.Thread(target=beat, name=f"heartbeat-{name}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stopping.set()
        thread.join(timeout=30)


def _reconciles(run: Run) -> str:
    return f"{run.reconciles} ({run.reconcile_mean_ms:.0f} ms)" if run.reconciles else "-"


def markdown(runs: list[Run]) -> str:
    lines = [
        "| workers | run | kubetrain flags | load (1 min, before) | created | all Running in status "
        "| status lag | peak RSS | CPU | operator writes (pods + services + status + events) "
        "| reconciles (mean) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for workers in sorted({r.workers for r in runs}):
        kubetrain = [r for r in runs if r.workers == workers and r.operator == "kubetrain"]
        upstream = [r for r in runs if r.workers == workers and r.operator == "upstream"]
        for index, (k, u) in enumerate(zip(kubetrain, upstream, strict=False), 1):

            def writes(r: Run) -> str:
                q = r.requests
                return (
                    f"{q['pod creates']:.0f} + {q['service creates']:.0f} + {q['status writes']:.0f} "
                    f"+ {q['events']:.0f}" + (f" ({q['429s']:.0f} x 429)" if q.get("429s") else "")
                )

            lines.append(
                f"| {workers:,} | {index} | {' '.join(k.flags) or 'defaults'} "
                f"| {k.load_before[0]:.1f} / {u.load_before[0]:.1f} "
                f"| {k.created_s:.1f} / {u.created_s:.1f} s = **{u.created_s / k.created_s:.1f}x faster** "
                f"| {k.running_s:.1f} / {u.running_s:.1f} s = **{u.running_s / k.running_s:.1f}x faster** "
                f"| {k.status_lag_s:.1f} / {u.status_lag_s:.1f} s "
                f"| {k.peak_rss_mb:.0f} / {u.peak_rss_mb:.0f} MB = **{k.peak_rss_mb / u.peak_rss_mb:.2f}x** "
                f"| {k.cpu_s:.1f} / {u.cpu_s:.1f} s "
                f"| {writes(k)} / {writes(u)} "
                f"| {_reconciles(k)} / {_reconciles(u)} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", type=Path, help="the envtest's admin kubeconfig")
    parser.add_argument("--workers", type=int, nargs="+", default=[1000])
    parser.add_argument("--runs", type=int, default=1, help="pairs per W")
    parser.add_argument(
        "--operators", nargs="+", choices=["kubetrain", "upstream"], default=["kubetrain", "upstream"]
    )
    parser.add_argument("--kubetrain-flags", default="", help="extra flags for kubetrain's operator")
    parser.add_argument("--upstream-flags", default="", help="extra flags for upstream's")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--results", type=Path, help="append each run as a JSON line here")
    parser.add_argument("--table-from", type=Path, help="only print the table of the runs in this file")
    args = parser.parse_args()
    if args.table_from:
        lines = [line for line in args.table_from.read_text().splitlines() if line.strip()]
        print(markdown([Run(**json.loads(line)) for line in lines]))
        return
    if args.kubeconfig is None:
        parser.error("--kubeconfig is needed to measure (the envtest's admin kubeconfig)")
    peers.TRAINING_OPERATOR.ensure_built()
    prepare(args.kubeconfig, peers.TRAINING_OPERATOR.crds_dir())
    flags = {"kubetrain": args.kubetrain_flags.split(), "upstream": args.upstream_flags.split()}
    runs: list[Run] = []
    with node_kept_ready(args.kubeconfig, BENCH_NODE):
        for workers in args.workers:
            for index in range(args.runs):
                order = list(args.operators) if index % 2 == 0 else list(reversed(args.operators))
                for operator in order:
                    run = asyncio.run(
                        measure(operator, workers, flags[operator], args.kubeconfig, args.timeout)
                    )
                    runs.append(run)
                    record_run(run, args.results)
    if args.markdown:
        print(markdown(runs))


if __name__ == "__main__":
    main()
