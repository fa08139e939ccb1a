"""kubetrain's operator beside the operators it re-implements, on the same machine, alternately.

Two workloads, each against its peer (built from its Go module by ``kubetrain.envtest.peers``):

- ``pytorch``: N PyTorchJobs (1 master + 3 workers) against upstream's training-operator v1.9.0;
- ``mpi``: N MPIJobs kubeflow.org/v2beta1 (1 launcher + 3 workers) against the mpi-operator v0.6.0.

For each setting (``defaults``: each operator as it ships, the mpi-operator at its own ``--kube-api-qps 5
--kube-api-burst 10`` as its release's Deployment runs it; ``same-limit``, the mpi-operator only: both clients
at kubetrain's default limit, QPS 200 / burst 400; ``best``: the peer's threads at 32 and, where it has a QPS
flag (the mpi-operator), its client unthrottled, against kubetrain ``--controller-threads 32
--kube-api-qps 0``), each N and each run, both operators are measured one after the other (the order
alternating between runs), each on a fresh envtest (``docs/development.md``: a reused one ends with its
controller-manager busy deleting the last run's objects), with the same CRDs (the peer's, from its module) and
the same harness as ``bench/operator_throughput.py``: the N jobs posted at once, 16 in flight. Each operator
runs as a ServiceAccount bound to cluster-admin, not as envtest's admin: the admin is in ``system:masters``,
which API Priority and Fairness exempts, while an operator's ServiceAccount is queued in the
``service-accounts`` FlowSchema (priority level ``workload-low``), as in a cluster.

Reported per operator, and as the ratio kubetrain / peer:

- jobs/s until every pod and service exists (an MPIJob's: its 3 workers, its launcher Job's pod, one Service);
- reaction p50 / p99: each job's deciding pod set Running (16 patches in flight, on a settled operator; an
  MPIJob's workers were set Running first) until the job's Running condition is seen;
- peak RSS of the operator process; its CPU seconds per job while creating;
- the API writes per job while creating (``apiserver_request_total``: POST, PUT, PATCH and DELETE by
  every client, the bench's own job POSTs taken off; the controller-manager's launcher pods and the
  scheduler's bindings are the same for both operators) and the 429s API Priority and Fairness answered.

The peers run out of cluster as their Deployments would run them, less the kubelet, as the conformance tier
runs them (``kubetrain.envtest.peers``).

Usage (builds the peers on first use; one command runs it all, a few minutes per N = 500 pair)::

    .venv/bin/python bench/operator_side_by_side.py --workloads pytorch mpi --jobs 100 500 --runs 2 --markdown
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from big_job import TOO_MANY, apiserver_requests, service_account_kubeconfig
from operator_throughput import (
    BENCH_NODE,
    CREATE_CONCURRENCY,
    PATCH_CONCURRENCY,
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
    record_run,
    sample_rss,
    wait_until,
)

from kubetrain.envtest import peers
from kubetrain.envtest.crds import install_crd_files
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.nodes import NodeShape, fake_node
from kubetrain.kube.runtime.client import KubeClient, connect, raise_for_status

ROOT = Path(__file__).resolve().parents[1]
KUBETRAIN = Path(sys.executable).parent / "kubetrain"
KUBETRAIN_READY = "caches synced"


def mpi_job(name: str, namespace: str) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "mpi", "image": "example.com/trainer:1"}]}}
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "slotsPerWorker": 1,
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template},
                "Worker": {"replicas": 3, "template": template},
            },
        },
    }


@dataclass(frozen=True)
class Workload:
    name: str
    peer: peers.Peer
    crd: str
    """The peer's CRD file the jobs need, in its release's CRD directory."""
    collection: str
    """The jobs' collection path, ``{namespace}`` in it."""
    job: Callable[[str, str], dict[str, Any]]
    pods: int
    services: int
    """Per job, once created."""
    scheme: str
    """kubetrain's ``--enable-scheme``."""
    deciding: str
    """The replica type whose pod, set Running, makes the job Running (the others are set Running first)."""
    others: tuple[str, ...]
    settings: dict[str, dict[str, list[str]]]


WORKLOADS = {
    "pytorch": Workload(
        name="pytorch",
        peer=peers.TRAINING_OPERATOR,
        crd="kubeflow.org_pytorchjobs.yaml",
        collection="/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs",
        job=pytorch_job,
        pods=4,
        services=4,
        scheme="pytorchjob",
        deciding="master",
        others=(),
        settings={
            "defaults": {"upstream": [], "kubetrain": []},
            "best": {
                "upstream": ["--controller-threads", "32"],
                "kubetrain": ["--controller-threads", "32", "--kube-api-qps", "0"],
            },
        },
    ),
    "mpi": Workload(
        name="mpi",
        peer=peers.MPI_OPERATOR,
        crd="kubeflow.org_mpijobs.yaml",
        collection="/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs",
        job=mpi_job,
        pods=4,
        services=1,
        scheme="mpijob-v2beta1",
        deciding="launcher",
        others=("worker",),
        settings={
            "defaults": {"upstream": [], "kubetrain": []},
            "same-limit": {
                "upstream": ["--kube-api-qps", "200", "--kube-api-burst", "400"],
                "kubetrain": ["--kube-api-qps", "200", "--kube-api-burst", "400"],
            },
            "best": {
                "upstream": ["--threadiness", "32", "--kube-api-qps", "100000", "--kube-api-burst", "100000"],
                "kubetrain": ["--controller-threads", "32", "--kube-api-qps", "0"],
            },
        },
    ),
}
SETTINGS = ("defaults", "same-limit", "best")
WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE")


@dataclass
class Run:
    operator: str
    """``kubetrain``, or ``upstream``: the workload's peer."""
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
    moment its pod watch shows the master Running (no cache, no engine), p99 over N jobs (PyTorchJobs
    only)."""
    workload: str = "pytorch"
    writes_per_job: float | None = None
    """API writes per job while creating, every client's (the bench's own job POSTs taken off)."""
    too_many: float | None = None
    """Requests API Priority and Fairness answered 429 while creating, anyone's."""


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
    operator: str,
    workload: Workload,
    flags: list[str],
    admin: Path,
    kubeconfig: Path,
    namespace: str,
    log: Path,
) -> peers.PeerProcess:
    """The operator, authenticating with ``kubeconfig``, watching ``namespace``, once it is ready; ``admin``
    sets up what the peer needs before it starts."""
    if operator == "kubetrain":
        command = [str(KUBETRAIN), "operator", "--kubeconfig", str(kubeconfig), "--namespace", namespace]
        command += ["--enable-scheme", workload.scheme, "--health-probe-bind-address", "0"]
        command += ["--metrics-bind-address", "0", *flags]
        process = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT)
        await wait_until(lambda: KUBETRAIN_READY in log.read_text(), 60, "kubetrain operator start")
        return peers.PeerProcess("kubetrain", process, log)
    # The peer as the conformance tier runs it, in a thread: it blocks until ready. The mpi-operator at its
    # own client limit unless the setting's flags give one (the conformance tier raises it).
    with KubeApi.from_kubeconfig(admin) as api:
        if workload.peer is peers.MPI_OPERATOR:
            return await asyncio.to_thread(
                peers.start_mpi_operator, api, kubeconfig, namespace, log, flags, client_limit=None
            )
        return await asyncio.to_thread(
            peers.start_training_operator, api, kubeconfig, namespace, log, [workload.scheme], flags
        )


async def settle(pid: int, client: KubeClient, collection: str, jobs: int, timeout: float = 300) -> None:
    """Until every job has a Created condition and the operator used under 2 % of a core for a second: the
    same test for every operator (the mpi-operator has no work-queue metric to scrape)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        items = (await client.http.get(collection)).json().get("items") or []
        created = sum(
            any(c.get("type") == "Created" for c in (item.get("status") or {}).get("conditions") or [])
            for item in items
        )
        before = cpu_seconds(pid)
        await asyncio.sleep(1.0)
        if created >= jobs and cpu_seconds(pid) - before < 0.02:
            return
    raise TimeoutError("the operator did not settle")


async def set_running(client: KubeClient, namespace: str, replica_type: str) -> dict[str, float]:
    """Every pod of ``replica_type`` Running (16 patches in flight); when each job's last one was patched."""
    # A v2beta1 MPIJob's pods say their replica type as their job role (the only workload here with others).
    selector = f"training.kubeflow.org/job-role={replica_type}"
    pods = (
        await client.http.get(f"/api/v1/namespaces/{namespace}/pods", params={"labelSelector": selector})
    ).json()
    patched_at: dict[str, float] = {}
    gate = asyncio.Semaphore(PATCH_CONCURRENCY)

    async def run(pod: dict[str, Any]) -> None:
        async with gate:
            path = f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}/status"
            headers = {"Content-Type": "application/merge-patch+json"}
            body = json.dumps({"status": {"phase": "Running"}})
            response = await client.http.patch(path, content=body, headers=headers)
            raise_for_status(response, response.content)
            patched_at[pod["metadata"]["labels"]["training.kubeflow.org/job-name"]] = time.monotonic()

    await asyncio.gather(*(run(pod) for pod in pods.get("items") or []))
    return patched_at


async def react_all(
    client: KubeClient, namespace: str, workload: Workload, jobs: int, watcher: Watcher, timeout: float
) -> list[float]:
    """The deciding pods set Running (the others first, then the operator settled), and per job the
    milliseconds until its Running condition was seen."""
    if workload.name == "pytorch":
        return await react(client, namespace, [f"job-{i}" for i in range(jobs)], watcher)
    for replica_type in workload.others:
        await set_running(client, namespace, replica_type)
    await asyncio.sleep(2.0)  # the operator has seen the workers run (its job's status changes nothing yet)
    patched_at = await set_running(client, namespace, workload.deciding)
    await wait_until(lambda: len(watcher.running_at) >= jobs, timeout, "every job Running")
    return [(watcher.running_at[name] - at) * 1000 for name, at in patched_at.items()]


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


async def measure(
    workload: Workload, operator: str, setting: str, jobs: int, kubeconfig: Path, timeout: float
) -> Run:
    """One operator's run; ``timeout`` bounds each phase (creating, settling, every job Running)."""
    client = connect(kubeconfig, qps=0, burst=1, timeout=60)
    plain_p99 = await plain_floor(client, jobs) if workload.name == "pytorch" else None
    namespace = f"bench-{operator}-{secrets.token_hex(3)}"
    await create_namespace(client, namespace)
    with KubeApi.from_kubeconfig(kubeconfig) as api:
        operator_kubeconfig = service_account_kubeconfig(api, kubeconfig, namespace, "operator")
    log = Path(f"/tmp/kubetrain-side-by-side-{namespace}.log")
    load = os.getloadavg()
    flags = workload.settings[setting][operator]
    process = await start_operator(operator, workload, flags, kubeconfig, operator_kubeconfig, namespace, log)
    peak = [0]
    sampler = asyncio.create_task(sample_rss(process.pid, peak))
    watcher = Watcher(client, namespace)
    collection = workload.collection.format(namespace=namespace)
    watches = [asyncio.create_task(watcher.watch(collection, watcher._on_job))]
    try:
        requests_before = await apiserver_requests(client)
        cpu_at_start = cpu_seconds(process.pid)
        started = time.monotonic()
        await post_all(
            client,
            [(collection, workload.job(f"job-{i}", namespace)) for i in range(jobs)],
            CREATE_CONCURRENCY,
        )
        base = f"/api/v1/namespaces/{namespace}"
        while (
            await count(client, f"{base}/pods") < jobs * workload.pods
            or await count(client, f"{base}/services") < jobs * workload.services
        ):
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"{operator}: not every pod and service exists after {timeout:.0f} s")
            await asyncio.sleep(0.05)
        rate = jobs / (time.monotonic() - started)
        created_cpu = cpu_seconds(process.pid) - cpu_at_start
        requests_after = await apiserver_requests(client)
        await settle(process.pid, client, collection, jobs, timeout)
        latencies = await react_all(client, namespace, workload, jobs, watcher, timeout)
    finally:
        for task in [*watches, sampler]:
            task.cancel()
        process.stop(timeout=30)
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
        workload=workload.name,
        writes_per_job=writes_per_job(requests_before, requests_after, jobs),
        too_many=requests_after.get(TOO_MANY, 0.0) - requests_before.get(TOO_MANY, 0.0),
    )


def one_run(workload: Workload, operator: str, setting: str, jobs: int, run_dir: Path, timeout: float) -> Run:
    """On a fresh envtest, stopped afterwards whatever happens."""
    kubeconfig = Path(envtest("start", run_dir).splitlines()[-1])
    try:
        with KubeApi.from_kubeconfig(kubeconfig) as api:
            install_crd_files(api, [workload.peer.crds_dir() / workload.crd])
            version = str(api.get("/version")["gitVersion"])
            # Room for every pod: the scheduler's retries of unschedulable pods would be measured too.
            shape = NodeShape(cpu="1000", memory="4Ti", pods=10_000, gpus=0)
            api.create("/api/v1/nodes", fake_node(BENCH_NODE, 9, shape, version))
        return asyncio.run(measure(workload, operator, setting, jobs, kubeconfig, timeout))
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
                    f"| {_ms(k.plain_p99_ms)} / {_ms(u.plain_p99_ms)} "
                    f"| {_count(k.writes_per_job)} / {_count(u.writes_per_job)} "
                    f"| {_count(k.too_many)} / {_count(u.too_many)} |"
                )
    return rows


def writes_per_job(
    before: dict[tuple[str, str, str, str], float], after: dict[tuple[str, str, str, str], float], jobs: int
) -> float:
    """Every client's writes between the two counts, less the bench's own ``jobs`` POSTs, per job."""
    writes = sum(after[key] - before.get(key, 0.0) for key in after if key[0] in WRITE_VERBS)
    return (writes - jobs) / jobs


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}".removesuffix(".0")


def markdown(runs: list[Run]) -> str:
    header = [
        "| settings | N | run | load avg (kubetrain / peer) | jobs/s until pods + services exist "
        "| reaction p50 | reaction p99 | peak RSS | CPU / job (create) "
        "| plain-client reaction p99 (on each run's envtest) "
        "| API writes / job (creating) | 429s (creating) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    tables = []
    for name in [w for w in WORKLOADS if any(r.workload == w for r in runs)]:
        peer = WORKLOADS[name].peer
        title = f"{name}: kubetrain / {peer.name} {peer.version()}"
        tables.append("\n".join([title, "", *header, *ratio_rows([r for r in runs if r.workload == name])]))
    return "\n\n".join(tables)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=["pytorch"])
    parser.add_argument("--jobs", type=int, nargs="+", default=[100, 500])
    parser.add_argument("--runs", type=int, default=2, help="pairs per setting and N")
    parser.add_argument("--settings", nargs="+", choices=SETTINGS, default=list(SETTINGS))
    parser.add_argument("--dir", type=Path, default=Path("/tmp/kubetrain-side-by-side-envtest"))
    parser.add_argument(
        "--timeout",
        type=float,
        default=900.0,
        help="seconds each phase may take (the mpi-operator as shipped creates about 0.6 jobs a second)",
    )
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
    runs: list[Run] = []
    for name in args.workloads:
        workload = WORKLOADS[name]
        workload.peer.ensure_built()  # before the first measurement, not during it
        for setting in [s for s in args.settings if s in workload.settings]:
            for jobs in args.jobs:
                for index in range(args.runs):
                    order = ["upstream", "kubetrain"] if index % 2 == 0 else ["kubetrain", "upstream"]
                    for operator in order:
                        run = one_run(workload, operator, setting, jobs, args.dir, args.timeout)
                        runs.append(run)
                        record_run(run, args.results)
    if args.markdown:
        print(markdown(runs))


if __name__ == "__main__":
    main()
