"""kubetrain's operator beside upstream's training-operator v1.9.0, on the same machine, alternately.

For each setting (``defaults``: each operator as it ships; ``best``: upstream ``--controller-threads 32``,
which has no QPS flag, and kubetrain ``--controller-threads 32 --kube-api-qps 0``), each N and each run, both
operators are measured one after the other (the order alternating between runs), each on a fresh envtest
(``docs/development.md``: a reused one ends with its controller-manager busy deleting the last run's
objects), with the same CRDs (upstream's, from its module) and the same harness as
``bench/operator_throughput.py``: N PyTorchJobs (1 master + 3 workers) posted at once, 16 in flight.

Reported per operator, and as the ratio kubetrain / upstream:

- jobs/s until every pod and service exists;
- reaction p50 / p99: each master pod set Running (16 patches in flight, on a settled operator) until the
  job's Running condition is seen;
- peak RSS of the operator process; its CPU seconds per job while creating.

Upstream runs out of cluster as its Deployment would run it, less the kubelet, as the conformance tier runs
it (``kubetrain.envtest.peers``: its namespace, the webhook Secret its cert rotator fills, a webhook
configuration the API server never calls, the certificate where a volume mount would put it). It is ready
when its PyTorchJob controller runs its workers.

Usage (builds upstream on first use; one command runs it all, a few minutes per N = 500 pair)::

    .venv/bin/python bench/operator_side_by_side.py --jobs 100 500 --runs 2 --markdown
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from operator_throughput import (
    BENCH_NODE,
    CREATE_CONCURRENCY,
    OBJECTS_PER_JOB,
    Watcher,
    count,
    cpu_seconds,
    create_namespace,
    delete_namespace,
    percentile,
    plain_client_rate,
    plain_reaction,
    post_all,
    pytorch_job,
    react,
    sample_rss,
    wait_until,
)

from kubetrain.envtest import peers
from kubetrain.envtest.crds import install_crds
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.nodes import NodeShape, fake_node
from kubetrain.kube.runtime.client import KubeClient, connect

ROOT = Path(__file__).resolve().parents[1]
KUBETRAIN = Path(sys.executable).parent / "kubetrain"
KUBETRAIN_READY = "caches synced"

SETTINGS: dict[str, dict[str, list[str]]] = {
    "defaults": {"upstream": [], "kubetrain": []},
    "best": {
        "upstream": ["--controller-threads", "32"],
        "kubetrain": ["--controller-threads", "32", "--kube-api-qps", "0"],
    },
}


@dataclass
class Run:
    operator: str
    setting: str
    jobs: int
    jobs_per_s: float
    p50_ms: float
    p99_ms: float
    peak_rss_mb: float
    create_cpu_ms_per_job: float
    load: tuple[float, float, float]
    plain_p99_ms: float | None = None
    """The floor on this envtest, before the operator started: a client that writes each job's status the
    moment its pod watch shows the master Running (no cache, no engine), p99 over N jobs."""


def envtest(command: str, run_dir: Path) -> str:
    done = subprocess.run(
        [str(KUBETRAIN), "envtest", command, "--dir", str(run_dir)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"kubetrain envtest {command} failed: {done.stderr[-2000:]}")
    return done.stdout.strip()


async def start_operator(
    operator: str, flags: list[str], kubeconfig: Path, namespace: str, log: Path
) -> subprocess.Popen[bytes]:
    if operator == "kubetrain":
        command = [str(KUBETRAIN), "operator", "--kubeconfig", str(kubeconfig), "--namespace", namespace]
        command += ["--enable-scheme", "pytorchjob", "--health-probe-bind-address", "0"]
        command += ["--metrics-bind-address", "0", *flags]
        process = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT)
        await wait_until(lambda: KUBETRAIN_READY in log.read_text(), 60, "kubetrain operator start")
        return process
    # Upstream as the conformance tier runs it (kubetrain.envtest.peers: its webhook Secret, its certificate
    # mounted, a webhook configuration the API server never calls), in a thread: it blocks until ready.
    with KubeApi.from_kubeconfig(kubeconfig) as api:
        started = await asyncio.to_thread(
            peers.start_training_operator, api, kubeconfig, namespace, log, ["pytorchjob"], flags
        )
    return started.process


async def settle(pid: int, client: KubeClient, namespace: str, jobs: int, timeout: float = 300) -> None:
    """Until every job has a Created condition and the operator used under 2 % of a core for a second: the
    same test for both operators (upstream has no work-queue metric to scrape)."""
    path = f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        items = (await client.http.get(path)).json().get("items") or []
        created = sum(
            any(c.get("type") == "Created" for c in (item.get("status") or {}).get("conditions") or [])
            for item in items
        )
        before = cpu_seconds(pid)
        await asyncio.sleep(1.0)
        if created >= jobs and cpu_seconds(pid) - before < 0.02:
            return
    raise TimeoutError("the operator did not settle")


async def plain_floor(client: KubeClient, jobs: int) -> float:
    """The plain client's reaction p99 on upstream's CRDs, in a namespace deleted (and gone) before the
    operator starts, so it takes nothing from the operator's run."""
    namespace = f"bench-plain-{secrets.token_hex(3)}"
    await create_namespace(client, namespace)
    try:
        await plain_client_rate(client, namespace, jobs)  # the pods whose masters the reaction sets Running
        return percentile(await plain_reaction(client, namespace, jobs), 0.99)
    finally:
        await delete_namespace(client, namespace)


async def measure(operator: str, setting: str, jobs: int, kubeconfig: Path) -> Run:
    client = connect(kubeconfig, qps=0, burst=1, timeout=60)
    plain_p99 = await plain_floor(client, jobs)
    namespace = f"bench-{operator}-{secrets.token_hex(3)}"
    await create_namespace(client, namespace)
    log = Path(f"/tmp/kubetrain-side-by-side-{namespace}.log")
    load = os.getloadavg()
    process = await start_operator(operator, SETTINGS[setting][operator], kubeconfig, namespace, log)
    peak = [0]
    sampler = asyncio.create_task(sample_rss(process.pid, peak))
    watcher = Watcher(client, namespace)
    watches = watcher.start()
    try:
        cpu_at_start = cpu_seconds(process.pid)
        started = time.monotonic()
        collection = f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs"
        await post_all(
            client,
            [(collection, pytorch_job(f"job-{i}", namespace)) for i in range(jobs)],
            CREATE_CONCURRENCY,
        )
        expected = jobs * OBJECTS_PER_JOB // 2
        base = f"/api/v1/namespaces/{namespace}"
        while (
            await count(client, f"{base}/pods") < expected
            or await count(client, f"{base}/services") < expected
        ):
            if time.monotonic() - started > 900:
                raise TimeoutError(f"{operator}: not every pod and service exists after 900 s")
            await asyncio.sleep(0.05)
        rate = jobs / (time.monotonic() - started)
        created_cpu = cpu_seconds(process.pid) - cpu_at_start
        await settle(process.pid, client, namespace, jobs)
        latencies = await react(client, namespace, [f"job-{i}" for i in range(jobs)], watcher)
    finally:
        for task in [*watches, sampler]:
            task.cancel()
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(30)
        process.kill()
        await client.aclose()
    return Run(
        operator=operator,
        setting=setting,
        jobs=jobs,
        jobs_per_s=rate,
        p50_ms=statistics.median(latencies),
        p99_ms=percentile(latencies, 0.99),
        peak_rss_mb=peak[0] / 2**20,
        create_cpu_ms_per_job=created_cpu * 1000 / jobs,
        load=load,
        plain_p99_ms=plain_p99,
    )


def one_run(operator: str, setting: str, jobs: int, run_dir: Path, crds: Path) -> Run:
    """On a fresh envtest, stopped afterwards whatever happens."""
    kubeconfig = Path(envtest("start", run_dir).splitlines()[-1])
    try:
        with KubeApi.from_kubeconfig(kubeconfig) as api:
            install_crds(api, crds)
            version = str(api.get("/version")["gitVersion"])
            # Room for every pod: the scheduler's retries of unschedulable pods would be measured too.
            shape = NodeShape(cpu="1000", memory="4Ti", pods=10_000, gpus=0)
            api.create("/api/v1/nodes", fake_node(BENCH_NODE, 9, shape, version))
        return asyncio.run(measure(operator, setting, jobs, kubeconfig))
    finally:
        envtest("stop", run_dir)


def ratio_rows(runs: list[Run]) -> list[str]:
    rows = []
    for setting in SETTINGS:
        for jobs in sorted({r.jobs for r in runs}):
            pairs = [
                (k, u)
                for k, u in zip(
                    [r for r in runs if (r.operator, r.setting, r.jobs) == ("kubetrain", setting, jobs)],
                    [r for r in runs if (r.operator, r.setting, r.jobs) == ("upstream", setting, jobs)],
                    strict=False,
                )
            ]
            for index, (k, u) in enumerate(pairs, 1):
                rows.append(
                    f"| {setting} | {jobs} | {index} | {k.load[0]:.1f} / {u.load[0]:.1f} "
                    f"| {k.jobs_per_s:.2f} / {u.jobs_per_s:.2f} = **{k.jobs_per_s / u.jobs_per_s:.2f}x** "
                    f"| {k.p50_ms:.0f} / {u.p50_ms:.0f} ms = **{k.p50_ms / u.p50_ms:.2f}x** "
                    f"| {k.p99_ms:.0f} / {u.p99_ms:.0f} ms = **{k.p99_ms / u.p99_ms:.2f}x** "
                    f"| {k.peak_rss_mb:.0f} / {u.peak_rss_mb:.0f} MB "
                    f"= **{k.peak_rss_mb / u.peak_rss_mb:.2f}x** "
                    f"| {k.create_cpu_ms_per_job:.1f} / {u.create_cpu_ms_per_job:.1f} ms "
                    f"= **{k.create_cpu_ms_per_job / u.create_cpu_ms_per_job:.2f}x** "
                    f"| {_ms(k.plain_p99_ms)} / {_ms(u.plain_p99_ms)} |"
                )
    return rows


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def markdown(runs: list[Run]) -> str:
    header = [
        "| settings | N | run | load avg (kubetrain / upstream) | jobs/s until pods + services exist "
        "| reaction p50 | reaction p99 | peak RSS | CPU / job (create) "
        "| plain-client reaction p99 (on each run's envtest) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    return "\n".join(header + ratio_rows(runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[100, 500])
    parser.add_argument("--runs", type=int, default=2, help="pairs per setting and N")
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS))
    parser.add_argument("--dir", type=Path, default=Path("/tmp/kubetrain-side-by-side-envtest"))
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--results", type=Path, help="append each run as a JSON line here")
    parser.add_argument("--table-from", type=Path, help="only print the table of the runs in this file")
    args = parser.parse_args()
    if args.table_from:
        lines = args.table_from.read_text().splitlines()
        print(
            markdown([Run(**{**json.loads(line), "load": tuple(json.loads(line)["load"])}) for line in lines])
        )
        return
    peers.TRAINING_OPERATOR.ensure_built()  # before the first measurement, not during it
    crds = peers.TRAINING_OPERATOR.crds_dir()
    runs: list[Run] = []
    for setting in args.settings:
        for jobs in args.jobs:
            for index in range(args.runs):
                order = ["upstream", "kubetrain"] if index % 2 == 0 else ["kubetrain", "upstream"]
                for operator in order:
                    run = one_run(operator, setting, jobs, args.dir, crds)
                    runs.append(run)
                    line = json.dumps(asdict(run))
                    print(line, file=sys.stderr, flush=True)
                    if args.results:
                        with args.results.open("a") as results:
                            results.write(line + "\n")
    if args.markdown:
        print(markdown(runs))


if __name__ == "__main__":
    main()
