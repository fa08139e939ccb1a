"""A replica run by a Deployment says as it starts how many replicas that Deployment runs, and a lone one what
it gives up: found through its pod's and its ReplicaSet's controller references (the downward API's
MY_POD_NAMESPACE and MY_POD_NAME, as the chart and the kustomize base set them)."""

from __future__ import annotations

from typing import Any

import pytest
from operator_support import StartOperator, eventually

from kubetrain.envtest.kubeapi import KubeApi

pytestmark = pytest.mark.cluster


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    container = {"name": "training-operator", "image": "localhost/kubetrain/operator:0.1.0"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


@pytest.mark.parametrize(
    ("replicas", "said"),
    [
        (1, "runs one replica: if its node is lost, no job is reconciled"),
        (2, "runs 2 replicas: one leads, the others stand by"),
    ],
)
def test_a_replica_says_at_start_what_its_deployment_runs(
    start_operator: StartOperator, kube_api: KubeApi, namespace: str, replicas: int, said: str
) -> None:
    kube_api.create(
        f"/apis/apps/v1/namespaces/{namespace}/deployments", _deployment("training-operator", replicas)
    )
    # The controller manager's pods stand for the operator's: this one runs on the host, as that pod.
    pods = eventually(
        lambda: kube_api.get(f"/api/v1/namespaces/{namespace}/pods")["items"], "the Deployment's pods"
    )
    pod = pods[0]["metadata"]["name"]

    operator = start_operator(
        "--leader-elect",
        "--leader-election-namespace",
        namespace,
        env={"MY_POD_NAMESPACE": namespace, "MY_POD_NAME": pod},
    )

    line = eventually(
        lambda: next(
            (line for line in operator.log.splitlines() if "Deployment" in line and said in line), None
        ),
        "what the replica says",
    )
    assert f"Deployment {namespace}/training-operator" in line
