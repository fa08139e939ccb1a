"""The operator in-cluster: its own image on the real node, installed with the standalone kustomize overlay,
running under its ServiceAccount and least-privilege ClusterRole."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.realpods import RealCluster, wait_until
from e2e.session_operator import NAMESPACE, leader, operator_pods
from kubetrain.envtest import realnode

# Images are built (once per recipe) and imported into the node inside this tier's first fixtures: minutes
# when cold, more than the suite's default 300 s per test.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def _log(operator: RealCluster, pod: dict[str, Any]) -> str:
    logs = operator.kubectl("logs", "-n", NAMESPACE, pod["metadata"]["name"])
    assert logs.returncode == 0, logs.stderr
    return logs.stdout


def test_two_operator_pods_run_from_the_local_image_as_non_root_one_of_them_leading(
    operator: RealCluster,
) -> None:
    pods = operator_pods(operator)

    # The overlay's default; on one node both run there, the spread over nodes being preferred.
    assert len(pods) == 2
    for pod in pods:
        status = pod["status"]["containerStatuses"][0]
        assert status["ready"] is True
        assert status["image"].startswith("localhost/kubetrain/operator:")
        assert pod["spec"]["nodeName"] == realnode.NODE_NAME
    assert wait_until("a Lease holder", lambda: leader(operator)) in [pod["metadata"]["name"] for pod in pods]


def test_operator_logs_have_no_forbidden_request(operator: RealCluster) -> None:
    for pod in operator_pods(operator):
        log = _log(operator, pod)
        assert log.strip()
        # An API error is logged as "403 Forbidden: ... is forbidden: User ... cannot ...". Not a bare
        # "403": the leader's random identity (a UUID) held "4039" in one CI run.
        assert "forbidden" not in log.lower()


def test_each_replica_says_at_start_how_many_replicas_its_deployment_runs(operator: RealCluster) -> None:
    # Said as the caches have synced, which is also when the pod turns ready: a moment after, at most.
    said = "Deployment kubeflow/training-operator runs 2 replicas"
    for pod in operator_pods(operator):
        wait_until(f"{pod['metadata']['name']}'s count of replicas", lambda p=pod: said in _log(operator, p))


def test_operator_pods_run_where_pod_security_restricted_is_enforced(operator: RealCluster) -> None:
    # The standalone overlay's namespace enforces the profile; a pod that did not meet it would not exist.
    labels = operator.api.get(f"/api/v1/namespaces/{NAMESPACE}")["metadata"]["labels"]

    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    for pod in operator_pods(operator):
        assert pod["status"]["containerStatuses"][0]["ready"] is True
        assert pod["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        context = pod["spec"]["containers"][0]["securityContext"]
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert context["readOnlyRootFilesystem"] is True
