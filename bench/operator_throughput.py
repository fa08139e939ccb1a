"""Operator throughput against envtest: N PyTorchJobs (1 master + 3 workers) submitted at once.

Reports, in one run:

- the plain-client rate: the same pods and services created directly by a client (the API server's limit),
  in jobs/s (8 objects per job);
- the operator's rate: N jobs submitted at once, until every pod and service exists;
- reaction latency: each master pod's phase set to Running, until the job's Running condition appears
  (p50 / p99 over the N jobs);
- API requests per job, split into object writes, status writes and events;
- the operator's peak RSS.

Usage (an envtest must be running: ``kubetrain envtest start``)::

    .venv/bin/python bench/operator_throughput.py --jobs 100 --markdown
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import secrets
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from kubetrain.api.manifest import parse_job
from kubetrain.envtest import controlplane
from kubetrain.envtest.crds import install_crds
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.kube.plan import kubernetes_plan
from kubetrain.kube.runtime.client import KubeClient, connect, raise_for_status

ROOT = Path(__file__).resolve().parents[1]
KUBETRAIN = Path(sys.executable).parent / "kubetrain"
OBJECTS_PER_JOB = 8
CREATE_CONCURRENCY = 16
"""Below the HTTP client's 20 kept-alive connections: more in flight makes it reconnect (TLS) per request."""
PATCH_CONCURRENCY = 16


def pytorch_job(name: str, namespace: str) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "pytorch", "image": "example.com/trainer:1"}]}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": template},
                "Worker": {"replicas": 3, "template": template},
            }
        },
    }


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


async def create_namespace(client: KubeClient, name: str) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    response = await client.http.post("/api/v1/namespaces", json=body)
    raise_for_status(response, response.content)


async def post_all(client: KubeClient, items: list[tuple[str, dict[str, Any]]], concurrency: int) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def post(path: str, body: dict[str, Any]) -> None:
        async with gate:
            response = await client.http.post(path, json=body)
            raise_for_status(response, response.content)

    await asyncio.gather(*(post(path, body) for path, body in items))


async def plain_client_rate(client: KubeClient, namespace: str, jobs: int) -> float:
    """Jobs/s when a client creates each job's 4 pods and 4 services itself."""
    items: list[tuple[str, dict[str, Any]]] = []
    for i in range(jobs):
        for obj in kubernetes_plan(parse_job(pytorch_job(f"plain-{i}", namespace))):
            obj["metadata"].pop("ownerReferences", None)  # no job object owns them here
            plural = "pods" if obj["kind"] == "Pod" else "services"
            items.append((f"/api/v1/namespaces/{namespace}/{plural}", obj))
    started = time.monotonic()
    await post_all(client, items, CREATE_CONCURRENCY)
    return jobs / (time.monotonic() - started)


async def count(client: KubeClient, path: str) -> int:
    """Objects in a collection from a one-item page (``remainingItemCount``): no decoding of them all,
    so the benchmark takes as little CPU from the operator as it can."""
    body = (await client.http.get(path, params={"limit": 1})).json()
    return len(body.get("items") or []) + int(body["metadata"].get("remainingItemCount") or 0)


@dataclass
class Watcher:
    """When each job first shows Running=True (a watch on the jobs)."""

    client: KubeClient
    namespace: str
    running_at: dict[str, float] = field(default_factory=dict)

    async def _watch(self, path: str, on_event: Any) -> None:
        """List, then watch; list and watch again whenever the stream ends or fails, so a dropped
        watch cannot hide a transition (the list replays what it missed)."""
        while True:
            try:
                listing = (await self.client.http.get(path)).json()
                for item in listing.get("items") or []:
                    on_event("ADDED", item)
                version = listing["metadata"]["resourceVersion"]
                params = {"watch": "true", "resourceVersion": version, "timeoutSeconds": 3600}
                async with self.client.http.stream("GET", path, params=params, timeout=None) as response:
                    async for line in response.aiter_lines():
                        if line.strip():
                            event = json.loads(line)
                            on_event(event["type"], event["object"])
            except (httpx.HTTPError, ValueError, KeyError):
                await asyncio.sleep(0.1)  # a broken stream or a half-read list: list again
                continue
            await asyncio.sleep(0.1)

    def _on_job(self, _: str, job: dict[str, Any]) -> None:
        name = job["metadata"]["name"]
        conditions = (job.get("status") or {}).get("conditions") or []
        if name not in self.running_at and any(
            c["type"] == "Running" and c["status"] == "True" for c in conditions
        ):
            self.running_at[name] = time.monotonic()

    def start(self) -> list[asyncio.Task[None]]:
        jobs = f"/apis/kubeflow.org/v1/namespaces/{self.namespace}/pytorchjobs"
        return [asyncio.create_task(self._watch(jobs, self._on_job))]


async def wait_until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout:.0f}s")
        await asyncio.sleep(0.02)


async def sample_rss(pid: int, peak: list[int]) -> None:
    process = psutil.Process(pid)
    while True:
        with contextlib.suppress(psutil.Error):
            peak[0] = max(peak[0], process.memory_info().rss)
        await asyncio.sleep(0.1)


def scrape(port: int) -> dict[str, float]:
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        match = re.match(
            r"^(kubetrain_api_requests\{method=\"(\w+)\"\}|kubetrain_events_posted) (\S+)$", line
        )
        if match:
            values[match.group(2) or "events"] = float(match.group(3))
    return values


@dataclass
class Result:
    jobs: int
    plain_jobs_per_s: float
    operator_jobs_per_s: float
    p50_ms: float
    p99_ms: float
    requests_per_job: float
    object_writes_per_object: float
    status_writes_per_job: float
    events_per_job: float
    peak_rss_mb: float


async def measure(
    kubeconfig: Path, jobs: int, threads: int, metrics_port: int, profile: Path | None = None
) -> Result:
    client = connect(kubeconfig, qps=0, burst=1, timeout=60)
    suffix = secrets.token_hex(3)
    plain_ns, operator_ns = f"bench-plain-{suffix}", f"bench-operator-{suffix}"
    await create_namespace(client, plain_ns)
    await create_namespace(client, operator_ns)
    plain_rate = await plain_client_rate(client, plain_ns, jobs)

    log = Path(f"/tmp/kubetrain-bench-operator-{suffix}.log")
    launcher = [str(KUBETRAIN)]
    if profile is not None:
        launcher = [sys.executable, "-m", "cProfile", "-o", str(profile), str(KUBETRAIN)]
    command = [*launcher, "operator", "--kubeconfig", str(kubeconfig), "--namespace", operator_ns]
    command += ["--enable-scheme", "pytorchjob", "--kube-api-qps", "0", "--controller-threads", str(threads)]
    command += ["--metrics-bind-address", f"127.0.0.1:{metrics_port}", "--health-probe-bind-address", "0"]
    operator = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    peak = [0]
    sampler = asyncio.create_task(sample_rss(operator.pid, peak))
    watcher = Watcher(client, operator_ns)
    watches = watcher.start()
    try:
        await wait_until(lambda: "caches synced" in log.read_text(), 60, "operator start")
        before = scrape(metrics_port)
        started = time.monotonic()
        job_path = f"/apis/kubeflow.org/v1/namespaces/{operator_ns}/pytorchjobs"
        manifests = [(job_path, pytorch_job(f"job-{i}", operator_ns)) for i in range(jobs)]
        await post_all(client, manifests, CREATE_CONCURRENCY)
        expected = jobs * OBJECTS_PER_JOB // 2
        base = f"/api/v1/namespaces/{operator_ns}"
        while (
            await count(client, f"{base}/pods") < expected
            or await count(client, f"{base}/services") < expected
        ):
            if time.monotonic() - started > 600:
                raise TimeoutError("not every pod and service exists after 600 s")
            await asyncio.sleep(0.05)
        operator_rate = jobs / (time.monotonic() - started)

        patched_at: dict[str, float] = {}
        gate = asyncio.Semaphore(PATCH_CONCURRENCY)

        async def run_master(name: str) -> None:
            async with gate:
                path = f"/api/v1/namespaces/{operator_ns}/pods/{name}-master-0/status"
                headers = {"Content-Type": "application/merge-patch+json"}
                body = json.dumps({"status": {"phase": "Running"}})
                response = await client.http.patch(path, content=body, headers=headers)
                raise_for_status(response, response.content)
                patched_at[name] = time.monotonic()

        await asyncio.gather(*(run_master(f"job-{i}") for i in range(jobs)))
        await wait_until(lambda: len(watcher.running_at) >= jobs, 300, "every job Running")
        latencies = [(watcher.running_at[name] - patched_at[name]) * 1000 for name in patched_at]
        await asyncio.sleep(1.0)  # let the last events go out before counting
        after = scrape(metrics_port)
    finally:
        for task in [*watches, sampler]:
            task.cancel()
        operator.terminate()
        operator.wait(30)
        for namespace in (plain_ns, operator_ns):
            # No kubelet finishes graceful deletions here: bound pods would stay Terminating, keep their
            # node's pod slots, and leave the shared envtest unable to schedule anything.
            pods = f"/api/v1/namespaces/{namespace}/pods"
            await client.http.request("DELETE", pods, json={"gracePeriodSeconds": 0})
            await client.http.delete(f"/api/v1/namespaces/{namespace}")
        await client.aclose()

    def delta(key: str) -> float:
        return after.get(key, 0.0) - before.get(key, 0.0)

    events = delta("events")
    writes = delta("POST") + delta("PUT") + delta("PATCH") + delta("DELETE")
    total = sum(delta(method) for method in ("GET", "POST", "PUT", "PATCH", "DELETE"))
    status_writes = delta("PUT")
    object_writes = writes - status_writes - events
    return Result(
        jobs=jobs,
        plain_jobs_per_s=plain_rate,
        operator_jobs_per_s=operator_rate,
        p50_ms=statistics.median(latencies),
        p99_ms=percentile(latencies, 0.99),
        requests_per_job=total / jobs,
        object_writes_per_object=object_writes / (jobs * OBJECTS_PER_JOB),
        status_writes_per_job=status_writes / jobs,
        events_per_job=events / jobs,
        peak_rss_mb=peak[0] / 2**20,
    )


def markdown(results: list[Result]) -> str:
    lines = [
        "| N jobs | plain client (jobs/s) | operator (jobs/s) | operator / plain | reaction p50 "
        "| reaction p99 | API requests / job | object writes / object | status writes / job | events / job "
        "| peak RSS |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.jobs} | {r.plain_jobs_per_s:.1f} | {r.operator_jobs_per_s:.1f} "
            f"| {r.operator_jobs_per_s / r.plain_jobs_per_s:.0%} | {r.p50_ms:.0f} ms | {r.p99_ms:.0f} ms "
            f"| {r.requests_per_job:.1f} | {r.object_writes_per_object:.2f} | {r.status_writes_per_job:.1f} "
            f"| {r.events_per_job:.1f} | {r.peak_rss_mb:.0f} MB |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[100], help="N (several: one run each)")
    parser.add_argument("--controller-threads", type=int, default=4)
    parser.add_argument("--metrics-port", type=int, default=18390)
    parser.add_argument("--kubeconfig", type=Path, help="default: the running envtest's admin kubeconfig")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--profile", type=Path, help="run the operator under cProfile, stats written here")
    args = parser.parse_args()
    kubeconfig = args.kubeconfig
    if kubeconfig is None:
        state = controlplane.status(controlplane.default_run_dir()).state
        if state is None:
            sys.exit("no envtest running: start one with `kubetrain envtest start`")
        kubeconfig = state.kubeconfig
    with KubeApi.from_kubeconfig(kubeconfig) as api:
        install_crds(api, ROOT / "manifests" / "crds")
    results = []
    for jobs in args.jobs:
        result = asyncio.run(
            measure(kubeconfig, jobs, args.controller_threads, args.metrics_port, args.profile)
        )
        results.append(result)
        print(json.dumps(result.__dict__), file=sys.stderr, flush=True)
    if args.markdown:
        print(markdown(results))


if __name__ == "__main__":
    main()
