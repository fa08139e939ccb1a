"""What progress reporting costs: a training step's call to the helper, a report's round trip, a run's start.

1. ``ProgressReporter.report_step`` as a training loop calls it, ``--calls`` times in a row, timed one call at
   a time: with no endpoint variables (a script run anywhere), with an endpoint that answers (a local run's,
   the default 5 s interval), with nothing listening (the endpoint down) and with an endpoint that accepts
   connections and never answers (the worst case for a client that waited). The promise is that a step never
   waits for the network: the four should cost the same few microseconds.
2. One report's round trip from a standard-library client (a new TLS connection each time, as the helper
   makes one) to a local run's endpoint (``RunStatusEndpoint`` with a real ``RunTokens``), ``--reports``
   times, the endpoint's rate limits raised so that they do not answer for it.
3. What serving the endpoint adds to ``kubetrain run``'s start: importing it (aiohttp, cryptography) after
   what the runner imports anyway, making the run's credentials and starting the server.

Usage::

    .venv/bin/python bench/progress_reporting.py [--calls 100000] [--reports 200] [--markdown]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kubetrain import reporting
from kubetrain.api.progress import StatusTarget, TrainerStatus
from kubetrain.progress.server import Reporter

STEPS = 1_000_000


class Accepted:
    def __init__(self) -> None:
        self.count = 0

    def accept(self, target: StatusTarget, status: TrainerStatus, reporter: Reporter) -> None:
        self.count += 1


@contextmanager
def local_run_endpoint(directory: Path) -> Iterator[tuple[str, Path, Accepted]]:
    """A local run's endpoint for one replica, in an event loop of its own thread: URL, files, reports."""
    from builders import job  # tests/builders.py: a defaulted job without a manifest
    from kubetrain.engine.admission import admit
    from kubetrain.local.status_access import PROCESS_ACCESS
    from kubetrain.local.status_endpoint import RunStatusEndpoint
    from kubetrain.progress import server

    # The limits are the endpoint's answer to a flood; here they would only measure themselves.
    server.TOKEN_RATE = server.JOB_RATE = 1e9
    accepted = Accepted()
    endpoint = RunStatusEndpoint(
        admit(job("PyTorchJob", {"Master": 1}, name="bench")), ["master-0"], directory, accepted
    )
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(endpoint.start(PROCESS_ACCESS), loop).result(30)
    try:
        yield endpoint.url, endpoint.access("master-0").directory, accepted
    finally:
        asyncio.run_coroutine_threadsafe(endpoint.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


def variables(url: str, files: Path) -> dict[str, str]:
    return {
        reporting.STATUS_SERVER_URL_ENV: url,
        reporting.STATUS_SERVER_CA_CERT_ENV: str(files / "ca.crt"),
        reporting.STATUS_SERVER_TOKEN_ENV: str(files / "token"),
    }


def call_costs(environ: dict[str, str], calls: int) -> tuple[list[float], ProgressStats]:
    reporter = reporting.ProgressReporter(environ=environ, timeout=2.0)
    costs = []
    for step in range(calls):
        started = time.perf_counter()
        reporter.report_step(step + 1, STEPS, {"loss": 1.0 / (step + 1), "lr": 0.001})
        costs.append(time.perf_counter() - started)
    stats = ProgressStats(reporter.sent, reporter.dropped)
    reporter.close(timeout=0)
    return costs, stats


class ProgressStats:
    def __init__(self, sent: int, dropped: int) -> None:
        self.sent, self.dropped = sent, dropped


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def round_trips(url: str, files: Path, reports: int) -> list[float]:
    context = ssl.create_default_context(cafile=str(files / "ca.crt"))
    token = (files / "token").read_text()
    body = json.dumps(
        {"trainerStatus": {"progressPercentage": 50, "metrics": [{"name": "loss", "value": "0.1"}]}}
    )
    times = []
    for _ in range(reports):
        request = urllib.request.Request(
            url, data=body.encode(), headers={"Authorization": f"Bearer {token}"}, method="POST"
        )
        started = time.perf_counter()
        with urllib.request.urlopen(request, context=context, timeout=10) as answer:
            answer.read()
        times.append(time.perf_counter() - started)
    return times


START_PROGRAM = """
import asyncio, sys, tempfile, time
from pathlib import Path
# What the runner imports anyway (the engine, the job models, the substrates): not the endpoint's cost.
import kubetrain.engine.reconciler, kubetrain.local.display, kubetrain.local.substrate
started = time.perf_counter()
from kubetrain.local.status_endpoint import RunStatusEndpoint
from kubetrain.local.status_access import PROCESS_ACCESS
imported = time.perf_counter()
sys.path.insert(0, "tests")
from builders import job
from kubetrain.engine.admission import admit
class Sink:
    def accept(self, *report): pass
async def start():
    with tempfile.TemporaryDirectory() as directory:
        endpoint = RunStatusEndpoint(admit(job("PyTorchJob", {"Master": 1, "Worker": 3}, name="b")),
            ["master-0", "worker-0", "worker-1", "worker-2"], Path(directory) / "progress", Sink())
        before = time.perf_counter()
        await endpoint.start(PROCESS_ACCESS)
        served = time.perf_counter()
        await endpoint.stop()
        return served - before
serving = asyncio.run(start())
print(imported - started, serving)
"""


def start_costs(runs: int) -> tuple[list[float], list[float]]:
    """Each in a fresh interpreter, as ``kubetrain run`` pays it: (import seconds, start seconds)."""
    imports, starts = [], []
    root = Path(__file__).resolve().parents[1]
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", START_PROGRAM], cwd=root, capture_output=True, text=True, check=True
        )
        imported, served = map(float, done.stdout.split())
        imports.append(imported)
        starts.append(served)
    return imports, starts


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--reports", type=int, default=200)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--markdown", action="store_true")
    options = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    logging.getLogger("kubetrain.reporting").setLevel(logging.ERROR)  # "cannot reach": expected here

    rows: list[tuple[str, list[float], ProgressStats]] = []
    with tempfile.TemporaryDirectory() as scratch:
        rows.append(("no variables", *call_costs({}, options.calls)))
        with local_run_endpoint(Path(scratch) / "progress") as (url, files, _):
            rows.append(("endpoint answering", *call_costs(variables(url, files), options.calls)))
            trips = round_trips(url, files, options.reports)
            down = socket.socket()
            down.bind(("127.0.0.1", 0))
            port = down.getsockname()[1]
            down.close()
            rows.append(
                ("endpoint down", *call_costs(variables(f"https://127.0.0.1:{port}/x", files), options.calls))
            )
            silent = socket.socket()
            silent.bind(("127.0.0.1", 0))
            silent.listen()
            try:
                silent_url = f"https://127.0.0.1:{silent.getsockname()[1]}/x"
                rows.append(
                    ("endpoint never answers", *call_costs(variables(silent_url, files), options.calls))
                )
            finally:
                silent.close()
    imports, starts = start_costs(options.starts)

    load = os.getloadavg()[0]
    if options.markdown:
        print(f"| report_step ({options.calls} calls) | median | p99 | max | requests sent | load |")
        print("|---|---|---|---|---|---|")
        for name, costs, stats in rows:
            median, p99, worst = (
                statistics.median(costs) * 1e6,
                percentile(costs, 0.99) * 1e6,
                max(costs) * 1e3,
            )
            print(f"| {name} | {median:.1f} µs | {p99:.1f} µs | {worst:.2f} ms | {stats.sent} | {load:.1f} |")
        print()
        print(f"| round trip ({options.reports} reports, new TLS connection each) | median | p99 |")
        print("|---|---|---|")
        print(
            f"| stdlib client → local run's endpoint | {statistics.median(trips) * 1e3:.1f} ms "
            f"| {percentile(trips, 0.99) * 1e3:.1f} ms |"
        )
        print()
        print(f"| kubetrain run's start ({options.starts} fresh interpreters) | median | max |")
        print("|---|---|---|")
        print(
            f"| importing the endpoint (aiohttp, cryptography) | {statistics.median(imports) * 1e3:.0f} ms "
            f"| {max(imports) * 1e3:.0f} ms |"
        )
        print(
            "| credentials for 4 replicas, files, server listening "
            f"| {statistics.median(starts) * 1e3:.0f} ms | {max(starts) * 1e3:.0f} ms |"
        )
    else:
        for name, costs, stats in rows:
            print(
                name, statistics.median(costs), percentile(costs, 0.99), max(costs), stats.sent, stats.dropped
            )
        print("round trip", statistics.median(trips), percentile(trips, 0.99))
        print("start", statistics.median(imports), statistics.median(starts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
