"""Operator throughput against envtest: N PyTorchJobs (1 master + 3 workers) submitted at once.

Reports, in one run:

- the plain-client rate: the same pods and services created directly by a client (the API server's limit),
  in jobs/s (8 objects per job);
- the operator's rate: N jobs submitted at once, until every pod and service exists;
- reaction latency: each master pod's phase set to Running, until the job's Running condition appears
  (p50 / p99 over the N jobs), and the same for a plain client that writes the job's status itself the
  moment its pod watch shows the phase (the API server's limit for reactions);
- API requests per job, split into object writes, status writes and events;
- the operator's peak RSS and its CPU seconds per job, while creating and while reacting.

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
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psutil

from kubetrain.api.manifest import parse_job
from kubetrain.envtest import controlplane
from kubetrain.envtest.crds import install_crds
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.nodes import NodeShape, fake_node
from kubetrain.kube.plan import kubernetes_plan
from kubetrain.kube.runtime.client import KubeClient, connect, raise_for_status

ROOT = Path(__file__).resolve().parents[1]
KUBETRAIN = Path(sys.executable).parent / "kubetrain"
OBJECTS_PER_JOB = 8
CREATE_CONCURRENCY = 16
"""Below the HTTP client's 20 kept-alive connections: more in flight makes it reconnect (TLS) per request."""
PATCH_CONCURRENCY = 16
BENCH_NODE = "bench-roomy-node"


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

    async def watch(self, path: str, on_event: Any, selector: str = "") -> None:
        """List, then watch; list and watch again whenever the stream ends or fails, so a dropped
        watch cannot hide a transition (the list replays what it missed)."""
        while True:
            try:
                selected = {"labelSelector": selector} if selector else {}
                listing = (await self.client.http.get(path, params=selected)).json()
                for item in listing.get("items") or []:
                    on_event("ADDED", item)
                version = listing["metadata"]["resourceVersion"]
                params = {"watch": "true", "resourceVersion": version, "timeoutSeconds": 3600, **selected}
                async with self.client.http.stream("GET", path, params=params, timeout=None) as response:
                    async for line in response.aiter_lines():
                        if line.strip():
                            event = json.loads(line)
                            on_event(event["type"], event["object"])
            except (aiohttp.ClientError, TimeoutError, ValueError, KeyError):
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
        return [asyncio.create_task(self.watch(jobs, self._on_job))]


async def react(client: KubeClient, namespace: str, names: list[str], watcher: Watcher) -> list[float]:
    """Set each job's master pod Running (16 patches in flight) and return, per job, the milliseconds until
    its Running condition was seen."""
    patched_at: dict[str, float] = {}
    gate = asyncio.Semaphore(PATCH_CONCURRENCY)

    async def run_master(name: str) -> None:
        async with gate:
            path = f"/api/v1/namespaces/{namespace}/pods/{name}-master-0/status"
            headers = {"Content-Type": "application/merge-patch+json"}
            body = json.dumps({"status": {"phase": "Running"}})
            response = await client.http.patch(path, content=body, headers=headers)
            raise_for_status(response, response.content)
            patched_at[name] = time.monotonic()

    await asyncio.gather(*(run_master(name) for name in names))
    await wait_until(lambda: len(watcher.running_at) >= len(names), 300, "every job Running")
    return [(watcher.running_at[name] - patched_at[name]) * 1000 for name in names]


def running_status() -> dict[str, Any]:
    """What the operator writes when the master runs: Created then Running, with the replica counts."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def condition(type_: str, reason: str) -> dict[str, str]:
        message = f"PyTorchJob is {type_.lower()}."
        times = {"lastUpdateTime": now, "lastTransitionTime": now}
        return {"type": type_, "status": "True", "reason": reason, "message": message, **times}

    return {
        "conditions": [condition("Created", "PyTorchJobCreated"), condition("Running", "PyTorchJobRunning")],
        "replicaStatuses": {"Master": {"active": 1}, "Worker": {}},
        "startTime": now,
    }


async def plain_reaction(client: KubeClient, namespace: str, jobs: int) -> list[float]:
    """Reaction latencies when a client writes each job's status itself, one PUT the moment its pod watch
    shows the master Running (16 in flight): no cache, no engine, no events. Runs on the plain client's
    pods (already created, no operator watching their namespace) and N unreconciled jobs beside them."""
    collection = f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs"
    stored: dict[str, dict[str, Any]] = {}
    gate = asyncio.Semaphore(CREATE_CONCURRENCY)

    async def create(name: str) -> None:
        async with gate:
            response = await client.http.post(collection, json=pytorch_job(name, namespace))
            raise_for_status(response, response.content)
            stored[name] = response.json()

    names = [f"plain-{i}" for i in range(jobs)]
    await asyncio.gather(*(create(name) for name in names))
    ready: asyncio.Queue[str] = asyncio.Queue()
    seen: set[str] = set()

    def on_pod(_: str, pod: dict[str, Any]) -> None:
        job = pod["metadata"]["name"].removesuffix("-master-0")
        if (pod.get("status") or {}).get("phase") == "Running" and job not in seen:
            seen.add(job)
            ready.put_nowait(job)

    async def write_status() -> None:
        while True:
            name = await ready.get()
            body = {**stored[name], "status": running_status()}
            response = await client.http.put(f"{collection}/{name}/status", json=body)
            raise_for_status(response, response.content)

    watcher = Watcher(client, namespace)
    masters = "training.kubeflow.org/replica-type=master"
    pod_watch = watcher.watch(f"/api/v1/namespaces/{namespace}/pods", on_pod, masters)
    tasks = [*watcher.start(), asyncio.create_task(pod_watch)]
    tasks += [asyncio.create_task(write_status()) for _ in range(PATCH_CONCURRENCY)]
    try:
        await asyncio.sleep(1.0)  # both watches listed and open
        return await react(client, namespace, names, watcher)
    finally:
        for task in tasks:
            task.cancel()


async def delete_namespace(client: KubeClient, namespace: str, timeout: float = 300) -> None:
    """Delete a namespace and wait until it is gone, so the next run does not share two cores with the
    controller-manager still deleting thousands of this run's objects.

    No kubelet finishes graceful deletions here: bound pods would stay Terminating, keep their node's pod
    slots and hold the namespace, so they are deleted with no grace period first (in rounds: one call may
    time out on thousands of pods)."""
    pods = f"/api/v1/namespaces/{namespace}/pods"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(aiohttp.ClientError, TimeoutError):
            await client.http.request("DELETE", pods, json={"gracePeriodSeconds": 0})
            if await count(client, pods) == 0:
                break
    else:
        print(f"warning: pods of {namespace} not deleted after {timeout:.0f}s", file=sys.stderr)
        return
    await client.http.delete(f"/api/v1/namespaces/{namespace}")
    while (await client.http.get(f"/api/v1/namespaces/{namespace}")).status_code != 404:
        if time.monotonic() > deadline:
            print(f"warning: namespace {namespace} still there after {timeout:.0f}s", file=sys.stderr)
            return
        await asyncio.sleep(1.0)


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


def cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


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
        elif line.startswith("kubetrain_events_queued "):
            values["events_queued"] = float(line.split()[-1])
        elif line.startswith("process_resident_memory_bytes "):
            values["rss_bytes"] = float(line.split()[-1])
        elif line.startswith("kubetrain_work_queue_depth{"):
            values["queue"] = values.get("queue", 0.0) + float(line.split()[-1])
        elif match := re.match(r'^kubetrain_gc_pause_seconds_(sum|count)\{generation="(\d)"\} (\S+)$', line):
            values[f"gc_{match.group(1)}_{match.group(2)}"] = float(match.group(3))
    return values


async def wait_settled(port: int, before: dict[str, float], jobs: int) -> None:
    """Until the operator has written a status for every job and two scrapes 0.2 s apart find its work
    queue and its event queue empty."""
    quiet = 0
    deadline = time.monotonic() + 300
    while quiet < 2:
        if time.monotonic() > deadline:
            raise TimeoutError("the operator did not settle within 300 s")
        await asyncio.sleep(0.2)
        now = scrape(port)
        idle = now.get("queue", 1.0) == 0 and now.get("events_queued", 1.0) == 0
        settled = idle and now.get("PUT", 0.0) - before.get("PUT", 0.0) >= jobs
        quiet = quiet + 1 if settled else 0


@dataclass
class Result:
    jobs: int
    plain_jobs_per_s: float
    operator_jobs_per_s: float
    p50_ms: float
    p99_ms: float
    plain_p50_ms: float
    plain_p99_ms: float
    requests_per_job: float
    object_writes_per_object: float
    status_writes_per_job: float
    events_per_job: float
    peak_rss_mb: float
    create_cpu_ms_per_job: float
    reaction_cpu_ms_per_job: float
    gc_pause_s: float
    """Garbage collection over the whole run (creation and reaction), from the operator's own metric."""
    gc_full_collections: int


async def measure(
    kubeconfig: Path,
    jobs: int,
    threads: int,
    metrics_port: int,
    profile: Path | None = None,
    operator_args: tuple[str, ...] = (),
) -> Result:
    client = connect(kubeconfig, qps=0, burst=1, timeout=60)
    suffix = secrets.token_hex(3)
    plain_ns, operator_ns = f"bench-plain-{suffix}", f"bench-operator-{suffix}"
    await create_namespace(client, plain_ns)
    await create_namespace(client, operator_ns)
    plain_rate = await plain_client_rate(client, plain_ns, jobs)
    plain_latencies = await plain_reaction(client, plain_ns, jobs)

    log = Path(f"/tmp/kubetrain-bench-operator-{suffix}.log")
    launcher = [str(KUBETRAIN)]
    if profile is not None:
        launcher = [sys.executable, "-m", "cProfile", "-o", str(profile), str(KUBETRAIN)]
    command = [*launcher, "operator", "--kubeconfig", str(kubeconfig), "--namespace", operator_ns]
    command += ["--enable-scheme", "pytorchjob", "--kube-api-qps", "0", "--controller-threads", str(threads)]
    command += ["--metrics-bind-address", f"127.0.0.1:{metrics_port}", "--health-probe-bind-address", "0"]
    command += operator_args
    operator = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    peak = [0]
    sampler = asyncio.create_task(sample_rss(operator.pid, peak))
    watcher = Watcher(client, operator_ns)
    watches = watcher.start()
    try:
        await wait_until(lambda: "caches synced" in log.read_text(), 60, "operator start")
        before = scrape(metrics_port)
        cpu_at_start = cpu_seconds(operator.pid)
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

        created_cpu = cpu_seconds(operator.pid) - cpu_at_start
        # Latency is measured on a settled operator, as the plain reactor's is: every job's first status
        # written and no job key waiting. (Started while the operator still digests the creation burst,
        # the reaction queues behind that backlog and measures throughput instead.)
        await wait_settled(metrics_port, before, jobs)
        cpu_before_reaction = cpu_seconds(operator.pid)
        latencies = await react(client, operator_ns, [f"job-{i}" for i in range(jobs)], watcher)
        reaction_cpu = cpu_seconds(operator.pid) - cpu_before_reaction
        await asyncio.sleep(1.0)  # let the last events go out before counting
        after = scrape(metrics_port)
    finally:
        for task in [*watches, sampler]:
            task.cancel()
        operator.terminate()
        operator.wait(30)
        for namespace in (plain_ns, operator_ns):
            await delete_namespace(client, namespace)
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
        plain_p50_ms=statistics.median(plain_latencies),
        plain_p99_ms=percentile(plain_latencies, 0.99),
        requests_per_job=total / jobs,
        object_writes_per_object=object_writes / (jobs * OBJECTS_PER_JOB),
        status_writes_per_job=status_writes / jobs,
        events_per_job=events / jobs,
        peak_rss_mb=peak[0] / 2**20,
        create_cpu_ms_per_job=created_cpu * 1000 / jobs,
        reaction_cpu_ms_per_job=reaction_cpu * 1000 / jobs,
        gc_pause_s=sum(delta(f"gc_sum_{generation}") for generation in "012"),
        gc_full_collections=int(delta("gc_count_2")),
    )


def envtest_kubeconfig(given: Path | None) -> Path:
    """``given``, else the running envtest's admin kubeconfig (exits when none runs)."""
    if given is not None:
        return given
    state = controlplane.status(controlplane.default_run_dir()).state
    if state is None:
        sys.exit("no envtest running: start one with `kubetrain envtest start`")
    return state.kubeconfig


@contextlib.contextmanager
def bench_cluster(kubeconfig: Path) -> Iterator[None]:
    """kubetrain's CRDs installed and, while the bench runs, one roomy node: envtest's two nodes take 110
    pods each, and without room for every pod the scheduler's retries of thousands of unschedulable pods, and
    the operator's warnings about them, would be measured too."""
    with KubeApi.from_kubeconfig(kubeconfig) as api:
        install_crds(api, ROOT / "manifests" / "crds")
        version = str(api.get("/version")["gitVersion"])
        roomy = fake_node(BENCH_NODE, 9, NodeShape(cpu="1000", memory="4Ti", pods=10_000, gpus=0), version)
        api.create("/api/v1/nodes", roomy)
        try:
            yield
        finally:
            api.delete(f"/api/v1/nodes/{BENCH_NODE}")


def record_run(run: Any, results: Path | None) -> None:
    """One run's figures as a JSON line on stderr (progress while a long bench goes on) and, with
    ``--results``, appended to that file, so that runs over several sessions make one table."""
    line = json.dumps(asdict(run))
    print(line, file=sys.stderr, flush=True)
    if results:
        with results.open("a") as file:
            file.write(line + "\n")


def markdown(results: list[Result]) -> str:
    lines = [
        "| N jobs | plain client (jobs/s) | operator (jobs/s) | operator / plain | reaction p50 "
        "| reaction p99 | plain reaction p50 / p99 | API requests / job | object writes / object "
        "| status writes / job | events / job | peak RSS | operator CPU / job (create, react) "
        "| GC pauses (full collections) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.jobs} | {r.plain_jobs_per_s:.1f} | {r.operator_jobs_per_s:.1f} "
            f"| {r.operator_jobs_per_s / r.plain_jobs_per_s:.0%} | {r.p50_ms:.0f} ms | {r.p99_ms:.0f} ms "
            f"| {r.plain_p50_ms:.0f} / {r.plain_p99_ms:.0f} ms "
            f"| {r.requests_per_job:.1f} | {r.object_writes_per_object:.2f} | {r.status_writes_per_job:.1f} "
            f"| {r.events_per_job:.1f} | {r.peak_rss_mb:.0f} MB "
            f"| {r.create_cpu_ms_per_job:.0f} ms, {r.reaction_cpu_ms_per_job:.1f} ms "
            f"| {r.gc_pause_s:.2f} s ({r.gc_full_collections}) |"
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
    parser.add_argument(
        "--gc-young-threshold", type=int, help="the operator's flag of that name (default: its default)"
    )
    args = parser.parse_args()
    kubeconfig = envtest_kubeconfig(args.kubeconfig)
    operator_args: tuple[str, ...] = ()
    if args.gc_young_threshold is not None:
        operator_args = ("--gc-young-threshold", str(args.gc_young_threshold))
    results = []
    with bench_cluster(kubeconfig):
        for jobs in args.jobs:
            result = asyncio.run(
                measure(
                    kubeconfig, jobs, args.controller_threads, args.metrics_port, args.profile, operator_args
                )
            )
            results.append(result)
            print(json.dumps(result.__dict__), file=sys.stderr, flush=True)
    if args.markdown:
        print(markdown(results))


if __name__ == "__main__":
    main()
