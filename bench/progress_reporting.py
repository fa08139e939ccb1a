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
4. How soon a report is shown (``--shown N``, N reports a view): a replica of a ``kubetrain run`` posts a
   report with the standard library and waits; the time from its answer to the end of the first
   ``kubetrain get --local`` (a fresh process each time, as a person runs it) and of the first SDK
   ``get_job`` that shows it. With ``--kubeconfig`` (a cluster whose operator serves the status endpoint,
   e.g. the e2e tier's real node) the same for ``kubectl get``, ``kubetrain get`` and the SDK, from a
   PyTorchJob in ``--namespace`` running ``--image`` that reports every ``--gap`` seconds.

The tests check what these promise (no report waits for the endpoint; a report is shown, in order); how
fast is measured here and in docs/benchmarks.md ("Progress reporting").

Usage::

    .venv/bin/python bench/progress_reporting.py [--calls 100000] [--reports 200] [--shown 10] [--markdown]
    .venv/bin/python bench/progress_reporting.py --only-shown --shown 10 --kubeconfig PATH --namespace NS \\
        --image localhost/kubetrain/python:3.11-bookworm
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

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


ROOT = Path(__file__).resolve().parents[1]
KUBETRAIN = Path(sys.executable).with_name("kubetrain")
FIRST_CALLS = 1000
"""The burst the unit test makes (tests/unit/progress/test_reporting_helper.py): its cost is summed here."""

STEPPED_REPORTER = """
import json, os, ssl, sys, time, urllib.request
from pathlib import Path

url = os.environ["KUBEFLOW_TRAINER_SERVER_URL"]
context = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
token = Path(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]).read_text().strip()
signals = Path(sys.argv[1])
for number in range(1, int(sys.argv[2]) + 1):
    body = json.dumps({"trainerStatus": {"progressPercentage": number}}).encode()
    headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    with urllib.request.urlopen(request, context=context, timeout=60) as answer:
        answer.read()
    (signals / f"reported-{number}").write_text(repr(time.time()))
    while not (signals / f"go-{number}").exists():
        time.sleep(0.01)
"""
"""A local replica: report ``number`` %, note when it was answered, wait for the bench to have seen it."""

PERIODIC_REPORTER = """
import json, os, ssl, sys, time, urllib.request

url = os.environ["KUBEFLOW_TRAINER_SERVER_URL"]
context = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
with open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]) as file:
    token = file.read().strip()
for number in range(1, int(sys.argv[1]) + 1):
    body = json.dumps({"trainerStatus": {"progressPercentage": number}}).encode()
    headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    with urllib.request.urlopen(request, context=context, timeout=60) as answer:
        answer.read()
    print(f"reported {number} at {time.time():.3f}", flush=True)
    time.sleep(float(sys.argv[2]))
time.sleep(600)
"""
"""A pod's replica: report ``number`` % every ``gap`` seconds, logging when each was answered (the node is
this machine, so the log's clock is the bench's)."""


def pytorch_job(name: str, image: str, command: list[str]) -> dict[str, Any]:
    main = {"name": "pytorch", "image": image, "imagePullPolicy": "Never", "command": command}
    master = {
        "replicas": 1,
        "restartPolicy": "Never",
        "template": {"spec": {"terminationGracePeriodSeconds": 1, "containers": [main]}},
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": {"Master": master}},
    }


def first_showing(shows: Callable[[], int | None], progress: int, reported_at: float) -> float:
    """Seconds from ``reported_at`` to the end of the first ``shows()`` showing ``progress`` or more."""
    while True:
        shown = shows()
        if shown is not None and shown >= progress:
            return time.time() - reported_at
        if time.time() - reported_at > 600:
            raise RuntimeError(f"{progress}% not shown in 10 minutes")


def table_cell(output: str, column: str) -> str:
    """A ``get`` table's one row's ``column`` (``PROGRESS %`` read as one column)."""
    header, row = output.replace("PROGRESS %", "PROGRESS%").splitlines()[:2]
    return dict(zip(header.split(), row.split(), strict=False)).get(column, "-")


def percent(cell: str) -> int | None:
    digits = cell.rstrip("%")
    return int(digits) if digits.isdigit() else None


def local_shown(reports: int) -> dict[str, list[float]]:
    """``reports`` reports a view from a ``kubetrain run``'s replica, each shown by one view in turn."""
    from kubetrain.sdk import TrainingClient

    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        state_dir, signals = directory / "state", directory / "signals"
        signals.mkdir()
        total = 2 * reports
        job = pytorch_job(
            "shown", "unused", [sys.executable, "-c", STEPPED_REPORTER, str(signals), str(total)]
        )
        manifest = directory / "job.yaml"
        manifest.write_text(yaml.safe_dump(job))
        command = [str(KUBETRAIN), "run", str(manifest), "--state-dir", str(state_dir)]
        runner = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = TrainingClient(backend="local", state_dir=state_dir)

        def kubetrain_get() -> int | None:
            listed = subprocess.run(
                [str(KUBETRAIN), "get", "--local", "--state-dir", str(state_dir)],
                capture_output=True,
                text=True,
                check=True,
            )
            return percent(table_cell(listed.stdout, "PROGRESS"))

        def sdk_get_job() -> int | None:
            status = client.get_job("shown").status.trainer_status
            return None if status is None else status.progress_percentage

        views = {"kubetrain get --local": kubetrain_get, "SDK get_job (local)": sdk_get_job}
        delays: dict[str, list[float]] = {name: [] for name in views}
        try:
            for number in range(1, total + 1):
                reported = signals / f"reported-{number}"
                while not reported.exists() or not reported.read_text():
                    if runner.poll() is not None:
                        raise RuntimeError(
                            f"kubetrain run ended ({runner.returncode}) before report {number}"
                        )
                    time.sleep(0.01)
                name = list(views)[number % len(views)]
                delays[name].append(first_showing(views[name], number, float(reported.read_text())))
                (signals / f"go-{number}").touch()
            runner.wait(120)
        finally:
            if runner.poll() is None:
                runner.terminate()
                runner.wait(60)
    return delays


def cluster_shown(
    kubeconfig: Path, namespace: str, image: str, reports: int, gap: float
) -> dict[str, list[float]]:
    """``reports`` reports a view from a PyTorchJob's pod; the job is deleted afterwards."""
    from kubetrain.envtest import binaries
    from kubetrain.sdk.client import TrainingClient

    kubectl = [str(binaries.locate().kubectl), f"--kubeconfig={kubeconfig}", "-n", namespace]
    name = f"shown-{os.getpid()}"
    views_total = 3 * reports
    job = pytorch_job(name, image, ["python", "-u", "-c", PERIODIC_REPORTER, str(views_total), str(gap)])
    subprocess.run([*kubectl, "create", "-f", "-"], input=yaml.safe_dump(job), text=True, check=True)
    client = TrainingClient(config_file=str(kubeconfig), namespace=namespace)
    environment = {**os.environ, "KUBECONFIG": str(kubeconfig)}

    def kubectl_get() -> int | None:
        listed = subprocess.run(
            [*kubectl, "get", "pytorchjob", name], capture_output=True, text=True, check=True
        )
        return percent(table_cell(listed.stdout, "PROGRESS%"))

    def kubetrain_get() -> int | None:
        listed = subprocess.run(
            [str(KUBETRAIN), "get", "pytorchjob", name, "-n", namespace],
            capture_output=True,
            text=True,
            check=True,
            env=environment,
        )
        return percent(table_cell(listed.stdout, "PROGRESS"))

    def sdk_get_job() -> int | None:
        status = client.get_job(name, job_kind="PyTorchJob").status.trainer_status
        return None if status is None else status.progress_percentage

    views = {"kubectl get": kubectl_get, "kubetrain get": kubetrain_get, "SDK get_job": sdk_get_job}
    delays: dict[str, list[float]] = {view: [] for view in views}
    seen = 0
    try:
        while seen < views_total:
            logs = subprocess.run(
                [*kubectl, "logs", f"{name}-master-0"], capture_output=True, text=True, check=False
            ).stdout
            reported = [line.split() for line in logs.splitlines() if line.startswith("reported ")]
            if not reported or int(reported[-1][1]) <= seen:
                time.sleep(0.1)
                continue
            number, at = int(reported[-1][1]), float(reported[-1][3])
            view = list(views)[len([d for ds in delays.values() for d in ds]) % len(views)]
            delays[view].append(first_showing(views[view], number, at))
            seen = number
    finally:
        subprocess.run(
            [*kubectl, "delete", "pytorchjob", name, "--wait=false"], capture_output=True, check=False
        )
    return delays


def shown_table(delays: dict[str, list[float]], load: float) -> None:
    print("| report to shown | reports | median | max | load |")
    print("|---|---|---|---|---|")
    for view, seconds in delays.items():
        median, worst = statistics.median(seconds), max(seconds)
        print(f"| {view} | {len(seconds)} | {median:.2f} s | {worst:.2f} s | {load:.1f} |")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--reports", type=int, default=200)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--shown", type=int, default=10, help="reports a view for 'report to shown'")
    parser.add_argument("--only-shown", action="store_true", help="only 'report to shown'")
    parser.add_argument("--kubeconfig", type=Path, help="also from a PyTorchJob on this cluster")
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--image", default="localhost/kubetrain/python:3.11-bookworm")
    parser.add_argument("--gap", type=float, default=3.0, help="seconds between the pod's reports")
    parser.add_argument("--markdown", action="store_true")
    options = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    logging.getLogger("kubetrain.reporting").setLevel(logging.ERROR)  # "cannot reach": expected here

    shown = local_shown(options.shown)
    if options.kubeconfig is not None:
        shown |= cluster_shown(
            options.kubeconfig, options.namespace, options.image, options.shown, options.gap
        )
    if options.only_shown:
        shown_table(shown, os.getloadavg()[0])
        return 0

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
        print(
            f"| report_step ({options.calls} calls) | median | p99 | max | first {FIRST_CALLS:,} in all "
            "| requests sent | load |"
        )
        print("|---|---|---|---|---|---|---|")
        for name, costs, stats in rows:
            median, p99, worst, burst = (
                statistics.median(costs) * 1e6,
                percentile(costs, 0.99) * 1e6,
                max(costs) * 1e3,
                sum(costs[:FIRST_CALLS]) * 1e3,
            )
            print(
                f"| {name} | {median:.1f} µs | {p99:.1f} µs | {worst:.2f} ms | {burst:.1f} ms | {stats.sent} "
                f"| {load:.1f} |"
            )
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
        print()
        shown_table(shown, load)
    else:
        for name, costs, stats in rows:
            print(
                name,
                statistics.median(costs),
                percentile(costs, 0.99),
                max(costs),
                sum(costs[:FIRST_CALLS]),
                stats.sent,
                stats.dropped,
            )
        print("round trip", statistics.median(trips), percentile(trips, 0.99))
        print("start", statistics.median(imports), statistics.median(starts))
        for view, seconds in shown.items():
            print("shown", view, statistics.median(seconds), max(seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
