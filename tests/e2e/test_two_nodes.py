"""Two real nodes (``envtest start --real-nodes 2``): pods of one reach pods of the other by name, and a node
lost (``envtest node stop``) goes NotReady with its pods' processes gone, then comes back (``node start``).

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
from kubetrain.envtest import controlplane, realnode
from kubetrain.envtest.kubeapi import ApiError, KubeApi
from operator_process import running_operator
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


# --- PyTorchJobs across the two nodes, under an operator on the host -------------------------------------

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pytorch-ddp" / "job.yaml"
CRD = Path(__file__).resolve().parents[2] / "manifests" / "crds" / "kubeflow.org_pytorchjobs.yaml"
BUSYBOX = "localhost/kubetrain/busybox:1.35"
JOB = "pytorch-ddp"
JOB_TIMEOUT_SECONDS = 600.0
PYTORCHJOBS = "/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs"


@pytest.fixture(scope="module")
def host_operator(two_nodes: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    """This checkout's operator as a host process (the admin kubeconfig), PyTorchJobs only: what these tests
    prove is the pods' placement and the node-loss handling, not the in-cluster install the session's tests
    cover; no operator image to build or import into two nodes."""
    for node in NODES:
        realnode.load_images(node.paths(two_nodes.run_dir), ["pytorch", "busybox"])
    applied = two_nodes.kubectl("apply", "--server-side", "-f", str(CRD))
    assert applied.returncode == 0, applied.stderr
    wait_until(
        "PyTorchJobs served", lambda: _served(two_nodes.api, "/apis/kubeflow.org/v1/pytorchjobs"), PATIENCE
    )
    log_path = tmp_path_factory.mktemp("host-operator") / "operator.log"
    flags = ("--enable-scheme", "pytorchjob", f"--pytorch-init-container-image={BUSYBOX}")
    with running_operator(two_nodes.kubeconfig, None, log_path, flags):
        yield two_nodes


def _served(api: KubeApi, path: str) -> bool:
    """A CRD just created is served a moment later: 404 before, then 429 while its storage initializes."""
    try:
        return api.exists(path)
    except ApiError as error:
        if error.code == 429:
            return False
        raise


def _ddp_job(steps: int, annotations: dict[str, str]) -> dict[str, Any]:
    """The DDP example with its master on real-node-0 and its two workers one per node (a hard topology
    spread that ignores tainted nodes, so a lost node's worker is replaced on the node left)."""
    job: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    job["metadata"]["annotations"] = annotations
    for kind, spec in job["spec"]["pytorchReplicaSpecs"].items():
        pod_spec = spec["template"]["spec"]
        pod_spec["containers"][0]["args"] = ["--steps", str(steps), "--checkpoint-dir", "/tmp/checkpoints"]
        if kind == "Master":
            pod_spec["nodeSelector"] = {"kubernetes.io/hostname": NODES[0].name}
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


def test_ddp_example_trains_to_succeeded_with_its_ranks_on_two_nodes(
    host_operator: RealCluster, namespace: str
) -> None:
    cluster = host_operator
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


@pytest.mark.timeout(900)
def test_a_lost_nodes_worker_is_replaced_on_the_other_node_and_the_job_goes_on_to_succeed(
    host_operator: RealCluster, namespace: str
) -> None:
    cluster = host_operator
    lost = NODES[1]
    # 150 steps of 0.2 s: long enough to lose a node mid-training. A static rendezvous cannot take one rank
    # back (a rank restarted alone can join its peers' old store just before it closes, and every rank then
    # waits for ever: seen here), so the job restarts every replica together; each rank's checkpoints stay
    # in its own container, so they all start over together.
    job = _ddp_job(
        150, {"kubetrain.dev/node-loss-timeout-seconds": "30", "kubetrain.dev/restart-scope": "Job"}
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

    stopped = cluster.kubetrain("envtest", "node", "stop", lost.name, "--dir", str(cluster.run_dir))
    try:
        assert stopped.returncode == 0, stopped.stderr
        outcome = wait_until(f"{JOB} done", lambda: _outcome(cluster, namespace), JOB_TIMEOUT_SECONDS)
    except AssertionError:
        _print_pods(cluster, namespace)
        raise
    finally:
        started = cluster.kubetrain("envtest", "node", "start", lost.name, "--dir", str(cluster.run_dir))
    after = _job_pods(cluster, namespace)
    status = cluster.api.get(f"{PYTORCHJOBS.format(namespace=namespace)}/{JOB}")["status"]
    events = cluster.api.get(f"/api/v1/namespaces/{namespace}/events")["items"]

    assert started.returncode == 0, started.stderr
    assert outcome == "Succeeded", _logs(cluster, namespace, f"{JOB}-master-0")
    assert after[lost_worker]["metadata"]["uid"] != before[lost_worker]["metadata"]["uid"]
    assert after[lost_worker]["spec"]["nodeName"] == NODES[0].name
    assert status["replicaStatuses"]["Worker"].get("disruptions") == 1
    disrupted = [e["message"] for e in events if e["reason"] == "Disrupted"]
    assert any(lost_worker in message and "NodeLost" in message for message in disrupted), disrupted
    assert "training finished" in _logs(cluster, namespace, f"{JOB}-master-0")
