"""The operator's own node lost, kubetrain beside upstream's training-operator v1.9.0 (issue #39).

One envtest with two real kubelet + containerd nodes, and each operator in turn installed in-cluster, in
namespace ``kubeflow``, as a user installs it:

- kubetrain from ``manifests/overlays/standalone`` (through ``tests/e2e/two-node-operator-overlay``: the local
  busybox for PyTorch's init container, and PyTorchJobs only, as this cluster runs no JobSet): two replicas
  with leader election, one per node, tolerating ``unreachable`` and ``not-ready`` for 10 s;
- upstream from its v1.9.0 module's own ``manifests/overlays/standalone``: one replica, no leader election,
  Kubernetes' default 300 s tolerations. Two changes, both because of this cluster: its image is made here
  (no registry is reachable) from the ``manager`` binary the conformance tier builds from the module, on the
  project's Debian base, with the local busybox for PyTorch's init container as a flag; and its validating
  webhooks are narrowed to match nothing, as the conformance tier runs it: this API server cannot reach a
  Service's ClusterIP (no kube-proxy), and upstream's cert rotator still finds the configuration it fills.

For each: the DDP example (``two_node_faults.ddp_job``: 1 master, 1 worker, rank 0 checkpointing every 10
steps to a hostPath both nodes mount; ``kubetrain.dev/restart-scope: Job`` and ``node-loss-timeout-seconds:
"30"``, which upstream ignores), its master on the node the operator's leader is not on and its worker on the
leader's node. Once the checkpoint of step 40 is written, the leader's node is stopped (``kubetrain envtest
node stop``: kubelet, containerd and every process of its pods killed) and left down until the job ends or
``--job-timeout`` passes. Measured from the stop, from the API's own timestamps: an operator acting again
(kubetrain: the new holder's Lease ``acquireTime``; upstream, which elects no leader: its replacement pod's
``Ready``), the ``NodeLost`` event, the worker's replacement pod created on the node left, training resumed
(the master's log) and the job's end.

Usage (as root; one real-node cluster per machine; about 20 minutes for both)::

    .venv/bin/python bench/operator_node_loss.py --markdown --results /tmp/operator-node-loss.jsonl
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from two_node_faults import (
    ANNOTATION,
    BUSYBOX,
    CHECKPOINTS,
    NODES,
    ROOT,
    Cluster,
    Result,
    Watched,
    clean_up,
    ddp_job,
    follow,
    log,
    report,
    start_training,
    two_nodes,
    wait_for,
)

from image_recipes import images
from kubetrain.envtest import binaries, peers, realnode
from kubetrain.envtest.kubeapi import ApiError

NAMESPACE = "kubeflow"
SELECTOR = "control-plane=kubeflow-training-operator"  # both operators' pods carry it
KUBETRAIN_OVERLAY = ROOT / "tests" / "e2e" / "two-node-operator-overlay"
KUBETRAIN_LEASE = (
    f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/1ca428e5.training-operator.kubeflow.org"
)
UPSTREAM_IMAGE = "localhost/kubetrain/upstream-training-operator"
NO_RESOURCE = [
    {
        "apiGroups": ["kubetrain.dev"],
        "apiVersions": ["v1"],
        "operations": ["CREATE"],
        "resources": ["nothing"],
    }
]


@dataclass
class NodeLossResult(Result):
    replicas_on: list[str] = field(default_factory=list)
    acting_again_seconds: float | None = None
    node_lost_seconds: float | None = None
    worker_replaced_seconds: float | None = None


def operator_pods(cluster: Cluster) -> list[dict[str, Any]]:
    found = cluster.api.get(f"/api/v1/namespaces/{NAMESPACE}/pods", {"labelSelector": SELECTOR})["items"]
    return [p for p in found if p.get("status", {}).get("phase") not in ("Succeeded", "Failed")]


def ready_since(found: dict[str, Any]) -> str | None:
    for condition in found.get("status", {}).get("conditions") or []:
        if condition["type"] == "Ready" and condition["status"] == "True":
            return str(condition["lastTransitionTime"])
    return None


def seconds_after(start: datetime, stamp: str | None) -> float | None:
    if not stamp:
        return None
    return round((datetime.fromisoformat(stamp.replace("Z", "+00:00")) - start).total_seconds(), 1)


def kubectl(cluster: Cluster, *args: str) -> None:
    command = [str(binaries.locate().kubectl), f"--kubeconfig={cluster.kubeconfig}", *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr}")


# --- the operators: each one's install, and who leads ---------------------------------------------------


def kubetrain_leader(cluster: Cluster) -> str | None:
    if not cluster.api.exists(KUBETRAIN_LEASE):
        return None
    holder = cluster.api.get(KUBETRAIN_LEASE)["spec"].get("holderIdentity") or ""
    return holder.split("_", 1)[0] or None  # <hostname>_<uuid>, the hostname being the pod's name


def install_kubetrain(cluster: Cluster, scratch: Path) -> None:
    for node in NODES:
        realnode.load_images(node.paths(cluster.run_dir), ["operator"])
    kubectl(cluster, "apply", "--server-side", "--force-conflicts", "-k", str(KUBETRAIN_OVERLAY))


def upstream_image() -> str:
    """``manager`` built from the module, on the project's Debian base (which has the glibc it links)."""
    reference = f"{UPSTREAM_IMAGE}:{peers.TRAINING_OPERATOR.version()}"
    binary = peers.TRAINING_OPERATOR.ensure_built()
    base = images.build("python")
    with tempfile.TemporaryDirectory(prefix="upstream-image-") as context:
        shutil.copy2(binary, Path(context) / "manager")
        (Path(context) / "Containerfile").write_text(
            f'FROM {base}\nCOPY manager /manager\nENTRYPOINT ["/manager"]\n'
        )
        subprocess.run(
            ["podman", "build", "--quiet", "-t", reference, context], check=True, capture_output=True
        )
    return reference


def install_upstream(cluster: Cluster, scratch: Path) -> None:
    reference = upstream_image()
    for node in NODES:
        images.import_into_containerd(reference, str(node.paths(cluster.run_dir).containerd_socket))
    shutil.copytree(peers.TRAINING_OPERATOR.source() / "manifests", scratch / "manifests", dirs_exist_ok=True)
    name, tag = reference.rsplit(":", 1)
    narrowed = [{"op": "replace", "path": f"/webhooks/{i}/rules", "value": NO_RESOURCE} for i in range(5)]
    flag = {
        "op": "add",
        "path": "/spec/template/spec/containers/0/args",
        "value": [f"--pytorch-init-container-image={BUSYBOX}"],
    }
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": ["manifests/overlays/standalone"],
        "images": [{"name": "kubeflow/training-operator", "newName": name, "newTag": tag}],
        "patches": [
            {"target": {"kind": "ValidatingWebhookConfiguration"}, "patch": yaml.safe_dump(narrowed)},
            {"target": {"kind": "Deployment", "name": "training-operator"}, "patch": yaml.safe_dump([flag])},
        ],
    }
    (scratch / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    kubectl(cluster, "apply", "--server-side", "--force-conflicts", "-k", str(scratch))


def upstream_leader(cluster: Cluster) -> str | None:
    """The one replica, once ready (upstream elects no leader by default)."""
    ready = [p["metadata"]["name"] for p in operator_pods(cluster) if ready_since(p)]
    return ready[0] if len(ready) == 1 else None


@dataclass(frozen=True)
class Operator:
    install: Callable[[Cluster, Path], None]
    leader: Callable[[Cluster], str | None]
    acting_since: Callable[[Cluster, str], str | None]
    """When an operator other than the lost leader started acting (an API timestamp), if one has."""
    replicas: int


def kubetrain_acting_since(cluster: Cluster, lost_leader: str) -> str | None:
    """The Lease's ``acquireTime``, once another replica holds it."""
    if kubetrain_leader(cluster) in (None, lost_leader):
        return None
    acquired = cluster.api.get(KUBETRAIN_LEASE)["spec"].get("acquireTime")
    return str(acquired) if acquired else None


def upstream_acting_since(cluster: Cluster, lost_leader: str) -> str | None:
    """Its replacement pod's ``Ready`` (upstream elects no leader: its one replica acts once ready)."""
    replaced = [p for p in operator_pods(cluster) if p["metadata"]["name"] != lost_leader and ready_since(p)]
    return ready_since(replaced[0]) if replaced else None


OPERATORS = {
    "kubetrain": Operator(install_kubetrain, kubetrain_leader, kubetrain_acting_since, 2),
    "training-operator v1.9.0": Operator(install_upstream, upstream_leader, upstream_acting_since, 1),
}


@contextlib.contextmanager
def installed(cluster: Cluster, operator: Operator) -> Iterator[None]:
    """The operator in namespace kubeflow, its pods ready; the namespace deleted after, so the next one
    starts from nothing (its CRDs stay: the next install's replace them)."""
    with tempfile.TemporaryDirectory(prefix="operator-install-") as scratch:
        operator.install(cluster, Path(scratch))
    try:
        wait_for(
            f"{operator.replicas} operator replicas ready",
            lambda: len([p for p in operator_pods(cluster) if ready_since(p)]) == operator.replicas,
            300,
            1.0,
        )
        wait_for("a leader", lambda: operator.leader(cluster), 120, 1.0)
        yield
    finally:
        with contextlib.suppress(ApiError):
            cluster.api.delete(f"/api/v1/namespaces/{NAMESPACE}")
        wait_for(
            "namespace kubeflow gone",
            lambda: not cluster.api.exists(f"/api/v1/namespaces/{NAMESPACE}"),
            300,
            1.0,
        )


# --- the scenario ------------------------------------------------------------------------------------------


def leaders_node_lost(
    cluster: Cluster, name: str, operator: Operator, result: NodeLossResult, job_timeout: float
) -> None:
    replicas = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in operator_pods(cluster)}
    result.replicas_on = sorted(replicas.values())
    leading = operator.leader(cluster)
    assert leading is not None
    [lost] = [node for node in NODES if node.name == replicas[leading]]
    [kept] = [node for node in NODES if node is not lost]
    watched = Watched(cluster, "node-loss", name)
    annotations = {f"{ANNOTATION}restart-scope": "Job", f"{ANNOTATION}node-loss-timeout-seconds": "30"}
    try:
        start_training(watched, ddp_job(name, annotations, kept=kept, lost=lost), lost=lost)
        before = watched.worker()["metadata"]["uid"]
        stopped_at, started = datetime.now(UTC), time.monotonic()
        cluster.node("stop", lost)
        try:
            follow(watched, started, job_timeout, result)
        finally:
            result.notes.append(f"the node started again {time.monotonic() - started:.0f} s after its stop")
            measure(cluster, watched, operator, leading, before, stopped_at, result)
            cluster.node("start", lost)
            wait_for(f"{lost.name} Ready again", lambda: cluster.ready(lost), 180)
    finally:
        clean_up(watched)


def measure(
    cluster: Cluster,
    watched: Watched,
    operator: Operator,
    leading: str,
    before: str,
    stopped_at: datetime,
    result: NodeLossResult,
) -> None:
    """What the API says happened, and when, while the node is still down."""
    result.acting_again_seconds = seconds_after(stopped_at, operator.acting_since(cluster, leading))
    events = cluster.api.get(f"/api/v1/namespaces/{watched.namespace}/events")["items"]
    said = [e for e in events if e["reason"] == "NodeLost" or "NodeLost" in e.get("message", "")]
    when = [seconds_after(stopped_at, e.get("firstTimestamp") or e.get("eventTime")) for e in said]
    result.node_lost_seconds = min((w for w in when if w is not None), default=None)
    worker = watched.pods().get(f"{watched.name}-worker-0")
    if worker is not None and worker["metadata"]["uid"] != before:
        result.worker_replaced_seconds = seconds_after(stopped_at, worker["metadata"]["creationTimestamp"])
        result.notes.append(f"the worker's last pod on {worker['spec'].get('nodeName')}")
    result.notes.append(f"last condition: {watched.condition_text()}")


def run(cluster: Cluster, operator_name: str, args: argparse.Namespace) -> NodeLossResult:
    operator = OPERATORS[operator_name]
    result = NodeLossResult("leader's node lost", operator_name, outcome="")
    name = f"leader-node-{int(time.time()) % 100000}"
    shutil.rmtree(CHECKPOINTS / name, ignore_errors=True)
    log(f"{operator_name}: installing")
    try:
        with installed(cluster, operator):
            with contextlib.suppress(ApiError):
                cluster.api.create("/api/v1/namespaces", {"metadata": {"name": "node-loss"}})
            log(f"{operator_name}: the leader's node lost")
            leaders_node_lost(cluster, name, operator, result, args.job_timeout)
    except Exception as error:  # the other operator still runs: one broken case is reported, not fatal
        result.outcome = result.outcome or "bench error"
        result.notes.append(f"bench: {type(error).__name__}: {error}")
    log(f"{operator_name}: {result.outcome}")
    return result


def markdown(results: list[NodeLossResult]) -> str:
    def seconds(value: float | None) -> str:
        return f"{value} s" if value is not None else "—"

    columns = ["operator", "replicas on", "an operator acting again", "`NodeLost`", "worker replaced"]
    columns += ["resumed (from step)", "outcome (ended)"]
    rows = ["| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]
    for r in results:
        resumed = (
            f"{seconds(r.fault_to_resumed_seconds)} ({r.resumed_from_step})" if r.resumed_from_step else "—"
        )
        rows.append(
            f"| {r.operator} | {', '.join(r.replicas_on)} | {seconds(r.acting_again_seconds)} | "
            f"{seconds(r.node_lost_seconds)} | {seconds(r.worker_replaced_seconds)} | {resumed} | "
            f"{r.outcome} ({seconds(r.fault_to_end_seconds)}) |"
        )
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--operators", nargs="+", choices=list(OPERATORS), default=list(OPERATORS))
    parser.add_argument("--dir", type=Path, help="an envtest already started with --real-nodes 2")
    parser.add_argument("--job-timeout", type=float, default=480.0)
    parser.add_argument("--results", type=Path, help="append each result here as a JSON line")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    CHECKPOINTS.mkdir(parents=True, exist_ok=True)
    CHECKPOINTS.chmod(0o777)
    results = []
    with two_nodes(args.dir) as cluster:
        for operator_name in args.operators:
            result = run(cluster, operator_name, args)
            results.append(result)
            report(result, args.results)
    if args.markdown:
        print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
