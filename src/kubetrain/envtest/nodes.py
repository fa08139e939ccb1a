"""Fake Nodes: Ready, with cpu / memory / pods / nvidia.com/gpu capacity, kept Ready by a heartbeat.

There is no kubelet, so the heartbeat renews each Node's Lease in ``kube-node-lease`` (what the node-lifecycle
controller watches) and refreshes the Ready condition, as a kubelet does. It runs as a small detached process
(``python -m kubetrain.envtest.nodes``) so it outlives ``kubetrain envtest start``; its pid is recorded like
the control plane's.
"""

from __future__ import annotations

import argparse
import datetime
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import httpx

from kubetrain.envtest.kubeapi import STRATEGIC_MERGE_PATCH, ApiError, KubeApi, KubeObject

FAKE_NODE_LABEL = "kubetrain.dev/envtest-node"
LOST_ANNOTATION = "kubetrain.dev/envtest-lost"
"""On a fake node a test declared lost (``PodDriver.lose_node``): the heartbeat leaves its Ready condition
alone, as a dead kubelet would, until the test recovers it."""
GPU_RESOURCE = "nvidia.com/gpu"
LEASE_DURATION_SECONDS = 40
HEARTBEAT_SECONDS = 10.0
NODE_STATUS_EVERY = (
    6  # heartbeats between Ready-condition refreshes (a kubelet reports status every minute or so)
)
GIVE_UP_AFTER_SECONDS = 300.0  # with the API server gone this long, the control plane was stopped without us


@dataclass(frozen=True)
class NodeShape:
    """What every fake node offers the scheduler."""

    cpu: str = "8"
    memory: str = "32Gi"
    pods: int = 110
    gpus: int = 4
    ephemeral_storage: str | None = None
    """Pods that request ``ephemeral-storage`` (upstream's MPIJob v1 launcher does) fit only where it is."""

    def capacity(self) -> dict[str, str]:
        capacity = {"cpu": self.cpu, "memory": self.memory, "pods": str(self.pods)}
        if self.gpus:
            capacity[GPU_RESOURCE] = str(self.gpus)
        if self.ephemeral_storage:
            capacity["ephemeral-storage"] = self.ephemeral_storage
        return capacity


def node_names(count: int) -> list[str]:
    return [f"envtest-node-{index}" for index in range(count)]


def node_address(index: int) -> str:
    # A documentation-style private range nothing on the machine uses; pods on node i get 10.244.i.x.
    return f"10.200.0.{index + 1}"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def ready_condition() -> KubeObject:
    now = _now()
    return {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "envtest heartbeat is posting ready status",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }


def fake_node(name: str, index: int, shape: NodeShape, kubernetes_version: str) -> KubeObject:
    """A Node object with its status (the API server keeps status given at creation)."""
    pressure = [
        {"type": kind, "status": "False", "reason": f"KubeletHasNo{kind}", "lastHeartbeatTime": _now()}
        for kind in ("MemoryPressure", "DiskPressure", "PIDPressure")
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                FAKE_NODE_LABEL: "true",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
        },
        "spec": {},
        "status": {
            "capacity": shape.capacity(),
            "allocatable": shape.capacity(),
            "conditions": [*pressure, ready_condition()],
            "addresses": [
                {"type": "InternalIP", "address": node_address(index)},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "kubeletVersion": kubernetes_version,
                "kubeProxyVersion": kubernetes_version,
                "operatingSystem": "linux",
                "architecture": "amd64",
                "containerRuntimeVersion": "envtest://0",
                "osImage": "kubetrain envtest",
                "kernelVersion": "",
                "machineID": name,
                "systemUUID": name,
                "bootID": name,
            },
        },
    }


def register_nodes(api: KubeApi, count: int, shape: NodeShape, kubernetes_version: str) -> list[str]:
    """Create (or recreate) the fake nodes and their leases; return their names."""
    names = node_names(count)
    for index, name in enumerate(names):
        path = f"/api/v1/nodes/{name}"
        if api.exists(path):
            api.delete(path)
        api.create("/api/v1/nodes", fake_node(name, index, shape, kubernetes_version))
        renew_lease(api, name)
    return names


def is_schedulable(node: KubeObject) -> bool:
    """Ready and free of the not-ready taint the TaintNodesByCondition admission plugin puts on new nodes."""
    ready = any(
        condition["type"] == "Ready" and condition["status"] == "True"
        for condition in node.get("status", {}).get("conditions", [])
    )
    return ready and not node.get("spec", {}).get("taints")


def renew_lease(api: KubeApi, name: str) -> None:
    path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"
    spec = {"holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION_SECONDS, "renewTime": _micro_now()}
    try:
        api.patch(path, {"spec": spec})
    except ApiError as error:
        if error.code != 404:
            raise
        api.create(
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name},
                "spec": spec,
            },
        )


def refresh_ready(api: KubeApi, name: str) -> None:
    # Strategic merge keys conditions by type, so only Ready changes; the transition time stays when already
    # Ready.
    node = api.get(f"/api/v1/nodes/{name}")
    if LOST_ANNOTATION in (node["metadata"].get("annotations") or {}):
        return
    current = next((c for c in node["status"].get("conditions", []) if c["type"] == "Ready"), None)
    condition = ready_condition()
    if current is not None and current["status"] == "True":
        condition["lastTransitionTime"] = current.get("lastTransitionTime", condition["lastTransitionTime"])
    api.patch(f"/api/v1/nodes/{name}/status", {"status": {"conditions": [condition]}}, STRATEGIC_MERGE_PATCH)


def heartbeat(api: KubeApi, names: Sequence[str]) -> None:
    """Renew leases every HEARTBEAT_SECONDS until SIGTERM, or until the API server has been gone for
    minutes."""
    stopping = False

    def stop(_signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    beat = 0
    last_success = time.monotonic()
    while not stopping:
        try:
            for name in names:
                renew_lease(api, name)
                if beat % NODE_STATUS_EVERY == 0:
                    refresh_ready(api, name)
            last_success = time.monotonic()
        except (ApiError, httpx.HTTPError, OSError) as error:
            print(f"heartbeat failed: {error}", file=sys.stderr, flush=True)
            if time.monotonic() - last_success > GIVE_UP_AFTER_SECONDS:
                return
        beat += 1
        deadline = time.monotonic() + HEARTBEAT_SECONDS
        while not stopping and time.monotonic() < deadline:
            time.sleep(0.2)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Keep envtest's fake nodes Ready (the kubelet's heartbeat).")
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("nodes", nargs="+")
    args = parser.parse_args(argv)
    with KubeApi.from_kubeconfig(args.kubeconfig) as api:
        heartbeat(api, args.nodes)


if __name__ == "__main__":
    main()
