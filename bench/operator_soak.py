"""Operator soak against envtest: does its heap come back after round upon round of jobs?

Each round makes a namespace, posts N PyTorchJobs (1 master + 3 workers) at once, waits until every pod and
service exists, sets every master Running and waits for each job's Running condition, then deletes the
namespace and waits until it is gone. The operator (one process for every round, watching every namespace)
then holds nothing of the round in its caches, so what it holds after round k should not grow with k: a
leak (a cache that keeps deleted objects, cyclic garbage the tuned collector never reaches) would show as
resident memory climbing round after round.

Reports per round, from the operator's own ``/metrics``: its resident memory once the round's namespace is
gone, and its garbage-collection pauses (all generations, and how many full collections) during the round.

Usage (an envtest must be running: ``kubetrain envtest start``)::

    .venv/bin/python bench/operator_soak.py --rounds 10 --jobs 200 --markdown
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from operator_throughput import (
    CREATE_CONCURRENCY,
    KUBETRAIN,
    OBJECTS_PER_JOB,
    Watcher,
    bench_cluster,
    count,
    create_namespace,
    delete_namespace,
    envtest_kubeconfig,
    post_all,
    pytorch_job,
    react,
    scrape,
    wait_until,
)

from kubetrain.kube.runtime.client import connect


@dataclass
class Round:
    round: int
    rss_mb: float
    """Resident memory once the round's namespace is gone."""
    gc_pause_s: float
    gc_full_collections: int


async def one_round(kubeconfig: Path, jobs: int) -> None:
    client = connect(kubeconfig, qps=0, burst=1, timeout=60)
    namespace = f"bench-soak-{secrets.token_hex(3)}"
    await create_namespace(client, namespace)
    path = f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs"
    watcher = Watcher(client, namespace)
    watches = watcher.start()
    try:
        await post_all(
            client, [(path, pytorch_job(f"job-{i}", namespace)) for i in range(jobs)], CREATE_CONCURRENCY
        )
        expected = jobs * OBJECTS_PER_JOB // 2
        base = f"/api/v1/namespaces/{namespace}"
        deadline = time.monotonic() + 600
        while (
            await count(client, f"{base}/pods") < expected
            or await count(client, f"{base}/services") < expected
        ):
            if time.monotonic() > deadline:
                raise TimeoutError("not every pod and service exists after 600 s")
            await asyncio.sleep(0.2)
        await react(client, namespace, [f"job-{i}" for i in range(jobs)], watcher)
    finally:
        for task in watches:
            task.cancel()
        # The jobs go first: the operator, still running, would re-create the pods deleted under them.
        await client.http.delete(path)
        while await count(client, path):
            await asyncio.sleep(0.5)
        await delete_namespace(client, namespace)
        await client.aclose()


async def settle(port: int) -> None:
    """Until the operator's work queue and event queue are empty on two scrapes 0.5 s apart."""
    quiet = 0
    while quiet < 2:
        await asyncio.sleep(0.5)
        now = scrape(port)
        quiet = quiet + 1 if now.get("queue", 1.0) == 0 and now.get("events_queued", 1.0) == 0 else 0


def soak(kubeconfig: Path, rounds: int, jobs: int, port: int, operator_args: list[str]) -> list[Round]:
    log = Path(f"/tmp/kubetrain-bench-soak-{secrets.token_hex(3)}.log")
    command = [str(KUBETRAIN), "operator", "--kubeconfig", str(kubeconfig), "--enable-scheme", "pytorchjob"]
    command += ["--kube-api-qps", "0", "--metrics-bind-address", f"127.0.0.1:{port}"]
    command += ["--health-probe-bind-address", "0", *operator_args]
    operator = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    results = []
    try:
        asyncio.run(wait_until(lambda: "caches synced" in log.read_text(), 60, "operator start"))
        for number in range(1, rounds + 1):
            before = scrape(port)
            asyncio.run(one_round(kubeconfig, jobs))
            asyncio.run(settle(port))
            after = scrape(port)

            def delta(key: str, before: dict[str, float] = before, after: dict[str, float] = after) -> float:
                return after.get(key, 0.0) - before.get(key, 0.0)

            result = Round(
                round=number,
                rss_mb=after["rss_bytes"] / 2**20,
                gc_pause_s=sum(delta(f"gc_sum_{generation}") for generation in "012"),
                gc_full_collections=int(delta("gc_count_2")),
            )
            results.append(result)
            print(json.dumps(result.__dict__), file=sys.stderr, flush=True)
    finally:
        operator.terminate()
        operator.wait(30)
    return results


def markdown(results: list[Round]) -> str:
    lines = ["| round | RSS after the round | GC pauses in the round (full collections) |", "|---|---|---|"]
    for r in results:
        lines.append(f"| {r.round} | {r.rss_mb:.1f} MB | {r.gc_pause_s:.2f} s ({r.gc_full_collections}) |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=200, help="jobs per round")
    parser.add_argument("--metrics-port", type=int, default=18391)
    parser.add_argument("--kubeconfig", type=Path, help="default: the running envtest's admin kubeconfig")
    parser.add_argument("--gc-young-threshold", type=int, help="the operator's flag (default: its default)")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    kubeconfig = envtest_kubeconfig(args.kubeconfig)
    operator_args = []
    if args.gc_young_threshold is not None:
        operator_args = ["--gc-young-threshold", str(args.gc_young_threshold)]
    with bench_cluster(kubeconfig):
        results = soak(kubeconfig, args.rounds, args.jobs, args.metrics_port, operator_args)
    if args.markdown:
        print(markdown(results))


if __name__ == "__main__":
    main()
