"""Many finished jobs kept around: kubetrain's operator and upstream's v1.9.0, alternately, on one envtest
with fake nodes, over the same 2,000 finished PyTorchJobs of 5 pods and 5 services each.

A busy cluster keeps its finished jobs and their pods (``cleanPodPolicy: None``, no TTL), and the operator
caches every one. The bench writes that state once with a plain client (no operator running): each job,
its pods and services as the operator renders them (owned by the job, labelled for it), the pods
``Succeeded`` with their container terminated with exit code 0, the job's status ``Succeeded`` with every
replica counted. Then, for each operator in turn (the order alternating between runs):

- **ready**: from the process's start until its controller runs (kubetrain logs ``caches synced``;
  upstream its PyTorchJob controller's ``Starting workers``);
- **idle**: from the start until the operator has looked at every job and gone quiet (CPU under 2 % of a
  core over a second, after ready): start-up to the first reconcile of everything. For kubetrain, the count
  of jobs it logged a reconcile of is checked to be every job;
- **RSS at rest**, once idle, and the peak RSS of the start-up;
- **new job**: a job of 1 master + 4 workers posted while the rest are cached, until watches on its pods
  and services have seen all 5 of each; the median of 5 posted one after another (then deleted, with
  their pods, so every run starts from the same state).

The state is written only where the namespace holds fewer jobs than asked for, so later runs on the same
envtest reuse it (writing it took 528 s here); ``kubetrain envtest start`` begins with an empty etcd.

Usage::

    kubetrain envtest start --dir /tmp/envtest-many
    .venv/bin/python bench/many_jobs.py --kubeconfig /tmp/envtest-many/admin.kubeconfig \\
        --jobs 2000 --runs 1 --markdown
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
from big_job import node_kept_ready, start_operator
from operator_throughput import count, cpu_seconds, create_namespace, record_run, sample_rss

from kubetrain.api.manifest import parse_job
from kubetrain.envtest import peers
from kubetrain.envtest.crds import install_crds
from kubetrain.envtest.kubeapi import ApiError, KubeApi
from kubetrain.envtest.nodes import NodeShape, fake_node
from kubetrain.kube.plan import kubernetes_plan
from kubetrain.kube.runtime.client import KubeClient, connect, raise_for_status

NAMESPACE = "many-jobs"
WORKERS = 4
CONCURRENCY = 32
NODE = "bench-many-node"
NEW_JOBS = 5
DONE_AT = "2026-11-26T05:00:00Z"


def finished_job(name: str) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "pytorch", "image": "example.com/trainer:1"}]}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "None"},
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template},
                "Worker": {"replicas": WORKERS, "restartPolicy": "OnFailure", "template": template},
            },
        },
    }


def succeeded_status() -> dict[str, Any]:
    def condition(type_: str, status: str, reason: str) -> dict[str, str]:
        times = {"lastUpdateTime": DONE_AT, "lastTransitionTime": DONE_AT}
        return {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": f"PyTorchJob {reason}.",
            **times,
        }

    return {
        "conditions": [
            condition("Created", "True", "PyTorchJobCreated"),
            condition("Running", "False", "PyTorchJobRunning"),
            condition("Succeeded", "True", "PyTorchJobSucceeded"),
        ],
        "replicaStatuses": {
            "Master": {"succeeded": 1, "selector": ""},
            "Worker": {"succeeded": WORKERS, "selector": ""},
        },
        "startTime": "2026-11-26T04:00:00Z",
        "completionTime": DONE_AT,
    }


def pod_succeeded(pod: dict[str, Any]) -> dict[str, Any]:
    container = pod["spec"]["containers"][0]["name"]
    terminated = {
        "exitCode": 0,
        "reason": "Completed",
        "startedAt": "2026-11-26T04:00:05Z",
        "finishedAt": DONE_AT,
        "containerID": "containerd://" + "0" * 64,
    }
    return {
        "status": {
            "phase": "Succeeded",
            "podIP": "10.244.0.9",
            "hostIP": "10.0.0.9",
            "startTime": "2026-11-26T04:00:01Z",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-26T04:00:01Z"},
                {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-26T04:00:02Z"},
                {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": DONE_AT},
                {
                    "type": "ContainersReady",
                    "status": "False",
                    "reason": "PodCompleted",
                    "lastTransitionTime": DONE_AT,
                },
            ],
            "containerStatuses": [
                {
                    "name": container,
                    "ready": False,
                    "restartCount": 0,
                    "image": "example.com/trainer:1",
                    "imageID": "example.com/trainer@sha256:" + "a" * 64,
                    "state": {"terminated": terminated},
                    "lastState": {},
                    "started": False,
                }
            ],
        }
    }


async def gather_limited(calls: list[Any], concurrency: int = CONCURRENCY) -> list[Any]:
    gate = asyncio.Semaphore(concurrency)

    async def one(call: Any) -> Any:
        async with gate:
            return await call

    return await asyncio.gather(*(one(call) for call in calls))


async def write_one_job(client: KubeClient, name: str) -> None:
    collection = f"/apis/kubeflow.org/v1/namespaces/{NAMESPACE}/pytorchjobs"
    response = await client.http.post(collection, json=finished_job(name))
    raise_for_status(response, response.content)
    stored = response.json()
    for obj in kubernetes_plan(parse_job(stored)):
        plural = {"Pod": "pods", "Service": "services"}.get(obj["kind"])
        if plural is None:
            continue
        created = await client.http.post(f"/api/v1/namespaces/{NAMESPACE}/{plural}", json=obj)
        raise_for_status(created, created.content)
        if plural == "pods":
            patched = await client.http.patch(
                f"/api/v1/namespaces/{NAMESPACE}/pods/{obj['metadata']['name']}/status",
                content=json.dumps(pod_succeeded(obj)),
                headers={"Content-Type": "application/merge-patch+json"},
            )
            raise_for_status(patched, patched.content)
    written = await client.http.put(
        f"{collection}/{name}/status", json={**stored, "status": succeeded_status()}
    )
    raise_for_status(written, written.content)


async def write_state(admin: Path, jobs: int) -> None:
    client = connect(admin, qps=0, burst=1, timeout=120)
    try:
        with contextlib.suppress(Exception):
            await create_namespace(client, NAMESPACE)
        have = await count(client, f"/apis/kubeflow.org/v1/namespaces/{NAMESPACE}/pytorchjobs")
        if have >= jobs:
            pods = await count(client, f"/api/v1/namespaces/{NAMESPACE}/pods")
            if pods < have * (WORKERS + 1):
                expected = have * (WORKERS + 1)
                raise SystemExit(
                    f"namespace {NAMESPACE} holds {have} jobs but {pods} of their {expected} pods: {NODE} "
                    "was left without a heartbeat for over an hour and its pods were evicted; delete the "
                    f"namespace (kubectl delete namespace {NAMESPACE}) and run again to write the state anew"
                )
            return
        started = time.monotonic()
        await gather_limited([write_one_job(client, f"done-{i}") for i in range(have, jobs)])
        print(f"wrote {jobs - have} finished jobs in {time.monotonic() - started:.0f} s", file=sys.stderr)
    finally:
        await client.aclose()


@dataclass
class Run:
    operator: str
    jobs: int
    ready_s: float
    idle_s: float
    reconciled_jobs: int
    """Of the finished jobs, how many the log shows a reconcile of."""
    all_reconciled_s: float | None
    """From the start until the log shows the first reconcile of the last of the finished jobs."""
    rest_rss_mb: float
    peak_rss_mb: float
    start_cpu_s: float
    new_job_s: float
    """The median over ``NEW_JOBS`` jobs posted one after another."""
    load_before: tuple[float, float, float]


async def idle(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = cpu_seconds(pid)
        await asyncio.sleep(1.0)
        if cpu_seconds(pid) - before < 0.02:
            return
    raise TimeoutError("the operator did not go idle")


def high_water_rss(pid: int) -> int:
    """The process's peak RSS so far in bytes (Linux's VmHWM), or 0 where /proc does not say."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


UPSTREAM_RECONCILE = re.compile(
    r'^time="(?P<at>[^"]+)" level=info msg="Reconciling for job (?P<job>[\w.-]+)"'
)


def first_reconciles(operator: str, log: Path) -> dict[str, datetime]:
    """When each job was first reconciled, from the operator's log: kubetrain logs a reconcile's outcome
    as it ends (``kubetrain.reconcile``), upstream ``Reconciling for job`` as it begins (to the second)."""
    first: dict[str, datetime] = {}
    for line in log.read_text(errors="replace").splitlines():
        if operator == "kubetrain" and '"logger": "kubetrain.reconcile"' in line:
            with contextlib.suppress(ValueError, KeyError):
                record = json.loads(line)
                job, at = record["job"].split("/")[-1], datetime.fromisoformat(record["ts"])
                first.setdefault(job, at)
        elif operator == "upstream" and (match := UPSTREAM_RECONCILE.match(line)):
            first.setdefault(match["job"], datetime.fromisoformat(match["at"].replace("Z", "+00:00")))
    return first


async def new_job_reaction(client: KubeClient, name: str, timeout: float) -> float:
    template = {"spec": {"containers": [{"name": "pytorch", "image": "example.com/trainer:1"}]}}
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": template},
                "Worker": {"replicas": WORKERS, "template": template},
            }
        },
    }
    selector = f"training.kubeflow.org/job-name={name}"
    seen: dict[str, set[str]] = {"pods": set(), "services": set()}
    both = asyncio.Event()

    async def watch(plural: str) -> None:
        # A watch from now (no resourceVersion: what already exists comes first as ADDED), so the moment
        # each child appears is seen without polling lists over the 10,000 cached pods.
        params: dict[str, str | int] = {"watch": "true", "labelSelector": selector}
        params["timeoutSeconds"] = int(timeout)
        path = f"/api/v1/namespaces/{NAMESPACE}/{plural}"
        async with client.http.stream("GET", path, params=params, timeout=None) as stream:
            async for line in stream.aiter_lines():
                if line.strip() and json.loads(line).get("type") == "ADDED":
                    seen[plural].add(json.loads(line)["object"]["metadata"]["name"])
                    if all(len(names) >= WORKERS + 1 for names in seen.values()):
                        both.set()

    watches = [asyncio.create_task(watch(plural)) for plural in seen]
    await asyncio.sleep(0.5)  # both watches open before the job exists
    collection = f"/apis/kubeflow.org/v1/namespaces/{NAMESPACE}/pytorchjobs"
    started = time.monotonic()
    response = await client.http.post(collection, json=job)
    raise_for_status(response, response.content)
    try:
        await asyncio.wait_for(both.wait(), timeout)
    except TimeoutError:
        raise TimeoutError(f"the new job's pods and services did not all appear in {timeout:.0f} s") from None
    finally:
        for task in watches:
            task.cancel()
    return time.monotonic() - started


async def remove_new_job(client: KubeClient, name: str) -> None:
    await client.http.delete(f"/apis/kubeflow.org/v1/namespaces/{NAMESPACE}/pytorchjobs/{name}")
    selector = f"training.kubeflow.org/job-name={name}"
    for plural in ("pods", "services"):
        for item in (
            await client.http.get(
                f"/api/v1/namespaces/{NAMESPACE}/{plural}", params={"labelSelector": selector}
            )
        ).json().get("items") or []:
            path = f"/api/v1/namespaces/{NAMESPACE}/{plural}/{item['metadata']['name']}"
            await client.http.request("DELETE", path, json={"gracePeriodSeconds": 0})


async def measure(operator: str, jobs: int, admin: Path, index: int, timeout: float) -> Run:
    client = connect(admin, qps=0, burst=1, timeout=120)
    log = Path(f"/tmp/kubetrain-many-jobs-{operator}-{index}.log")
    load_before = os.getloadavg()
    peak = [0]
    started_at = datetime.now(UTC)
    started = time.monotonic()
    process = await start_operator(operator, [], admin, NAMESPACE, log)
    ready = time.monotonic() - started
    sampler = asyncio.create_task(sample_rss(process.pid, peak))
    names = [f"fresh-{operator}-{index}-{n}" for n in range(NEW_JOBS)]
    try:
        await idle(process.pid, timeout)
        idle_s = time.monotonic() - started
        start_cpu = cpu_seconds(process.pid)
        await asyncio.sleep(2.0)
        rest = psutil.Process(process.pid).memory_info().rss
        # The sampler starts only once the operator is ready; the kernel's high-water mark covers the
        # lists before that, where the start-up's peak is.
        peak[0] = max(peak[0], high_water_rss(process.pid))
        new_job = statistics.median([await new_job_reaction(client, name, timeout) for name in names])
    finally:
        sampler.cancel()
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(30)
        process.kill()
        for name in names:
            await remove_new_job(client, name)
        await client.aclose()
    finished = {job: at for job, at in first_reconciles(operator, log).items() if job.startswith("done-")}
    return Run(
        operator=operator,
        jobs=jobs,
        ready_s=ready,
        idle_s=idle_s,
        reconciled_jobs=len(finished),
        all_reconciled_s=(max(finished.values()) - started_at).total_seconds() if finished else None,
        rest_rss_mb=rest / 2**20,
        peak_rss_mb=peak[0] / 2**20,
        start_cpu_s=start_cpu,
        new_job_s=new_job,
        load_before=load_before,
    )


def prepare(admin: Path, crds: Path) -> None:
    with KubeApi.from_kubeconfig(admin) as api:
        install_crds(api, crds)
        version = str(api.get("/version")["gitVersion"])
        shape = NodeShape(cpu="100000", memory="400Ti", pods=50_000, gpus=0)
        with contextlib.suppress(ApiError):
            api.create("/api/v1/nodes", fake_node(NODE, 8, shape, version))


def markdown(runs: list[Run]) -> str:
    lines = [
        "| jobs (pods) | run | load (1 min, before) | ready | every job reconciled | start-up to idle "
        "| RSS at rest | peak RSS "
        "| CPU of start-up | new job: pods + services exist |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    kubetrain = [r for r in runs if r.operator == "kubetrain"]
    upstream = [r for r in runs if r.operator == "upstream"]
    for index, (k, u) in enumerate(zip(kubetrain, upstream, strict=False), 1):
        lines.append(
            f"| {k.jobs:,} ({k.jobs * (WORKERS + 1):,}) | {index} "
            f"| {k.load_before[0]:.1f} / {u.load_before[0]:.1f} "
            f"| {k.ready_s:.1f} / {u.ready_s:.1f} s "
            f"| {_seconds(k.all_reconciled_s)} / {_seconds(u.all_reconciled_s)} ({k.reconciled_jobs} / "
            f"{u.reconciled_jobs} jobs) "
            f"| {k.idle_s:.1f} / {u.idle_s:.1f} s = **{k.idle_s / u.idle_s:.2f}x** "
            f"| {k.rest_rss_mb:.0f} / {u.rest_rss_mb:.0f} MB = **{k.rest_rss_mb / u.rest_rss_mb:.2f}x** "
            f"| {k.peak_rss_mb:.0f} / {u.peak_rss_mb:.0f} MB "
            f"| {k.start_cpu_s:.1f} / {u.start_cpu_s:.1f} s "
            f"| {k.new_job_s * 1000:.0f} / {u.new_job_s * 1000:.0f} ms |"
        )
    return "\n".join(lines)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", type=Path, help="the envtest's admin kubeconfig")
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=1, help="pairs")
    parser.add_argument("--first-run", type=int, default=0, help="its number: odd ones start with upstream")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--results", type=Path, help="append each run as a JSON line here")
    parser.add_argument("--table-from", type=Path, help="only print the table of the runs in this file")
    args = parser.parse_args()
    if args.table_from:
        lines = [line for line in args.table_from.read_text().splitlines() if line.strip()]
        print(markdown([Run(**{"all_reconciled_s": None, **json.loads(line)}) for line in lines]))
        return
    if args.kubeconfig is None:
        parser.error("--kubeconfig is needed to measure (the envtest's admin kubeconfig)")
    peers.TRAINING_OPERATOR.ensure_built()
    prepare(args.kubeconfig, peers.TRAINING_OPERATOR.crds_dir())
    asyncio.run(write_state(args.kubeconfig, args.jobs))
    runs: list[Run] = []
    with node_kept_ready(args.kubeconfig, NODE):
        for index in range(args.runs):
            first = (index + args.first_run) % 2 == 0
            for operator in ["kubetrain", "upstream"] if first else ["upstream", "kubetrain"]:
                run = asyncio.run(
                    measure(operator, args.jobs, args.kubeconfig, index + args.first_run, args.timeout)
                )
                runs.append(run)
                record_run(run, args.results)
    if args.markdown:
        print(markdown(runs))


if __name__ == "__main__":
    main()
