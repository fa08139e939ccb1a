"""The operator in-cluster: its own image on the real node, installed with the standalone kustomize overlay,
running under its ServiceAccount and least-privilege ClusterRole."""

from __future__ import annotations

import pytest

from e2e.realpods import RealCluster
from kubetrain.envtest import realnode

# Images are built (once per recipe) and imported into the node inside this tier's first fixtures: minutes
# when cold, more than the suite's default 300 s per test.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

NAMESPACE = "kubeflow"


def test_operator_pod_runs_from_the_local_image_as_non_root(operator: RealCluster) -> None:
    pods = operator.api.get(
        f"/api/v1/namespaces/{NAMESPACE}/pods", {"labelSelector": "control-plane=kubeflow-training-operator"}
    )["items"]

    assert len(pods) == 1
    status = pods[0]["status"]["containerStatuses"][0]
    assert status["ready"] is True
    assert status["image"].startswith("localhost/kubetrain/operator:")
    assert pods[0]["spec"]["nodeName"] == realnode.NODE_NAME


def test_operator_log_has_no_forbidden_request(operator: RealCluster) -> None:
    logs = operator.kubectl("logs", "-n", NAMESPACE, "deployment/training-operator")

    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.strip()
    # An API error is logged as "403 Forbidden: ... is forbidden: User ... cannot ...". Not a bare "403":
    # the leader's random identity (a UUID) held "4039" in one CI run.
    assert "forbidden" not in logs.stdout.lower()


def test_operator_pod_runs_where_pod_security_restricted_is_enforced(operator: RealCluster) -> None:
    # The standalone overlay's namespace enforces the profile; a pod that did not meet it would not exist.
    labels = operator.api.get(f"/api/v1/namespaces/{NAMESPACE}")["metadata"]["labels"]
    [pod] = operator.api.get(
        f"/api/v1/namespaces/{NAMESPACE}/pods", {"labelSelector": "control-plane=kubeflow-training-operator"}
    )["items"]

    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert pod["status"]["containerStatuses"][0]["ready"] is True
    assert pod["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    context = pod["spec"]["containers"][0]["securityContext"]
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["readOnlyRootFilesystem"] is True
