"""Two real nodes (``envtest start --real-nodes 2``): pods of one reach pods of the other by name, and a node
lost (``envtest node stop``) goes NotReady with its pods' processes gone, then comes back (``node start``).
Under the operator installed in-cluster (two replicas, one per node), a PyTorchJob's ranks train across both,
and losing the node of the operator's leader hands the Lease to the other replica, which replaces the job's
worker lost with the node.

The cluster is this module's own, started before the session's single node (conftest orders the module
right after the node lifecycle test): bridge names are fixed, one real-node cluster runs on a machine at a
time, and the session's tests expect every pod on ``real-node-0``. With a shared envtest
(``KUBETRAIN_E2E_ENVTEST_DIR``) the module uses it when it has two real nodes and is skipped otherwise.
"""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from e2e.realpods import (
    GREETING_SERVER,
    RealCluster,
    job_pods_once_ended,
    pod,
    scratch_namespace,
    wait_for_phase,
    wait_until,
)
from e2e.session_operator import DEPLOYMENT, leader, lease_path, operator_pods, wait_available
from kubetrain.envtest import controlplane, realnode
from kubetrain.envtest.kubeapi import KubeApi
from waiting import PATIENCE

pytestmark = pytest.mark.e2e

NODES = realnode.real_nodes(2)
# The node-lifecycle controller's grace period (50 s), then its taint and status writes as any wait.
NOT_READY_TIMEOUT_SECONDS = 50 + PATIENCE

CLIENT = textwrap.dedent(
    """
    import socket, time
    for attempt in range(300):
        try:
            print("resolves to", socket.gethostbyname("server-0.peers"), flush=True)
            with socket.create_connection(("server-0.peers", 23456), timeout=2) as connection:
                print(connection.recv(100).decode().strip(), flush=True)
                break
        except OSError:
            time.sleep(0.2)
    else:
        raise SystemExit("no connection")
    """
)


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    shared = os.environ.get("KUBETRAIN_E2E_ENVTEST_DIR")
    if shared:
        state = controlplane.EnvtestState.read(Path(shared))
        if state is None or len(state.real_nodes) < len(NODES):
            pytest.skip("the shared envtest has fewer than two real nodes (start it with --real-nodes 2)")
        run_dir = Path(shared)
        yield _cluster(run_dir)
        return
    run_dir = tmp_path_factory.mktemp("two-nodes")
    options = controlplane.EnvtestOptions(nodes=0, real_nodes=len(NODES))
    try:
        controlplane.start(run_dir, options)
        yield _cluster(run_dir)
    finally:
        controlplane.stop(run_dir)
        assert realnode.leftovers(run_dir, NODES) == []


def _cluster(run_dir: Path) -> RealCluster:
    for node in NODES:
        realnode.load_images(node.paths(run_dir), ["python"])
    kubeconfig = run_dir / controlplane.ADMIN_KUBECONFIG
    return RealCluster(run_dir, kubeconfig, KubeApi.from_kubeconfig(kubeconfig))


@pytest.fixture
def namespace(two_nodes: RealCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    with scratch_namespace(two_nodes, request.node.name.lower().replace("_", "-")[:40].strip("-")) as name:
        yield name


def _on(node: realnode.RealNode, manifest: dict[str, Any]) -> dict[str, Any]:
    manifest["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node.name}
    return manifest


def _taints(api: KubeApi, node: realnode.RealNode) -> set[str]:
    return {taint["key"] for taint in api.get(f"/api/v1/nodes/{node.name}")["spec"].get("taints") or []}


def _ready(api: KubeApi, node: realnode.RealNode) -> str:
    conditions = api.get(f"/api/v1/nodes/{node.name}")["status"]["conditions"]
    return str(next(c["status"] for c in conditions if c["type"] == "Ready"))


def _processes_with(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if any(marker in part for part in process.info["cmdline"] or []):
            found.append(process)
    return found


def test_nodes_get_their_own_bridge_address_and_pod_subnet(two_nodes: RealCluster) -> None:
    for node in NODES:
        got = two_nodes.api.get(f"/api/v1/nodes/{node.name}")

        assert {"type": "InternalIP", "address": node.address} in got["status"]["addresses"]
        assert got["spec"]["podCIDR"] == node.pod_subnet
        assert _ready(two_nodes.api, node) == "True"


def test_pod_on_one_node_reaches_a_pod_on_the_other_by_its_headless_service_name(
    two_nodes: RealCluster, namespace: str
) -> None:
    api = two_nodes.api
    api.create(
        f"/api/v1/namespaces/{namespace}/services",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "peers"},
            "spec": {"clusterIP": "None", "selector": {"app": "server-0"}, "ports": [{"port": 23456}]},
        },
    )
    pods = f"/api/v1/namespaces/{namespace}/pods"
    server = pod("server-0", GREETING_SERVER, hostname="server-0", subdomain="peers", restartPolicy="Never")
    api.create(pods, _on(NODES[1], server))
    api.create(pods, _on(NODES[0], pod("client", CLIENT, restartPolicy="Never")))

    client = wait_for_phase(api, namespace, "client", ("Succeeded", "Failed"))
    served = wait_for_phase(api, namespace, "server-0", ("Succeeded", "Failed"))
    logs = two_nodes.kubectl("logs", "-n", namespace, "client").stdout.splitlines()

    assert (client["spec"]["nodeName"], served["spec"]["nodeName"]) == (NODES[0].name, NODES[1].name)
    assert (client["status"]["phase"], served["status"]["phase"]) == ("Succeeded", "Succeeded")
    resolved = ipaddress.ip_address(logs[0].removeprefix("resolves to "))
    assert resolved == ipaddress.ip_address(served["status"]["podIP"])
    assert resolved in ipaddress.ip_network(NODES[1].pod_subnet)
    assert logs[-1] == "hello from server-0"


def test_node_stop_is_a_node_loss_and_node_start_brings_it_back_ready(
    two_nodes: RealCluster, namespace: str
) -> None:
    api = two_nodes.api
    lost, kept = NODES[1], NODES[0]
    markers = {node.name: f"kubetrain-e2e-{node.name}-{secrets.token_hex(4)}" for node in NODES}
    pods = f"/api/v1/namespaces/{namespace}/pods"
    for node in NODES:
        sleeper = pod(f"sleeper-{node.index}", f"import time  # {markers[node.name]}\ntime.sleep(3600)")
        api.create(pods, _on(node, sleeper))
    for node in NODES:
        wait_for_phase(api, namespace, f"sleeper-{node.index}", ("Running",))
        wait_until(f"{node.name}'s sleeper process", lambda n=node: _processes_with(markers[n.name]))

    stopped = two_nodes.kubetrain("envtest", "node", "stop", lost.name, "--dir", str(two_nodes.run_dir))
    try:
        assert stopped.returncode == 0, stopped.stderr
        assert _processes_with(markers[lost.name]) == []
        assert _processes_with(markers[kept.name]) != []
        wait_until(f"{lost.name} NotReady", lambda: _ready(api, lost) != "True", NOT_READY_TIMEOUT_SECONDS)
        # The node lifecycle controller taints the node in a pass of its own after it marks it Unknown.
        unreachable = "node.kubernetes.io/unreachable"
        wait_until(f"{lost.name} tainted {unreachable}", lambda: unreachable in _taints(api, lost))
        assert _ready(api, kept) == "True"
    finally:
        started = two_nodes.kubetrain("envtest", "node", "start", lost.name, "--dir", str(two_nodes.run_dir))

    assert started.returncode == 0, started.stderr
    assert _ready(api, lost) == "True"
    wait_until(f"{lost.name}'s taints lifted", lambda: not _taints(api, lost))
    # The kubelet back finds its pod's sandbox dead and runs the pod again (restartPolicy Always).
    wait_until(f"the sleeper on {lost.name} running again", lambda: _processes_with(markers[lost.name]))


# --- PyTorchJobs across the two nodes, under the operator installed in-cluster: two replicas, one per node

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pytorch-ddp" / "job.yaml"
OPERATOR_OVERLAY = Path(__file__).resolve().parent / "two-node-operator-overlay"
JOB = "pytorch-ddp"
JOB_TIMEOUT_SECONDS = 600.0
PYTORCHJOBS = "/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs"


def _ddp_job(
    steps: int, annotations: dict[str, str], master_on: realnode.RealNode = NODES[0]
) -> dict[str, Any]:
    """The DDP example with its master on ``master_on`` and its two workers one per node (a hard topology
    spread that ignores tainted nodes, so a lost node's worker is replaced on the node left)."""
    job: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    job["metadata"]["annotations"] = annotations
    for kind, spec in job["spec"]["pytorchReplicaSpecs"].items():
        pod_spec = spec["template"]["spec"]
        pod_spec["containers"][0]["args"] = ["--steps", str(steps), "--checkpoint-dir", "/tmp/checkpoints"]
        if kind == "Master":
            pod_spec["nodeSelector"] = {"kubernetes.io/hostname": master_on.name}
        else:
            spec["template"].setdefault("metadata", {})["labels"] = {"spread": "workers"}
            pod_spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "nodeTaintsPolicy": "Honor",
                    "labelSelector": {"matchLabels": {"spread": "workers"}},
                }
            ]
    return job


def _job_pods(cluster: RealCluster, namespace: str) -> dict[str, dict[str, Any]]:
    selector = {"labelSelector": f"training.kubeflow.org/job-name={JOB}"}
    pods = cluster.api.get(f"/api/v1/namespaces/{namespace}/pods", selector)["items"]
    return {p["metadata"]["name"]: p for p in pods}


def _outcome(cluster: RealCluster, namespace: str) -> str | None:
    job = cluster.api.get(f"{PYTORCHJOBS.format(namespace=namespace)}/{JOB}")
    conditions = job.get("status", {}).get("conditions") or []
    done = [c["type"] for c in conditions if c["type"] in ("Succeeded", "Failed") and c["status"] == "True"]
    return done[0] if done else None


def _logs(cluster: RealCluster, namespace: str, pod_name: str) -> str:
    return cluster.kubectl("logs", "-n", namespace, pod_name, "-c", "pytorch").stdout


def _print_pods(cluster: RealCluster, namespace: str) -> None:
    """Where each of the job's pods is and what its ranks said, for a job that did not finish."""
    for name, found in sorted(_job_pods(cluster, namespace).items()):
        statuses = found.get("status", {}).get("containerStatuses") or []
        print(f"--- {name} on {found['spec'].get('nodeName')}: {found['status'].get('phase')} {statuses}")
        print(cluster.kubectl("logs", "-n", namespace, name, "-c", "pytorch", "--tail", "30").stdout)
        print(
            cluster.kubectl(
                "logs", "-n", namespace, name, "-c", "pytorch", "--previous", "--tail", "15"
            ).stdout
        )


@pytest.fixture(scope="module")
def installed_operator(two_nodes: RealCluster) -> Iterator[RealCluster]:
    """The standalone overlay on both nodes, the operator's image imported into each; its Deployment deleted
    at the module's end, and its pods gone."""
    for node in NODES:
        realnode.load_images(node.paths(two_nodes.run_dir), ["operator", "pytorch", "busybox"])
    applied = two_nodes.kubectl("apply", "--server-side", "-k", str(OPERATOR_OVERLAY))
    assert applied.returncode == 0, applied.stderr
    try:
        wait_available(two_nodes)
        yield two_nodes
    finally:
        for found in operator_pods(two_nodes):
            name = found["metadata"]["name"]
            log = two_nodes.kubectl("logs", "-n", "kubeflow", name, "--tail", "40").stdout
            print(f"--- operator {name} on {found['spec'].get('nodeName')}\n{log}")
        two_nodes.api.delete(DEPLOYMENT)
        wait_until("the operator's pods gone", lambda: not operator_pods(two_nodes))


def _ready_pod(found: dict[str, Any]) -> bool:
    conditions = found.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _timeline(start: datetime, stamps: dict[str, str | None]) -> str:
    """Each API timestamp as the seconds after ``start``, for docs/operations.md's table (no bound is
    asserted on any: bench/two_node_faults.py measures them)."""

    def after(stamp: str | None) -> str:
        if not stamp:
            return "-"
        return f"{(datetime.fromisoformat(stamp.replace('Z', '+00:00')) - start).total_seconds():.0f} s"

    return ", ".join(f"{what} at {after(stamp)}" for what, stamp in stamps.items())


def test_ddp_example_trains_to_succeeded_with_its_ranks_on_two_nodes(
    installed_operator: RealCluster, namespace: str
) -> None:
    cluster = installed_operator
    cluster.api.create(PYTORCHJOBS.format(namespace=namespace), _ddp_job(60, {}))

    outcome = wait_until(f"{JOB} done", lambda: _outcome(cluster, namespace), JOB_TIMEOUT_SECONDS)
    assert outcome == "Succeeded", _logs(cluster, namespace, f"{JOB}-master-0")
    pods = job_pods_once_ended(cluster.api, namespace, JOB)

    assert pods[f"{JOB}-master-0"]["spec"]["nodeName"] == NODES[0].name
    assert {pods[f"{JOB}-worker-{i}"]["spec"]["nodeName"] for i in (0, 1)} == {node.name for node in NODES}
    assert "training finished" in _logs(cluster, namespace, f"{JOB}-master-0")
    for name, pod_ in pods.items():
        assert re.search(r"^rank \d/3 joined the process group", _logs(cluster, namespace, name), re.M)
        assert pod_["status"]["phase"] == "Succeeded"


@pytest.mark.timeout(900)
def test_losing_the_leaders_node_hands_over_to_the_replica_on_the_other_which_replaces_the_lost_worker(
    installed_operator: RealCluster, namespace: str
) -> None:
    cluster = installed_operator
    replicas = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in operator_pods(cluster)}
    assert sorted(replicas.values()) == sorted(node.name for node in NODES), "one replica per node"
    leading = wait_until("a Lease holder", lambda: leader(cluster))
    [lost] = [node for node in NODES if node.name == replicas[leading]]
    [kept] = [node for node in NODES if node is not lost]
    # The master where the operator stays, a worker where it is lost. 150 steps of 0.2 s: long enough to
    # lose the node mid-training. A static rendezvous cannot take one rank back (a rank restarted alone can
    # join its peers' old store just before it closes, and every rank then waits for ever: seen here), so
    # the job restarts every replica together; each rank's checkpoints stay in its own container, so they
    # all start over together.
    job = _ddp_job(
        150,
        {"kubetrain.dev/node-loss-timeout-seconds": "30", "kubetrain.dev/restart-scope": "Job"},
        master_on=kept,
    )
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["containers"][0]["args"] += ["--step-seconds", "0.2"]
    cluster.api.create(PYTORCHJOBS.format(namespace=namespace), job)
    wait_until(
        f"{JOB}'s master training",
        lambda: "step 10 " in _logs(cluster, namespace, f"{JOB}-master-0"),
        JOB_TIMEOUT_SECONDS,
    )
    before = _job_pods(cluster, namespace)
    (lost_worker,) = [n for n, p in before.items() if p["spec"]["nodeName"] == lost.name]

    stopped_at = datetime.now(UTC)
    stopped = cluster.kubetrain("envtest", "node", "stop", lost.name, "--dir", str(cluster.run_dir))
    try:
        assert stopped.returncode == 0, stopped.stderr

        def successor() -> str | None:
            holder = leader(cluster)
            return holder if holder not in (None, leading) else None

        took_over = wait_until("another replica leading", successor, NOT_READY_TIMEOUT_SECONDS)
        outcome = wait_until(f"{JOB} done", lambda: _outcome(cluster, namespace), JOB_TIMEOUT_SECONDS)
        # The lost replica evicted after its toleration, and a new one ready on the node left (the lost one
        # stays Terminating until its kubelet is back to say it is gone).
        [replacement] = wait_until(
            "a new operator replica ready",
            lambda: [
                p for p in operator_pods(cluster) if p["metadata"]["name"] not in replicas and _ready_pod(p)
            ],
            NOT_READY_TIMEOUT_SECONDS,
        )
    except AssertionError:
        _print_pods(cluster, namespace)
        raise
    finally:
        started = cluster.kubetrain("envtest", "node", "start", lost.name, "--dir", str(cluster.run_dir))
    after = _job_pods(cluster, namespace)
    job_status = cluster.api.get(f"{PYTORCHJOBS.format(namespace=namespace)}/{JOB}")["status"]
    events = cluster.api.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    node_lost = [e for e in events if e["reason"] == "Disrupted" and "NodeLost" in e["message"]]

    assert started.returncode == 0, started.stderr
    assert replicas[took_over] == kept.name
    assert outcome == "Succeeded", _logs(cluster, namespace, f"{JOB}-master-0")
    assert any(lost_worker in e["message"] for e in node_lost), [e["message"] for e in events]
    assert after[lost_worker]["metadata"]["uid"] != before[lost_worker]["metadata"]["uid"]
    assert after[lost_worker]["spec"]["nodeName"] == kept.name
    assert replacement["spec"]["nodeName"] == kept.name
    assert job_status["replicaStatuses"]["Worker"].get("disruptions") == 1
    assert "training finished" in _logs(cluster, namespace, f"{JOB}-master-0")
    # Rank 0 reported its progress through the takeover to the status endpoint every replica serves: its last
    # report is in the job's status.
    job_path = f"{PYTORCHJOBS.format(namespace=namespace)}/{JOB}"
    wait_until(
        "the last progress report in the status",
        lambda: cluster.api.get(job_path)["status"].get("trainerStatus", {}).get("progressPercentage") == 100,
    )
    [succeeded] = [c for c in job_status["conditions"] if c["type"] == "Succeeded"]
    stamps = {
        "another replica leading": cluster.api.get(lease_path())["spec"].get("acquireTime"),
        "the worker's pod deleted (Disrupted, NodeLost)": node_lost[0].get("firstTimestamp"),
        "the worker replaced": after[lost_worker]["metadata"]["creationTimestamp"],
        "the operator replica replaced": replacement["metadata"]["creationTimestamp"],
        "Succeeded": succeeded["lastTransitionTime"],
    }
    print(f"after the leader's node stopped: {_timeline(stopped_at, stamps)}")
