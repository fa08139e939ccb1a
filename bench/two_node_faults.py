"""Real failures on two real nodes, kubetrain beside upstream's training-operator v1.9.0 (issue #29).

One envtest with two real kubelet + containerd nodes (``kubetrain envtest start --real-nodes 2``), and for
each operator in turn (each a host process watching its own namespace, with its own PyTorchJob CRD; upstream
built from its Go module as the conformance tier builds it) the same manifests: a non-elastic torch DDP job
(the DDP example over gloo, 1 master on ``real-node-0`` + 1 worker preferring ``real-node-1``, ``OnFailure``),
rank 0 checkpointing every 10 steps to a hostPath directory both nodes mount (one machine: the stand-in for a
ReadWriteMany volume), each rank resuming from it. Exactly one fault per scenario, made by the bench once the
checkpoint of step 40 is written:

- ``kill-rank``: the worker's training process killed with SIGKILL (from the host, found by its checkpoint
  path and ``RANK=1``); kubetrain's manifest asks for ``kubetrain.dev/restart-scope: Job``;
- ``node-lost``: the worker's node stopped (``kubetrain envtest node stop``: its kubelet, containerd and pods'
  processes killed) with no node-loss annotation; watched for ``--observe-seconds`` after the node turns
  NotReady (the ``NodeLost`` diagnosis, and whether the job goes on without the node), then, unless it ended,
  the node started again and the job watched to its end; times from the node's stop;
- ``node-lost-timeout``: the same with ``kubetrain.dev/node-loss-timeout-seconds: "30"``, the node left down
  until the job ends or ``--job-timeout`` passes;
- ``evict``: the worker evicted through the Eviction API, ``backoffLimit: 0``;
- ``unschedulable``: the worker's nodeSelector matches no node, ``kubetrain.dev/scheduling-timeout-seconds:
  "30"``; watched for ``--observe-seconds`` past the timeout.

Every manifest is the same for both operators: upstream ignores the ``kubetrain.dev/*`` annotations. Reported
per scenario and operator: the outcome, seconds from the fault to training resumed (the master's "resumed
from checkpoint" line, i.e. every rank back in the process group) and to the job's end, the step it resumed
from, the restarts each counted, and what the job said (its Warning events' reasons and messages).

Usage (as root; one real-node cluster per machine; about 30 minutes for both operators)::

    .venv/bin/python bench/two_node_faults.py --markdown --results /tmp/two-node-faults.jsonl
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil
import yaml

from kubetrain.envtest import binaries, controlplane, peers, realnode
from kubetrain.envtest.crds import install_crd_files
from kubetrain.envtest.kubeapi import ApiError, KubeApi

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from operator_process import running_operator  # noqa: E402

EXAMPLE = ROOT / "examples" / "pytorch-ddp" / "job.yaml"
KUBETRAIN_CRD = ROOT / "manifests" / "crds" / "kubeflow.org_pytorchjobs.yaml"
KUBETRAIN = Path(sys.executable).with_name("kubetrain")
BUSYBOX = "localhost/kubetrain/busybox:1.35"
NODES = realnode.real_nodes(2)
KEPT, LOST = NODES
CHECKPOINTS = Path("/tmp/kubetrain-two-node-faults")
"""The hostPath both nodes mount (one directory per job)."""
STEPS = 160
STEP_SECONDS = 0.25
FAULT_AT_STEP = 40
ANNOTATION = "kubetrain.dev/"
SCENARIOS = ("kill-rank", "node-lost", "node-lost-timeout", "evict", "unschedulable")
PYTORCHJOBS = "/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs"


@dataclass
class Result:
    scenario: str
    operator: str
    outcome: str
    fault_to_resumed_seconds: float | None = None
    resumed_from_step: int | None = None
    fault_to_end_seconds: float | None = None
    restarts: str = ""
    said: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Cluster:
    run_dir: Path
    kubeconfig: Path
    api: KubeApi

    def kubectl(self, *args: str) -> str:
        command = [str(binaries.locate().kubectl), f"--kubeconfig={self.kubeconfig}", *args]
        return subprocess.run(command, capture_output=True, text=True, check=False, timeout=60).stdout

    def node(self, action: str, node: realnode.RealNode) -> None:
        command = [str(KUBETRAIN), "envtest", "node", action, node.name, "--dir", str(self.run_dir)]
        subprocess.run(command, check=True, capture_output=True, text=True, timeout=300)

    def ready(self, node: realnode.RealNode) -> bool:
        conditions = self.api.get(f"/api/v1/nodes/{node.name}")["status"]["conditions"]
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def wait_for(what: str, probe: Callable[[], Any], timeout: float, every: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(every)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


# --- the job ------------------------------------------------------------------------------------------------


def ddp_job(
    name: str,
    annotations: dict[str, str],
    backoff_limit: int = 3,
    kept: realnode.RealNode = KEPT,
    lost: realnode.RealNode = LOST,
) -> dict[str, Any]:
    """The DDP example as 1 master on the kept node and 1 worker preferring the one to lose, checkpointing to
    the shared hostPath."""
    job: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    job["metadata"] = {"name": name, "annotations": annotations}
    job["spec"]["runPolicy"] = {"backoffLimit": backoff_limit}
    specs = job["spec"]["pytorchReplicaSpecs"]
    specs["Worker"]["replicas"] = 1
    for kind, spec in specs.items():
        pod = spec["template"]["spec"]
        container = pod["containers"][0]
        container["args"] = [
            *("--steps", str(STEPS), "--step-seconds", str(STEP_SECONDS)),
            *("--checkpoint-dir", f"/checkpoints/{name}", "--checkpoint-every", "10"),
        ]
        container["volumeMounts"] = [{"name": "checkpoints", "mountPath": "/checkpoints"}]
        pod["volumes"] = [
            {"name": "checkpoints", "hostPath": {"path": str(CHECKPOINTS), "type": "DirectoryOrCreate"}}
        ]
        if kind == "Master":
            pod["nodeSelector"] = {"kubernetes.io/hostname": kept.name}
        else:
            term = {
                "matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [lost.name]}
                ]
            }
            preferred = [{"weight": 100, "preference": term}]
            pod["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}
    return job


@dataclass
class Watched:
    """One job of one scenario, read back from the cluster."""

    cluster: Cluster
    namespace: str
    name: str

    @property
    def path(self) -> str:
        return f"{PYTORCHJOBS.format(namespace=self.namespace)}/{self.name}"

    def job(self) -> dict[str, Any]:
        return self.cluster.api.get(self.path)

    def ended(self) -> str | None:
        for condition in self.job().get("status", {}).get("conditions") or []:
            if condition["type"] in ("Succeeded", "Failed") and condition["status"] == "True":
                return str(condition["type"])
        return None

    def condition_text(self) -> str:
        conditions = self.job().get("status", {}).get("conditions") or []
        true = [c for c in conditions if c["status"] == "True"]
        return "; ".join(f"{c['type']} ({c.get('reason')}): {c.get('message')}" for c in true[-1:])

    def pods(self) -> dict[str, dict[str, Any]]:
        selector = {"labelSelector": f"training.kubeflow.org/job-name={self.name}"}
        found = self.cluster.api.get(f"/api/v1/namespaces/{self.namespace}/pods", selector)["items"]
        return {p["metadata"]["name"]: p for p in found}

    def master_log(self) -> str:
        return self.cluster.kubectl("logs", "-n", self.namespace, f"{self.name}-master-0", "-c", "pytorch")

    def checkpointed(self, step: int) -> bool:
        return f"checkpoint at step {step}\n" in self.master_log()

    def warnings(self) -> list[str]:
        events = self.cluster.api.get(f"/api/v1/namespaces/{self.namespace}/events")["items"]
        mine = [e for e in events if e["involvedObject"].get("name") == self.name and e["type"] == "Warning"]
        mine.sort(key=lambda e: e.get("firstTimestamp") or e.get("eventTime") or "")
        return [f"{e['reason']}: {e['message']}" for e in mine]

    def restarts(self) -> str:
        statuses = self.job().get("status", {}).get("replicaStatuses") or {}
        counted = {
            kind: {k: v for k, v in status.items() if k in ("restarts", "failed", "disruptions") and v}
            for kind, status in statuses.items()
        }
        in_place = {
            name: sum(c.get("restartCount", 0) for c in pod.get("status", {}).get("containerStatuses") or [])
            for name, pod in self.pods().items()
        }
        return f"job {counted}; container restarts {in_place}"

    def worker(self) -> dict[str, Any]:
        return self.pods()[f"{self.name}-worker-0"]


def resumed_step(log_text: str) -> int | None:
    for line in log_text.splitlines():
        if line.startswith("rank 0 resumed from checkpoint at step "):
            return int(line.rsplit(" ", 1)[1])
    return None


def follow(watched: Watched, fault_at: float, timeout: float, result: Result) -> None:
    """Watch the job from its fault until it ends or ``timeout`` passes: when the master said it resumed,
    and when it ended."""
    deadline = fault_at + timeout
    while time.monotonic() < deadline:
        if result.fault_to_resumed_seconds is None:
            step = resumed_step(watched.master_log())
            if step is not None:
                result.fault_to_resumed_seconds = round(time.monotonic() - fault_at, 1)
                result.resumed_from_step = step
        ended = watched.ended()
        if ended:
            result.outcome = ended
            result.fault_to_end_seconds = round(time.monotonic() - fault_at, 1)
            return
        time.sleep(1.0)
    result.outcome = f"not ended {timeout:.0f} s after the fault"


def conclude(watched: Watched, result: Result) -> Result:
    result.restarts = watched.restarts()
    result.said = watched.warnings()
    last = watched.condition_text()
    if last:
        result.notes.append(f"last condition: {last}")
    placed = {name: pod["spec"].get("nodeName") for name, pod in watched.pods().items()}
    result.notes.append(f"pods now on {placed}")
    return result


# --- the faults ---------------------------------------------------------------------------------------------


def worker_process(job: str) -> psutil.Process:
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if f"/checkpoints/{job}" in cmdline:
            with contextlib.suppress(psutil.Error):
                if process.environ().get("RANK") == "1":
                    return process
    raise LookupError(f"no training process of {job}'s rank 1 on this host")


def start_training(watched: Watched, manifest: dict[str, Any], lost: realnode.RealNode = LOST) -> None:
    watched.cluster.api.create(PYTORCHJOBS.format(namespace=watched.namespace), manifest)
    wait_for(
        f"{watched.name}'s checkpoint of step {FAULT_AT_STEP}",
        lambda: watched.checkpointed(FAULT_AT_STEP),
        300,
        1.0,
    )
    node = watched.worker()["spec"].get("nodeName")
    if node != lost.name:
        raise RuntimeError(f"{watched.name}'s worker was placed on {node}, not {lost.name}")


def kill_rank(watched: Watched, result: Result, job_timeout: float) -> None:
    start_training(watched, ddp_job(watched.name, {f"{ANNOTATION}restart-scope": "Job"}))
    worker_process(watched.name).send_signal(signal.SIGKILL)
    follow(watched, time.monotonic(), job_timeout, result)


def evict(watched: Watched, result: Result, job_timeout: float) -> None:
    start_training(watched, ddp_job(watched.name, {f"{ANNOTATION}restart-scope": "Job"}, backoff_limit=0))
    pod = f"{watched.name}-worker-0"
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": watched.namespace},
    }
    watched.cluster.api.create(f"/api/v1/namespaces/{watched.namespace}/pods/{pod}/eviction", eviction)
    follow(watched, time.monotonic(), job_timeout, result)


def node_lost(
    watched: Watched, result: Result, job_timeout: float, observe: float, timeout_seconds: int | None
) -> None:
    annotations = {f"{ANNOTATION}restart-scope": "Job"}
    if timeout_seconds is not None:
        annotations[f"{ANNOTATION}node-loss-timeout-seconds"] = str(timeout_seconds)
    start_training(watched, ddp_job(watched.name, annotations))
    cluster = watched.cluster
    stopped_at = time.monotonic()
    cluster.node("stop", LOST)
    try:
        wait_for(f"{LOST.name} NotReady", lambda: not cluster.ready(LOST), 180)
        not_ready_at = time.monotonic()
        result.notes.append(f"node NotReady {not_ready_at - stopped_at:.1f} s after its stop")

        def diagnosed() -> str | None:
            lost = [w for w in watched.warnings() if w.startswith("NodeLost:")]
            return lost[0] if lost else None

        if timeout_seconds is None:
            with contextlib.suppress(TimeoutError):
                wait_for("the NodeLost diagnosis", diagnosed, observe)
            seen = diagnosed()
            result.notes.append(
                f"NodeLost diagnosis {time.monotonic() - not_ready_at:.1f} s after NotReady"
                if seen
                else f"no NodeLost diagnosis within {observe:.0f} s of NotReady"
            )
            # Training may resume, or the job end, while the node is still down.
            follow(watched, stopped_at, not_ready_at + observe - stopped_at, result)
            result.notes.append(
                f"{observe:.0f} s after NotReady: {watched.condition_text()}; {watched.restarts()}"
            )
            if result.fault_to_end_seconds is not None:
                return
        else:
            follow(watched, stopped_at, job_timeout, result)
            return
    finally:
        result.notes.append(f"node started again {time.monotonic() - stopped_at:.1f} s after its stop")
        cluster.node("start", LOST)
        wait_for(f"{LOST.name} Ready again", lambda: cluster.ready(LOST), 180)
    follow(watched, stopped_at, job_timeout, result)


def unschedulable(watched: Watched, result: Result, observe: float) -> None:
    timeout_seconds = 30
    manifest = ddp_job(watched.name, {f"{ANNOTATION}scheduling-timeout-seconds": str(timeout_seconds)})
    manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"] = {
        "kubetrain.dev/bench": "nowhere"
    }
    created_at = time.monotonic()
    watched.cluster.api.create(PYTORCHJOBS.format(namespace=watched.namespace), manifest)
    with contextlib.suppress(TimeoutError):
        wait_for("the job's end", watched.ended, timeout_seconds + observe, 1.0)
    ended = watched.ended()
    result.outcome = ended or f"not ended {timeout_seconds + observe:.0f} s after its creation"
    if ended:
        result.fault_to_end_seconds = round(time.monotonic() - created_at, 1)
    worker = watched.worker() if f"{watched.name}-worker-0" in watched.pods() else None
    if worker is not None:
        result.notes.append(f"worker phase {worker['status'].get('phase')}")
    result.notes.append("times from the job's creation")


# --- the operators ------------------------------------------------------------------------------------------


@contextlib.contextmanager
def kubetrain_operator(cluster: Cluster, namespace: str, log_path: Path) -> Iterator[None]:
    install_crd_files(cluster.api, [KUBETRAIN_CRD])
    flags = ("--enable-scheme", "pytorchjob", f"--pytorch-init-container-image={BUSYBOX}")
    with running_operator(cluster.kubeconfig, namespace, log_path, flags):
        yield


@contextlib.contextmanager
def upstream_operator(cluster: Cluster, namespace: str, log_path: Path) -> Iterator[None]:
    install_crd_files(cluster.api, [peers.TRAINING_OPERATOR.crds_dir() / "kubeflow.org_pytorchjobs.yaml"])
    flags = (f"--pytorch-init-container-image={BUSYBOX}",)
    process = peers.start_training_operator(
        cluster.api, cluster.kubeconfig, namespace, log_path, schemes=("pytorchjob",), flags=flags
    )
    try:
        yield
    finally:
        process.stop()


OPERATORS: dict[str, Callable[[Cluster, str, Path], contextlib.AbstractContextManager[None]]] = {
    "kubetrain": kubetrain_operator,
    "training-operator v1.9.0": upstream_operator,
}


# --- the run ------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def two_nodes(run_dir: Path | None) -> Iterator[Cluster]:
    own = run_dir is None
    directory = Path(tempfile.mkdtemp(prefix="two-node-faults-")) if run_dir is None else run_dir
    if own:
        log(f"starting an envtest with two real nodes in {directory}")
        controlplane.start(directory, controlplane.EnvtestOptions(nodes=0, real_nodes=len(NODES)))
    try:
        for node in NODES:
            realnode.load_images(node.paths(directory), ["pytorch", "busybox"])
        kubeconfig = directory / controlplane.ADMIN_KUBECONFIG
        yield Cluster(directory, kubeconfig, KubeApi.from_kubeconfig(kubeconfig))
    finally:
        if own:
            controlplane.stop(directory)


def clean_up(watched: Watched) -> None:
    """The job and its pods gone (a pod stranded on the node that was lost deleted by force)."""
    api = watched.cluster.api
    with contextlib.suppress(ApiError):
        api.delete(watched.path, {"propagationPolicy": "Foreground"})
    for name in watched.pods():
        with contextlib.suppress(ApiError):
            api.delete(f"/api/v1/namespaces/{watched.namespace}/pods/{name}", {"gracePeriodSeconds": 0})
    with contextlib.suppress(TimeoutError):
        wait_for("the job's pods gone", lambda: not watched.pods(), 60)


def run_scenario(
    cluster: Cluster, operator: str, namespace: str, scenario: str, args: argparse.Namespace
) -> Result:
    name = f"{scenario}-{os.getpid() % 1000}"
    shutil.rmtree(CHECKPOINTS / name, ignore_errors=True)
    watched = Watched(cluster, namespace, name)
    result = Result(scenario, operator, outcome="")
    log(f"{operator}: {scenario} ({name})")
    try:
        if scenario == "kill-rank":
            kill_rank(watched, result, args.job_timeout)
        elif scenario == "evict":
            evict(watched, result, args.job_timeout)
        elif scenario == "node-lost":
            node_lost(watched, result, args.job_timeout, args.observe_seconds, None)
        elif scenario == "node-lost-timeout":
            node_lost(watched, result, args.job_timeout, args.observe_seconds, 30)
        else:
            unschedulable(watched, result, args.observe_seconds)
        conclude(watched, result)
    except Exception as error:  # the next scenario still runs: one broken case is reported, not fatal
        result.outcome = result.outcome or "bench error"
        result.notes.append(f"bench: {type(error).__name__}: {error}")
        with contextlib.suppress(Exception):
            conclude(watched, result)
    finally:
        clean_up(watched)
    log(f"{operator}: {scenario}: {result.outcome}")
    return result


def report(result: Result, results_file: Path | None) -> None:
    """Print the result as a JSON line, and append it, timestamped, to ``results_file`` if one is given."""
    print(json.dumps(asdict(result)), flush=True)
    if results_file:
        with results_file.open("a") as out:
            out.write(json.dumps({"at": time.strftime("%FT%TZ", time.gmtime()), **asdict(result)}) + "\n")


def markdown(results: list[Result]) -> str:
    rows = [
        "| scenario | operator | outcome | fault → resumed (from step) | fault → end | what the job said |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        resumed = (
            f"{r.fault_to_resumed_seconds} s ({r.resumed_from_step})" if r.fault_to_resumed_seconds else "—"
        )
        end = f"{r.fault_to_end_seconds} s" if r.fault_to_end_seconds else "—"
        reasons = dict.fromkeys(said.split(":", 1)[0] for said in r.said)
        last = next(
            (note.removeprefix("last condition: ") for note in r.notes if note.startswith("last")), ""
        )
        said = f"{last}<br>Warning events: {', '.join(reasons) or 'none'}".replace("|", "\\|")
        rows.append(f"| {r.scenario} | {r.operator} | {r.outcome} | {resumed} | {end} | {said} |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument("--operators", nargs="+", choices=list(OPERATORS), default=list(OPERATORS))
    parser.add_argument("--dir", type=Path, help="an envtest already started with --real-nodes 2")
    parser.add_argument("--job-timeout", type=float, default=420.0)
    parser.add_argument("--observe-seconds", type=float, default=90.0)
    parser.add_argument("--results", type=Path, help="append each result here as a JSON line")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    CHECKPOINTS.mkdir(parents=True, exist_ok=True)
    CHECKPOINTS.chmod(0o777)
    results = []
    with two_nodes(args.dir) as cluster:
        for operator in args.operators:
            namespace = "faults-" + operator.split()[0].lower()
            with contextlib.suppress(ApiError):
                cluster.api.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
            log_path = cluster.run_dir / f"{namespace}-operator.log"
            with OPERATORS[operator](cluster, namespace, log_path):
                for scenario in args.scenarios:
                    result = run_scenario(cluster, operator, namespace, scenario, args)
                    results.append(result)
                    report(result, args.results)
    if args.markdown:
        print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
