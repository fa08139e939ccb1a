"""The status endpoint's cost: a 1,000-pod job whose every pod reports every second, against envtest.

One PyTorchJob of ``--pods`` replicas (the operator creates the pods; envtest's scheduler binds them to a
roomy fake node), a token minted for each pod with the TokenRequest API (pod-bound, the job's audience, as
the kubelet would project it), and one simulated reporter per pod: a coroutine that POSTs a report every
``--interval`` seconds over HTTPS, verifying the endpoint against the CA from the namespace's ConfigMap.
By default each report opens a new TLS connection, as a stdlib reporter (``urllib``) does; ``--keep-alive``
reuses connections. After a warm-up (the first reviews of a thousand new tokens are rate-limited), it
measures over ``--seconds``:

- reports answered per second by code (200, 429: one job may send 20 a second after a burst of 40, so a
  1,000-pod job is mostly refused, cheaply, by design), from the reporters' side;
- status writes per second to the API server (the operator's ``kubetrain_status_api_requests{method="PATCH"}``
  and ``kubetrain_status_writes{result="written"}``) and every other request the endpoint made;
- the operator's CPU (user + system seconds per second of wall time), its RSS before the reports and at
  their peak, and the connections it refused at its bound (``listener.MAX_CONNECTIONS``);
- reconcile latency of other jobs created meanwhile: from a small job's creation to its ``Created``
  condition (its first reconcile's status write), p50 and p99 over ``--other-jobs`` jobs created one every
  half second, measured once before the reporters start (the baseline, with the big job and its pods already
  in the operator's caches) and once while they report.

It runs the operator once per ``--mode``, each on a fresh namespace: by default with the endpoint on a thread
of its own (``endpoint.OWN_THREAD``, the operator's default) and on the reconcilers' event loop. The reporters
run in a process of their own at niceness 19 (``--reporters-nice``), so that on a small machine the
operator's CPU is taken by the reports it receives, not by the simulation of the pods that send them.

Usage (an envtest must be running: ``kubetrain envtest start``)::

    .venv/bin/python bench/status_endpoint.py --markdown
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import ssl
import statistics
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psutil
from operator_throughput import (
    CREATE_CONCURRENCY,
    KUBETRAIN,
    Watcher,
    bench_cluster,
    create_namespace,
    delete_namespace,
    envtest_kubeconfig,
    percentile,
    post_all,
    pytorch_job,
    sample_rss,
    wait_until,
)

from kubetrain.kube.runtime.client import KubeClient, connect, raise_for_status

STATUS_PORT = 38443
METRICS_PORT = 38090
OTHER_JOB_SPACING = 0.5


@dataclass
class Phase:
    """Reconcile latencies (creation → Created) of the jobs created in one phase, in ms."""

    latencies_ms: list[float] = field(default_factory=list)

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies_ms)

    @property
    def p99(self) -> float:
        return percentile(self.latencies_ms, 0.99)


@dataclass
class Result:
    mode: str
    pods: int
    interval: float
    keep_alive: bool
    seconds: float
    answered_per_s: dict[str, float]
    status_patches_per_s: float
    status_written_per_s: float
    endpoint_requests_per_s: float
    operator_cpu: float
    bench_cpu: float
    rss_before_mb: float
    peak_rss_mb: float
    connections_refused_per_s: float
    baseline: Phase
    during: Phase
    history_writes: float


def big_job(name: str, namespace: str, pods: int) -> dict[str, Any]:
    template = {
        "spec": {
            "serviceAccountName": "default",
            "containers": [{"name": "pytorch", "image": "x.invalid/t:1"}],
        }
    }
    replicas = {"Master": {"replicas": 1, "template": template}}
    if pods > 1:
        replicas["Worker"] = {"replicas": pods - 1, "template": template}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"pytorchReplicaSpecs": replicas},
    }


def scrape_status(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        if match := re.match(r'^kubetrain_status_(\w+)\{(\w+)="([^"]+)"\} (\S+)$', line):
            values[f"{match.group(1)}:{match.group(3)}"] = float(match.group(4))
        elif match := re.match(r"^kubetrain_status_(\w+) (\S+)$", line):
            values[match.group(1)] = float(match.group(2))
    return values


async def pod_names(client: KubeClient, namespace: str, job: str) -> list[dict[str, Any]]:
    path = f"/api/v1/namespaces/{namespace}/pods"
    response = await client.http.get(path, params={"labelSelector": f"training.kubeflow.org/job-name={job}"})
    raise_for_status(response, response.content)
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def mint_tokens(client: KubeClient, pods: list[dict[str, Any]], audience: str) -> list[str]:
    gate = asyncio.Semaphore(CREATE_CONCURRENCY)

    async def mint(pod: dict[str, Any]) -> str:
        metadata = pod["metadata"]
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": [audience],
                "expirationSeconds": 3600,
                "boundObjectRef": {
                    "kind": "Pod",
                    "apiVersion": "v1",
                    "name": metadata["name"],
                    "uid": metadata["uid"],
                },
            },
        }
        path = f"/api/v1/namespaces/{metadata['namespace']}/serviceaccounts/default/token"
        async with gate:
            response = await client.http.post(path, json=body)
        raise_for_status(response, response.content)
        return str(response.json()["status"]["token"])

    return list(await asyncio.gather(*(mint(pod) for pod in pods)))


class Reporters:
    """One coroutine per token, each reporting every ``interval`` seconds (start times spread evenly).

    They run in a process of their own (``--reporters-from``), at the lowest CPU priority by default: pods
    on other nodes would take none of the operator's CPU, and here they share its two cores."""

    def __init__(self, url: str, ca: str, tokens: list[str], interval: float, keep_alive: bool) -> None:
        self._url = url
        self._context = ssl.create_default_context(cadata=ca)
        self._tokens = tokens
        self._interval = interval
        self._keep_alive = keep_alive
        self.answered: Counter[str] = Counter()

    async def run(self) -> None:
        connector = aiohttp.TCPConnector(ssl=self._context, limit=0, force_close=not self._keep_alive)
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            await asyncio.gather(*(self._report(session, i, token) for i, token in enumerate(self._tokens)))

    async def _report(self, session: aiohttp.ClientSession, index: int, token: str) -> None:
        await asyncio.sleep(self._interval * index / len(self._tokens))
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        step = 0
        next_at = time.monotonic()
        while True:
            step += 1
            body = json.dumps(
                {
                    "trainerStatus": {
                        "progressPercentage": step % 101,
                        "metrics": [{"name": "loss", "value": "0.5"}],
                    }
                }
            )
            try:
                async with session.post(self._url, data=body, headers=headers) as answer:
                    await answer.read()
                    self.answered[str(answer.status)] += 1
            except (aiohttp.ClientError, TimeoutError) as error:
                self.answered[type(error).__name__] += 1
            next_at += self._interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))


class CreatedWatcher(Watcher):
    """When each job first shows Created=True."""

    created_at: dict[str, float]

    def __init__(self, client: KubeClient, namespace: str) -> None:
        super().__init__(client, namespace)
        self.created_at = {}

    def _on_job(self, _: str, job: dict[str, Any]) -> None:
        name = job["metadata"]["name"]
        conditions = (job.get("status") or {}).get("conditions") or []
        if name not in self.created_at and any(c["type"] == "Created" for c in conditions):
            self.created_at[name] = time.monotonic()


async def create_one_by_one(
    client: KubeClient, namespace: str, prefix: str, count: int, watcher: CreatedWatcher
) -> Phase:
    collection = f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs"
    created: dict[str, float] = {}
    for i in range(count):
        name = f"{prefix}-{i}"
        created[name] = time.monotonic()
        response = await client.http.post(collection, json=pytorch_job(name, namespace))
        raise_for_status(response, response.content)
        await asyncio.sleep(OTHER_JOB_SPACING)
    await wait_until(lambda: all(n in watcher.created_at for n in created), 120, f"{prefix} jobs Created")
    return Phase([(watcher.created_at[n] - at) * 1000 for n, at in created.items()])


def run_reporters(spec_path: Path) -> None:
    """The reporters' process: report until killed, writing the answers' counts to a file every second."""
    spec = json.loads(spec_path.read_text())
    os.nice(spec["nice"])
    counts_path = Path(spec["counts"])
    reporters = Reporters(spec["url"], spec["ca"], spec["tokens"], spec["interval"], spec["keep_alive"])

    async def write_counts() -> None:
        while True:
            await asyncio.sleep(1.0)
            partial = counts_path.with_suffix(".tmp")
            partial.write_text(json.dumps(dict(reporters.answered)))
            partial.replace(counts_path)

    async def both() -> None:
        await asyncio.gather(reporters.run(), write_counts())

    asyncio.run(both())


def reporter_counts(path: Path) -> Counter[str]:
    try:
        return Counter(json.loads(path.read_text()))
    except (OSError, ValueError):
        return Counter()


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


MODES = {
    "own thread": "",
    "reconcilers' loop": "endpoint.OWN_THREAD = False\n",
    "own thread, 1 ms GIL switch": "sys.setswitchinterval(0.001)\n",
}
"""How the operator runs its endpoint: only a module switch, or the interpreter's, differs."""


def operator_command(kubeconfig: Path, namespace: str, mode: str) -> list[str]:
    flags = [
        "operator",
        "--kubeconfig",
        str(kubeconfig),
        "--namespace",
        namespace,
        "--enable-scheme",
        "pytorchjob",
        "--kube-api-qps",
        "0",
        "--metrics-bind-address",
        f"127.0.0.1:{METRICS_PORT}",
        "--health-probe-bind-address",
        "0",
        "--status-server-bind-address",
        f"127.0.0.1:{STATUS_PORT}",
        "--status-server-url",
        f"https://127.0.0.1:{STATUS_PORT}",
        "--status-server-namespace",
        namespace,
    ]
    if not MODES[mode]:
        return [str(KUBETRAIN), *flags]
    program = (
        "import sys\nimport kubetrain.kube.status.endpoint as endpoint\n"
        + MODES[mode]
        + "from kubetrain.cli.main import app\n"
        + f"sys.argv = ['kubetrain', *{flags!r}]\napp()\n"
    )
    return [sys.executable, "-c", program]


async def measure(kubeconfig: Path, mode: str, args: argparse.Namespace) -> Result:
    client = connect(kubeconfig, qps=0, burst=1, timeout=60)
    namespace = f"bench-status-{secrets.token_hex(3)}"
    await create_namespace(client, namespace)
    while (
        await client.http.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/default")
    ).status_code != 200:
        await asyncio.sleep(0.2)
    log = Path(f"/tmp/kubetrain-bench-status-{namespace}.log")
    operator = subprocess.Popen(
        operator_command(kubeconfig, namespace, mode), stdout=log.open("wb"), stderr=subprocess.STDOUT
    )
    process = psutil.Process(operator.pid)
    peak = [0]
    sampler = asyncio.create_task(sample_rss(operator.pid, peak))
    watcher = CreatedWatcher(client, namespace)
    watches = watcher.start()
    reporting: subprocess.Popen[bytes] | None = None
    counts_path = Path(f"/tmp/kubetrain-bench-status-{namespace}.counts")
    try:
        await wait_until(lambda: "caches synced" in log.read_text(), 60, "operator start")
        await post_all(
            client,
            [
                (
                    f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs",
                    big_job("big", namespace, args.pods),
                )
            ],
            1,
        )
        started = time.monotonic()
        while len(pods := await pod_names(client, namespace, "big")) < args.pods:
            if time.monotonic() - started > 600:
                raise TimeoutError("the big job's pods were not all created within 600 s")
            await asyncio.sleep(0.5)
        tokens = await mint_tokens(client, pods, f"kubetrain.dev/status/{namespace}/pytorchjobs/big")
        ca_path = f"/api/v1/namespaces/{namespace}/configmaps/kubetrain-status-ca"
        ca = str((await client.http.get(ca_path)).json()["data"]["ca.crt"])
        url = f"https://127.0.0.1:{STATUS_PORT}/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/big/status"
        # The baseline with the big job and its pods in the caches, only the reports missing.
        baseline = await create_one_by_one(client, namespace, "baseline", args.other_jobs, watcher)
        rss_before = process.memory_info().rss
        peak[0] = 0
        spec_path = counts_path.with_suffix(".spec")
        spec = {"url": url, "ca": ca, "tokens": tokens, "interval": args.interval}
        spec |= {"keep_alive": args.keep_alive, "counts": str(counts_path), "nice": args.reporters_nice}
        spec_path.write_text(json.dumps(spec))
        reporting = subprocess.Popen([sys.executable, __file__, "--reporters-from", str(spec_path)])
        bench = psutil.Process(reporting.pid)
        await asyncio.sleep(args.warm_up)

        before, cpu_before, bench_before = (
            scrape_status(METRICS_PORT),
            cpu_seconds(process),
            cpu_seconds(bench),
        )
        answered_before = reporter_counts(counts_path)
        window_started = time.monotonic()
        during_task = asyncio.create_task(
            create_one_by_one(client, namespace, "during", args.other_jobs, watcher)
        )
        await asyncio.sleep(args.seconds)
        elapsed = time.monotonic() - window_started
        after, cpu_after, bench_after = scrape_status(METRICS_PORT), cpu_seconds(process), cpu_seconds(bench)
        answered_after = reporter_counts(counts_path)
        answered = {k: (v - answered_before.get(k, 0)) / elapsed for k, v in answered_after.items()}
        during = await during_task
    finally:
        if reporting is not None:
            reporting.kill()
            reporting.wait(10)
        for task in [*watches, sampler]:
            task.cancel()
        operator.terminate()
        operator.wait(30)
        await delete_namespace(client, namespace)
        await client.aclose()

    def rate(key: str) -> float:
        return (after.get(key, 0.0) - before.get(key, 0.0)) / elapsed

    endpoint_requests = sum(rate(k) for k in after if k.startswith("api_requests:"))
    return Result(
        mode=mode,
        pods=args.pods,
        interval=args.interval,
        keep_alive=args.keep_alive,
        seconds=elapsed,
        answered_per_s=dict(sorted(answered.items())),
        status_patches_per_s=rate("api_requests:PATCH"),
        status_written_per_s=rate("writes:written"),
        endpoint_requests_per_s=endpoint_requests,
        operator_cpu=(cpu_after - cpu_before) / elapsed,
        bench_cpu=(bench_after - bench_before) / elapsed,
        rss_before_mb=rss_before / 2**20,
        peak_rss_mb=peak[0] / 2**20,
        connections_refused_per_s=rate("connections:refused"),
        baseline=baseline,
        during=during,
        history_writes=after.get("history_writes", 0.0),
    )


def markdown(results: list[Result]) -> str:
    lines = [
        "| endpoint on | reports answered /s (by code) | connections refused /s | status writes /s (PATCH) "
        "| endpoint API requests /s | operator CPU | reporters' CPU | RSS before, peak "
        "| other jobs' reconcile p50 / p99, before | during |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        codes = ", ".join(f"{code}: {value:.0f}" for code, value in r.answered_per_s.items())
        lines.append(
            f"| {r.mode} | {codes} | {r.connections_refused_per_s:.0f} | {r.status_patches_per_s:.2f} "
            f"| {r.endpoint_requests_per_s:.2f} | {r.operator_cpu * 100:.0f} % | {r.bench_cpu * 100:.0f} % "
            f"| {r.rss_before_mb:.0f}, {r.peak_rss_mb:.0f} MB "
            f"| {r.baseline.p50:.0f} / {r.baseline.p99:.0f} ms | {r.during.p50:.0f} / {r.during.p99:.0f} ms |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kubeconfig", type=Path)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between one pod's reports")
    parser.add_argument("--warm-up", type=float, default=30.0)
    parser.add_argument("--seconds", type=float, default=60.0, help="the measured window")
    parser.add_argument("--other-jobs", type=int, default=40)
    parser.add_argument("--keep-alive", action="store_true", help="reuse TLS connections between reports")
    parser.add_argument(
        "--mode", action="append", choices=list(MODES), help="how the operator runs its endpoint (repeatable)"
    )
    parser.add_argument("--reporters-nice", type=int, default=19, help="the reporters' process's niceness")
    parser.add_argument("--reporters-from", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    if args.reporters_from is not None:
        run_reporters(args.reporters_from)
        return
    kubeconfig = envtest_kubeconfig(args.kubeconfig)
    results = []
    with bench_cluster(kubeconfig):
        for mode in args.mode or ["own thread", "reconcilers' loop"]:
            result = asyncio.run(measure(kubeconfig, mode, args))
            print(json.dumps(result.__dict__, default=lambda o: o.__dict__), file=sys.stderr)
            results.append(result)
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in psutil.getloadavg())}")
    if args.markdown:
        print(markdown(results))


if __name__ == "__main__":
    main()
