"""kubetrain's TrainJob controller beside Kubeflow Trainer v2.3.0's, on the same machine, one after the other.

N TrainJobs on the built-in ``torch-distributed`` runtime (2 nodes each) are posted as fast as a client
posts (16 in flight, as every side-by-side bench here), against kubetrain's operator and against Trainer's
controller manager (built from its Go module by ``kubetrain.envtest.peers``), each at its shipped
defaults: ``kubetrain operator`` with no tuning flag (32 workers, 200 requests/s), Trainer with its release's
configuration (5 TrainJob workers, 50 requests/s, burst 100, its webhooks on). Each side runs on a fresh
envtest (Trainer reconciles every namespace, so the two cannot share one), with the same CRDs and runtimes:
Trainer's, from its module and its release's runtimes overlay.

No JobSet controller runs on either side: what is measured ends at the JobSet's creation, and a JobSet
controller would spend the same two cores making each JobSet's Jobs, Service and pods inside the measured
window, then feed JobSet status back to the operator under test; its own webhooks would slow both sides'
JobSet writes alike. Both operators are measured on the same path, TrainJob to runtime snapshot and JobSet.

Reported per side, and as the ratio kubetrain / Trainer:

- TrainJobs/s until every JobSet exists (from the first POST to the last JobSet seen on a watch), and how
  long the POSTs alone took (Trainer's admission webhooks are in that path, kubetrain has none);
- reaction in the burst, p50 / p95: each TrainJob's POST answered, until its JobSet was seen on the watch;
- reaction one at a time, p50 / p95: N more TrainJobs on the settled operator, each posted once the previous
  one's JobSet was seen;
- the operator process's CPU per TrainJob (user + system) in the burst: until every JobSet exists, and until
  it settled (under 2 % of a core for a second); its peak RSS.

Usage (builds Trainer on first use; one pair takes about two minutes)::

    .venv/bin/python bench/trainjob_side_by_side.py --jobs 100 --runs 2 --markdown
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from operator_side_by_side import KUBETRAIN_READY, envtest
from operator_throughput import (
    CREATE_CONCURRENCY,
    Watcher,
    cpu_seconds,
    create_namespace,
    percentile,
    record_run,
    sample_rss,
    wait_until,
)

from kubetrain.envtest import binaries, jobset, peers
from kubetrain.envtest.crds import install_crd_files
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.kube.runtime.client import KubeClient, connect, raise_for_status

KUBETRAIN = Path(sys.executable).parent / "kubetrain"
SIDES = ("trainer", "kubetrain")
RUNTIME = "torch-distributed"
NODES = 2
TRAINJOBS = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets"
SETTLE_TIMEOUT = 300.0


def trainjob(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": RUNTIME},
            "trainer": {"numNodes": NODES, "command": ["torchrun", "train.py"]},
        },
    }


@dataclass
class Run:
    side: str
    """``kubetrain`` or ``trainer``."""
    jobs: int
    jobs_per_s: float
    posts_s: float
    """Seconds the client took to post the N TrainJobs (answered)."""
    burst_p50_ms: float
    burst_p95_ms: float
    single_p50_ms: float
    single_p95_ms: float
    create_cpu_ms_per_job: float
    settled_cpu_ms_per_job: float
    peak_rss_mb: float
    load: tuple[float, float, float]
    """The load average as the side's operator started."""


@dataclass
class JobSetWatch:
    """When each JobSet was first seen, on a watch of the namespace's JobSets."""

    seen_at: dict[str, float] = field(default_factory=dict)

    def on_event(self, _: str, obj: dict[str, Any]) -> None:
        self.seen_at.setdefault(obj["metadata"]["name"], time.monotonic())

    def seen(self, *names: str) -> Callable[[], bool]:
        return lambda: all(name in self.seen_at for name in names)


async def post(client: KubeClient, collection: str, name: str) -> float:
    response = await client.http.post(collection, json=trainjob(name))
    raise_for_status(response, response.content)
    return time.monotonic()


async def post_burst(client: KubeClient, collection: str, names: list[str]) -> dict[str, float]:
    """Every TrainJob posted, 16 in flight; when each POST was answered."""
    gate = asyncio.Semaphore(CREATE_CONCURRENCY)
    created: dict[str, float] = {}

    async def one(name: str) -> None:
        async with gate:
            created[name] = await post(client, collection, name)

    await asyncio.gather(*(one(name) for name in names))
    return created


async def settle(pid: int, timeout: float = SETTLE_TIMEOUT) -> None:
    """Until the operator used under 2 % of a core for a second."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = cpu_seconds(pid)
        await asyncio.sleep(1.0)
        if cpu_seconds(pid) - before < 0.02:
            return
    raise TimeoutError(f"the operator did not settle within {timeout:.0f} s")


async def start_side(
    side: str, api: KubeApi, kubeconfig: Path, namespace: str, log: Path
) -> peers.PeerProcess:
    """The side's operator, once it works; Trainer's webhook configurations are removed through ``api`` when
    it stops."""
    if side == "kubetrain":
        command = [str(KUBETRAIN), "operator", "--kubeconfig", str(kubeconfig), "--namespace", namespace]
        command += ["--health-probe-bind-address", "0", "--metrics-bind-address", "0"]
        process = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT)
        await wait_until(lambda: KUBETRAIN_READY in log.read_text(), 60, "kubetrain operator start")
        return peers.PeerProcess("kubetrain", process, log)
    return await asyncio.to_thread(peers.start_trainer, api, kubeconfig, namespace, log)


async def measure(side: str, jobs: int, api: KubeApi, kubeconfig: Path) -> Run:
    client = connect(kubeconfig, qps=0, burst=1, timeout=60)
    namespace = f"bench-{side}-{secrets.token_hex(3)}"
    await create_namespace(client, namespace)
    log = Path(f"/tmp/kubetrain-trainjob-side-by-side-{namespace}.log")
    load = os.getloadavg()
    process = await start_side(side, api, kubeconfig, namespace, log)
    peak = [0]
    sampler = asyncio.create_task(sample_rss(process.pid, peak))
    watch = JobSetWatch()
    watcher = Watcher(client, namespace)
    watches = [asyncio.create_task(watcher.watch(JOBSETS.format(namespace=namespace), watch.on_event))]
    collection = TRAINJOBS.format(namespace=namespace)
    try:
        await asyncio.sleep(1.0)  # the watch listed and open
        burst = [f"burst-{i}" for i in range(jobs)]
        cpu_at_start = cpu_seconds(process.pid)
        started = time.monotonic()
        created = await post_burst(client, collection, burst)
        posted = time.monotonic() - started
        await wait_until(watch.seen(*burst), 600, "every JobSet")
        rate = jobs / (max(watch.seen_at[name] for name in burst) - started)
        create_cpu = cpu_seconds(process.pid) - cpu_at_start
        await settle(process.pid)
        settled_cpu = cpu_seconds(process.pid) - cpu_at_start
        burst_ms = [(watch.seen_at[name] - created[name]) * 1000 for name in burst]

        single_ms = []
        for i in range(jobs):
            name = f"single-{i}"
            answered = await post(client, collection, name)
            await wait_until(watch.seen(name), 60, f"the JobSet of {name}")
            single_ms.append((watch.seen_at[name] - answered) * 1000)
    finally:
        for task in [*watches, sampler]:
            task.cancel()
        process.stop(timeout=30)
        await client.aclose()
    return Run(
        side=side,
        jobs=jobs,
        jobs_per_s=rate,
        posts_s=posted,
        burst_p50_ms=statistics.median(burst_ms),
        burst_p95_ms=percentile(burst_ms, 0.95),
        single_p50_ms=statistics.median(single_ms),
        single_p95_ms=percentile(single_ms, 0.95),
        create_cpu_ms_per_job=create_cpu * 1000 / jobs,
        settled_cpu_ms_per_job=settled_cpu * 1000 / jobs,
        peak_rss_mb=peak[0] / 2**20,
        load=load,
    )


def one_run(side: str, jobs: int, run_dir: Path) -> Run:
    """On a fresh envtest with Trainer's CRDs and runtimes and JobSet's CRD, stopped afterwards whatever
    happens."""
    kubeconfig = Path(envtest("start", run_dir).splitlines()[-1])
    try:
        with KubeApi.from_kubeconfig(kubeconfig) as api:
            install_crd_files(api, sorted(peers.TRAINER.crds_dir().glob("trainer.kubeflow.org_*.yaml")))
            install_crd_files(api, [jobset.crd_path()])
            peers.install_trainer_runtimes(api, binaries.locate().kubectl)
            return asyncio.run(measure(side, jobs, api, kubeconfig))
    finally:
        envtest("stop", run_dir)


def _ratio(kubetrain: float, trainer: float, unit: str, digits: int = 0) -> str:
    return f"{kubetrain:.{digits}f} / {trainer:.{digits}f}{unit} = **{kubetrain / trainer:.2f}x**"


def markdown(runs: list[Run]) -> str:
    rows = [
        "| N | pair | load avg (kubetrain / Trainer) | TrainJobs/s until every JobSet exists | POSTs took "
        "| burst reaction p50 | burst reaction p95 | one-at-a-time reaction p50 | one-at-a-time p95 "
        "| CPU / TrainJob (until every JobSet / settled) | peak RSS |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for jobs in sorted({r.jobs for r in runs}):
        pairs = zip(
            [r for r in runs if (r.side, r.jobs) == ("kubetrain", jobs)],
            [r for r in runs if (r.side, r.jobs) == ("trainer", jobs)],
            strict=False,
        )
        for index, (k, t) in enumerate(pairs, 1):
            rows.append(
                f"| {jobs} | {index} | {k.load[0]:.1f} / {t.load[0]:.1f} "
                f"| {_ratio(k.jobs_per_s, t.jobs_per_s, '', 1)} "
                f"| {k.posts_s:.1f} / {t.posts_s:.1f} s "
                f"| {_ratio(k.burst_p50_ms, t.burst_p50_ms, ' ms')} "
                f"| {_ratio(k.burst_p95_ms, t.burst_p95_ms, ' ms')} "
                f"| {_ratio(k.single_p50_ms, t.single_p50_ms, ' ms')} "
                f"| {_ratio(k.single_p95_ms, t.single_p95_ms, ' ms')} "
                f"| {k.create_cpu_ms_per_job:.1f} / {k.settled_cpu_ms_per_job:.1f} against "
                f"{t.create_cpu_ms_per_job:.1f} / {t.settled_cpu_ms_per_job:.1f} ms "
                f"= **{k.settled_cpu_ms_per_job / t.settled_cpu_ms_per_job:.2f}x** "
                f"| {_ratio(k.peak_rss_mb, t.peak_rss_mb, ' MB')} |"
            )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[100])
    parser.add_argument("--runs", type=int, default=2, help="pairs per N")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/kubetrain-trainjob-side-by-side-envtest"))
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
    peers.TRAINER.ensure_built()  # before the first measurement, not during it
    runs: list[Run] = []
    for jobs in args.jobs:
        for index in range(args.runs):
            order = SIDES if index % 2 == 0 else tuple(reversed(SIDES))
            for side in order:
                run = one_run(side, jobs, args.dir)
                runs.append(run)
                record_run(run, args.results)
    if args.markdown:
        print(markdown(runs))


if __name__ == "__main__":
    main()
