"""The install manifests: the standalone overlay applies server-side, the ClusterRole grants exactly the
operator's calls with no wildcards, and the operator does a job's whole life as that ServiceAccount."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_support import (
    StartOperator,
    create_job,
    eventually,
    gone,
    job_path,
    pytorch_job,
    wait_condition,
    wait_pods,
)
from status_support import (
    audience,
    ca_bundle,
    mint_token,
    post,
    start_endpoint,
    trainer_status,
    wait_default_service_account,
)

from kubetrain.envtest import binaries
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.poddriver import PodDriver
from kubetrain.envtest.pytest_plugin import EnvtestCluster
from waiting import PATIENCE

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[3]
OVERLAY = ROOT / "manifests" / "overlays" / "standalone"
SINGLE_REPLICA = ROOT / "manifests" / "components" / "single-replica"
SERVICE_ACCOUNT = "system:serviceaccount:kubeflow:training-operator"
WEBHOOK_CONFIGURATION_KINDS = (
    "mutatingwebhookconfiguration.admissionregistration.k8s.io/",
    "validatingwebhookconfiguration.admissionregistration.k8s.io/",
)


def kubectl(envtest: EnvtestCluster, *args: str) -> str:
    command = [str(binaries.locate().kubectl), "--kubeconfig", str(envtest.kubeconfig), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=PATIENCE, check=False)
    assert done.returncode == 0, f"kubectl {' '.join(args)} failed:\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(envtest: EnvtestCluster, job_crds: list[str]) -> Iterator[str]:
    """The overlay applied; its admission webhooks (JobSet's) removed afterwards: no JobSet controller serves
    them here, and the API server would refuse every JobSet the later tests' operators create."""
    applied = kubectl(envtest, "apply", "--server-side", "--force-conflicts", "-k", str(OVERLAY))
    yield applied
    webhooks = [
        line.split()[0] for line in applied.splitlines() if line.startswith(WEBHOOK_CONFIGURATION_KINDS)
    ]
    if webhooks:
        kubectl(envtest, "delete", "--ignore-not-found", *webhooks)


def test_the_standalone_overlay_applies_server_side(installed: str, kube_api: KubeApi) -> None:
    assert "deployment.apps/training-operator serverside-applied" in installed
    deployment = kube_api.get("/apis/apps/v1/namespaces/kubeflow/deployments/training-operator")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "training-operator"
    assert (
        kube_api.get("/api/v1/namespaces/kubeflow/services/training-operator")["spec"]["ports"][0]["port"]
        == 8080
    )


def test_the_status_endpoints_service_is_headless_and_selects_the_operator_pods(
    installed: str, kube_api: KubeApi
) -> None:
    service = kube_api.get("/api/v1/namespaces/kubeflow/services/training-operator-status")
    deployment = kube_api.get("/apis/apps/v1/namespaces/kubeflow/deployments/training-operator")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [("status", 8443)]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert "--status-server-bind-address=:8443" in container["args"]


def test_the_cluster_role_lists_verbs_and_resources_without_wildcards(
    installed: str, kube_api: KubeApi
) -> None:
    role = kube_api.get("/apis/rbac.authorization.k8s.io/v1/clusterroles/training-operator")
    for rule in role["rules"]:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], f"wildcard in {field} of {rule}"


def allowed(api: KubeApi, verb: str, resource: str, namespace: str = "default") -> bool:
    """Ask the API server (SubjectAccessReview) whether the ServiceAccount may; ``resource`` reads
    ``<plural>[.<group>][/<subresource>]``."""
    name, _, subresource = resource.partition("/")
    plural, _, group = name.partition(".")
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": SERVICE_ACCOUNT,
            "groups": ["system:serviceaccounts", "system:serviceaccounts:kubeflow", "system:authenticated"],
            "resourceAttributes": {
                "namespace": namespace,
                "verb": verb,
                "group": group,
                "resource": plural,
                "subresource": subresource,
            },
        },
    }
    answer = api.create("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    return bool(answer["status"].get("allowed"))


@pytest.mark.parametrize(
    ("verb", "resource"),
    [
        ("list", "pods"),
        ("watch", "pods"),
        ("create", "pods"),
        ("delete", "pods"),
        ("create", "services"),
        ("delete", "services"),
        ("create", "events"),
        ("patch", "events"),  # a repeated Event's count (kube/events.py)
        ("watch", "tfjobs.kubeflow.org"),
        ("delete", "pytorchjobs.kubeflow.org"),
        ("update", "pytorchjobs.kubeflow.org/status"),
        ("update", "jaxjobs.kubeflow.org/finalizers"),
        ("update", "leases.coordination.k8s.io"),
        ("create", "podgroups.scheduling.volcano.sh"),
        ("update", "podgroups.scheduling.x-k8s.io"),
        ("update", "horizontalpodautoscalers.autoscaling"),
        ("update", "configmaps"),
        ("create", "roles.rbac.authorization.k8s.io"),
        ("create", "pods/exec"),
        ("get", "pods/log"),  # a crash-looping container's previous run (kube/previous_logs.py)
        ("list", "priorityclasses.scheduling.k8s.io"),
        ("create", "jobs.batch"),
        ("patch", "jobs.batch/status"),
        ("update", "secrets"),
        # The status endpoint: TokenReview, the pod of a report, its trainerStatus, the CA and history
        # ConfigMaps, the TLS Secret.
        ("create", "tokenreviews.authentication.k8s.io"),
        ("get", "pods"),
        ("patch", "xgboostjobs.kubeflow.org/status"),
        ("create", "configmaps"),
        ("get", "secrets"),
    ],
)
def test_the_service_account_may_make_each_call_the_operator_makes(
    installed: str, kube_api: KubeApi, verb: str, resource: str
) -> None:
    assert allowed(kube_api, verb, resource)


@pytest.mark.parametrize(
    ("verb", "resource"),
    [
        ("list", "secrets"),
        ("patch", "pods"),
        ("update", "pytorchjobs.kubeflow.org"),
        ("delete", "configmaps"),
    ],
)
def test_the_service_account_may_not_do_more(
    installed: str, kube_api: KubeApi, verb: str, resource: str
) -> None:
    assert not allowed(kube_api, verb, resource)


@pytest.mark.parametrize("resource", ["deployments.apps", "replicasets.apps"])
def test_the_service_account_may_read_the_deployment_that_runs_it_in_its_own_namespace_only(
    installed: str, kube_api: KubeApi, resource: str
) -> None:
    assert allowed(kube_api, "get", resource, namespace="kubeflow")
    assert not allowed(kube_api, "get", resource, namespace="default")
    assert not allowed(kube_api, "list", resource, namespace="kubeflow")


def test_the_standalone_overlay_runs_two_replicas_one_per_node_with_a_disruption_budget(
    installed: str, kube_api: KubeApi
) -> None:
    deployment = kube_api.get("/apis/apps/v1/namespaces/kubeflow/deployments/training-operator")
    budget = kube_api.get("/apis/policy/v1/namespaces/kubeflow/poddisruptionbudgets/training-operator")
    spec = deployment["spec"]["template"]["spec"]
    [spread] = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]

    assert deployment["spec"]["replicas"] == 2
    assert spread["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert spread["podAffinityTerm"]["labelSelector"]["matchLabels"].items() <= (
        deployment["spec"]["template"]["metadata"]["labels"].items()
    )
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    assert {(t["key"], t["tolerationSeconds"]) for t in spec["tolerations"]} == {
        ("node.kubernetes.io/unreachable", 10),
        ("node.kubernetes.io/not-ready", 10),
    }


def test_the_single_replica_component_runs_one_replica_without_a_disruption_budget(
    envtest: EnvtestCluster, tmp_path: Path
) -> None:
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [os.path.relpath(OVERLAY, tmp_path)],
                "components": [os.path.relpath(SINGLE_REPLICA, tmp_path)],
            }
        )
    )
    built = [doc for doc in yaml.safe_load_all(kubectl(envtest, "kustomize", str(tmp_path))) if doc]
    kinds = {(doc["kind"], doc["metadata"]["name"]): doc for doc in built}

    assert kinds[("Deployment", "training-operator")]["spec"]["replicas"] == 1
    assert ("PodDisruptionBudget", "training-operator") not in kinds


def service_account_kubeconfig(envtest: EnvtestCluster, directory: Path) -> Path:
    token = kubectl(
        envtest, "-n", "kubeflow", "create", "token", "training-operator", "--duration", "1h"
    ).strip()
    admin: dict[str, Any] = yaml.safe_load(envtest.kubeconfig.read_text())
    cluster = admin["clusters"][0]
    ca = cluster["cluster"].get("certificate-authority")
    if ca and not Path(ca).is_absolute():
        cluster["cluster"]["certificate-authority"] = str((envtest.kubeconfig.parent / ca).resolve())
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": "training-operator", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": cluster["name"], "user": "training-operator"}}],
        "current-context": "sa",
    }
    path = directory / "service-account.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_operator_runs_a_job_to_ttl_deletion_as_its_service_account(
    installed: str,
    envtest: EnvtestCluster,
    kube_api: KubeApi,
    namespace: str,
    pod_driver: PodDriver,
    start_operator: StartOperator,
    tmp_path: Path,
) -> None:
    kubeconfig = service_account_kubeconfig(envtest, tmp_path)
    start_operator(
        "--kubeconfig", str(kubeconfig), "--leader-elect", "--leader-election-namespace", namespace
    )
    # completionTime has a precision of seconds, so a 1 s TTL can run out milliseconds after Succeeded,
    # before a poll sees the condition (CI saw the job gone): 3 s leaves the poll two at least.
    create_job(kube_api, namespace, pytorch_job("j", workers=1, ttlSecondsAfterFinished=3))
    wait_pods(kube_api, namespace, ["j-master-0", "j-worker-0"])
    pod_driver.run((namespace, "j-master-0"))
    pod_driver.succeed((namespace, "j-master-0"))
    wait_condition(kube_api, "PyTorchJob", namespace, "j", "Succeeded")
    eventually(lambda: gone(kube_api, job_path("PyTorchJob", namespace, "j")), what="TTL deletion")


def test_the_operator_keeps_its_status_endpoint_as_its_service_account(
    installed: str,
    envtest: EnvtestCluster,
    kube_api: KubeApi,
    namespace: str,
    start_operator: StartOperator,
    tmp_path: Path,
) -> None:
    kubeconfig = service_account_kubeconfig(envtest, tmp_path)
    endpoint = start_endpoint(start_operator, namespace, "--kubeconfig", str(kubeconfig))
    wait_default_service_account(kube_api, namespace)
    create_job(kube_api, namespace, pytorch_job("j", workers=1))
    master = eventually(lambda: kube_api.get_or_none(f"/api/v1/namespaces/{namespace}/pods/j-master-0"))
    token = mint_token(kube_api, master, audience(namespace, "j"))
    code, answer = post(
        endpoint.url("j"), ca_bundle(kube_api, namespace), {"trainerStatus": {"progressPercentage": 7}}, token
    )
    assert code == 200, answer
    eventually(lambda: trainer_status(kube_api, namespace, "j"), "the report in the job's status")
    eventually(
        lambda: kube_api.get_or_none(f"/api/v1/namespaces/{namespace}/configmaps/j-progress-history"),
        "the history ConfigMap",
    )
    assert "forbidden" not in endpoint.operator.log.lower()
