"""The Jobs view with N jobs (default 1,000) on envtest, their status written by the bench (no operator).

Reports, in one run:

- the list's API response: ``GET /api/stream`` until its snapshot of every job has arrived (median of 5);
- first paint of the list page in Chromium: navigation to the table holding every row (median of 3), and the
  browser's own first-contentful-paint;
- a status change to the screen: a job's ``trainerStatus`` written through the status subresource, until
  its row shows the new percentage in the open page (p50 and p99 of ``--changes`` writes, one at a time);
- the dashboard's RSS watching no job, then N jobs, then after the changes.

Usage (an envtest must be running: ``kubetrain envtest start``; Debian's chromium installed)::

    .venv/bin/python bench/dashboard.py --jobs 1000 --markdown
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from operator_throughput import (
    ROOT,
    create_namespace,
    delete_namespace,
    envtest_kubeconfig,
    percentile,
)

from dashboard_process import running_dashboard
from kubetrain.envtest.crds import install_crds
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.kube.runtime.client import KubeClient, connect, raise_for_status

CONCURRENCY = 16
CHROMIUM = "/usr/bin/chromium"
# Functions, not expressions: the page's Content Security Policy forbids the eval an expression needs.
ROWS_AT_LEAST = "(n) => document.querySelectorAll('#jobs tbody tr').length >= n"
CELL_IS = "([selector, text]) => document.querySelector(selector)?.textContent === text"
CELL_IS_NOT = "([selector, text]) => document.querySelector(selector)?.textContent !== text"


def job(name: str, index: int) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "pytorch", "image": "example.com/trainer:1"}]}}
    replicas = {"replicas": 1, "restartPolicy": "OnFailure", "template": template}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "labels": {"bench": "dashboard", "team": f"team-{index % 7}"}},
        "spec": {"pytorchReplicaSpecs": {"Master": replicas, "Worker": {**replicas, "replicas": 3}}},
    }


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status(progress: int) -> dict[str, Any]:
    """What a running job that reports looks like: Created and Running, a percentage, metrics."""
    stamp = now()
    conditions = [
        {
            "type": kind,
            "status": "True",
            "reason": f"PyTorchJob{kind}",
            "message": f"PyTorchJob is {kind.lower()}.",
            "lastTransitionTime": stamp,
            "lastUpdateTime": stamp,
        }
        for kind in ("Created", "Running")
    ]
    trainer = {
        "progressPercentage": progress,
        "estimatedRemainingSeconds": (100 - progress) * 30,
        "metrics": [{"name": "loss", "value": f"{2.0 / (progress + 1):.4f}"}],
        "lastUpdatedTime": stamp,
    }
    return {
        "status": {
            "conditions": conditions,
            "replicaStatuses": {"Worker": {"active": 3}, "Master": {"active": 1}},
            "trainerStatus": trainer,
        }
    }


async def create_jobs(client: KubeClient, namespace: str, count: int) -> None:
    gate = asyncio.Semaphore(CONCURRENCY)
    path = f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs"

    async def one(index: int) -> None:
        name = f"job-{index:04d}"
        async with gate:
            created = await client.http.post(path, json=job(name, index))
            raise_for_status(created, created.content)
            written = await client.http.patch(
                f"{path}/{name}/status",
                json=status(index % 100),
                headers={"Content-Type": "application/merge-patch+json"},
            )
            raise_for_status(written, written.content)

    await asyncio.gather(*(one(i) for i in range(count)))


def stream_snapshot(url: str) -> tuple[float, int, int]:
    """Seconds until the list's snapshot arrived, its job count and its size in bytes."""
    started = time.perf_counter()
    with httpx.stream("GET", f"{url}api/stream", timeout=60) as response:
        lines = response.iter_lines()
        for line in lines:
            if line == "event: snapshot":
                data = next(lines).removeprefix("data: ")
                return time.perf_counter() - started, len(json.loads(data)["jobs"]), len(data)
    raise RuntimeError("no snapshot")


@dataclass
class Result:
    jobs: int
    api_seconds: float
    snapshot_bytes: int
    paint_seconds: float
    first_contentful_paint_ms: float
    change_p50: float
    change_p99: float
    changes: int
    rss_empty_mib: float
    rss_jobs_mib: float
    rss_after_mib: float
    load: tuple[float, float, float]


def measure_page(
    url: str, api: KubeApi, namespace: str, jobs: int, changes: int
) -> tuple[float, float, list[float]]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        paints: list[float] = []
        fcp = 0.0
        for _ in range(3):
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            started = time.perf_counter()
            page.goto(url)
            page.wait_for_function(ROWS_AT_LEAST, arg=jobs, timeout=120_000)
            paints.append(time.perf_counter() - started)
            fcp = float(
                page.evaluate("performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? 0")
            )
            if len(paints) < 3:
                page.close()
        latencies = []
        path = f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs"
        for change in range(changes):
            name = f"job-{(change * 37) % jobs:04d}"
            value = 100 if change % 2 else 99  # alternates, so every write changes what the row shows
            cell = f'tr[data-id="cluster/{namespace}/pytorchjobs.v1/{name}"] .pct'
            page.wait_for_function(CELL_IS_NOT, arg=[cell, f"{value}%"])
            started = time.perf_counter()
            api.patch(f"{path}/{name}/status", status(value))
            page.wait_for_function(CELL_IS, arg=[cell, f"{value}%"], polling="raf", timeout=30_000)
            latencies.append(time.perf_counter() - started)
        browser.close()
    return statistics.median(paints), fcp, latencies


def rss_mib(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


def run(kubeconfig: Path, jobs: int, changes: int, log: Path) -> Result:
    namespace = f"bench-dashboard-{secrets.token_hex(3)}"
    with KubeApi.from_kubeconfig(kubeconfig) as api:
        install_crds(api, ROOT / "manifests" / "crds")

    async def setup() -> None:
        client = connect(kubeconfig, qps=0)
        try:
            await create_namespace(client, namespace)
        finally:
            await client.aclose()

    asyncio.run(setup())
    arguments = ["--no-local", "--namespace", namespace, "--kubeconfig", str(kubeconfig)]
    try:
        with running_dashboard(*arguments, log=log) as dashboard, KubeApi.from_kubeconfig(kubeconfig) as api:
            pid = dashboard.process.pid
            stream_snapshot(dashboard.url)
            rss_empty = rss_mib(pid)

            async def fill() -> None:
                client = connect(kubeconfig, qps=0)
                try:
                    await create_jobs(client, namespace, jobs)
                finally:
                    await client.aclose()

            asyncio.run(fill())
            deadline = time.monotonic() + 120
            while stream_snapshot(dashboard.url)[1] < jobs:
                if time.monotonic() > deadline:
                    raise RuntimeError("the dashboard did not list every job within 120 s")
                time.sleep(0.5)
            rss_jobs = rss_mib(pid)
            samples = [stream_snapshot(dashboard.url) for _ in range(5)]
            paint, fcp, latencies = measure_page(dashboard.url, api, namespace, jobs, changes)
            rss_after = rss_mib(pid)
    finally:

        async def teardown() -> None:
            client = connect(kubeconfig, qps=0)
            try:
                await delete_namespace(client, namespace)
            finally:
                await client.aclose()

        asyncio.run(teardown())
    return Result(
        jobs=jobs,
        api_seconds=statistics.median(s[0] for s in samples),
        snapshot_bytes=samples[0][2],
        paint_seconds=paint,
        first_contentful_paint_ms=fcp,
        change_p50=percentile(latencies, 0.5),
        change_p99=percentile(latencies, 0.99),
        changes=len(latencies),
        rss_empty_mib=rss_empty,
        rss_jobs_mib=rss_jobs,
        rss_after_mib=rss_after,
        load=os.getloadavg(),
    )


def markdown(result: Result) -> str:
    return "\n".join(
        [
            "| N jobs | list API (snapshot, size) | list page: every row painted (first contentful paint) "
            "| status change → screen p50 / p99 | dashboard RSS: no job / N jobs / after the changes "
            "| load |",
            "|---|---|---|---|---|---|",
            f"| {result.jobs} | {result.api_seconds * 1000:.0f} ms ({result.snapshot_bytes / 1024:.0f} KiB) "
            f"| {result.paint_seconds * 1000:.0f} ms ({result.first_contentful_paint_ms:.0f} ms) "
            f"| {result.change_p50 * 1000:.0f} / {result.change_p99 * 1000:.0f} ms "
            f"({result.changes} changes) "
            f"| {result.rss_empty_mib:.0f} / {result.rss_jobs_mib:.0f} / {result.rss_after_mib:.0f} MiB "
            f"| {' '.join(f'{x:.1f}' for x in result.load)} |",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--changes", type=int, default=40)
    parser.add_argument("--kubeconfig", type=Path)
    parser.add_argument("--log", type=Path, default=Path("/tmp/bench-dashboard.log"))
    parser.add_argument("--markdown", action="store_true")
    options = parser.parse_args()
    result = run(envtest_kubeconfig(options.kubeconfig), options.jobs, options.changes, options.log)
    print(markdown(result) if options.markdown else result)


if __name__ == "__main__":
    main()
