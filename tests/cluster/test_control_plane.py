"""The control plane is the pinned release, its fake nodes are Ready and schedulable, kubectl drives it."""

from __future__ import annotations

import json
import subprocess

import pytest

from kubetrain.envtest import binaries
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.nodes import FAKE_NODE_LABEL, GPU_RESOURCE, is_schedulable
from kubetrain.envtest.pytest_plugin import EnvtestCluster
from kubetrain.kube.runtime.leader import parse_micro_time
from waiting import eventually

pytestmark = pytest.mark.cluster


def test_api_server_is_the_release_the_go_module_pins(kube_api: KubeApi) -> None:
    assert kube_api.get("/version")["gitVersion"] == binaries.kubernetes_version()


def test_kubectl_built_with_it_reports_the_same_client_and_server_version(envtest: EnvtestCluster) -> None:
    kubectl = binaries.locate().kubectl
    result = subprocess.run(
        [str(kubectl), f"--kubeconfig={envtest.kubeconfig}", "version", "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    versions = json.loads(result.stdout)
    assert versions["clientVersion"]["gitVersion"] == versions["serverVersion"]["gitVersion"]


def test_fake_nodes_are_ready_untainted_and_offer_gpus(kube_api: KubeApi) -> None:
    nodes = kube_api.get("/api/v1/nodes", {"labelSelector": FAKE_NODE_LABEL})["items"]
    assert nodes
    for node in nodes:
        assert is_schedulable(node), node["metadata"]["name"]
        assert int(node["status"]["allocatable"][GPU_RESOURCE]) > 0


def test_node_leases_are_renewed_by_the_heartbeat(kube_api: KubeApi) -> None:
    node = kube_api.get("/api/v1/nodes", {"labelSelector": FAKE_NODE_LABEL})["items"][0]["metadata"]["name"]
    path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}"
    first = kube_api.get(path)["spec"]["renewTime"]
    renewed = eventually(
        lambda: (renew := kube_api.get(path)["spec"]["renewTime"]) != first and renew,
        f"a renewal of the lease of {node} after {first}",
    )
    before, after = parse_micro_time(first), parse_micro_time(renewed)
    assert before is not None and after is not None and after > before


def test_each_test_gets_a_fresh_empty_namespace(kube_api: KubeApi, namespace: str) -> None:
    assert kube_api.get(f"/api/v1/namespaces/{namespace}")["status"]["phase"] == "Active"
    assert kube_api.get(f"/api/v1/namespaces/{namespace}/pods")["items"] == []
