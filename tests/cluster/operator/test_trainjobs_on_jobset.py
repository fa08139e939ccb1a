"""A TrainJob all the way down on a real API server: kubetrain's operator applies the JobSet, the real JobSet
v0.12.0 controller makes its Jobs, the controller-manager their pods, the pod driver plays the kubelet; the
TrainJob completes from the JobSet, and Kubeflow Trainer v2.3's own ``status_update.py``, run as a trainer
pod would run it, sets the TrainJob's ``trainerStatus``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from operator_support import StartOperator, eventually
from status_support import played_env, start_endpoint, trainer_status, wait_default_service_account

from kubetrain.envtest.kubeapi import KubeApi, KubeObject
from kubetrain.envtest.poddriver import PodDriver
from kubetrain.envtest.pytest_plugin import EnvtestCluster
from trainjob_cluster import install_trainjob_crds
from waiting import PATIENCE

pytestmark = pytest.mark.cluster

TRAINER = "/apis/trainer.kubeflow.org/v1alpha1"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2"
TRAINER_SCRIPT = Path(__file__).resolve().parents[3] / "tests" / "upstream" / "trainer" / "status_update.py"


@pytest.fixture(scope="module")
def installed(kube_api: KubeApi, jobset_controller: EnvtestCluster) -> None:
    install_trainjob_crds(kube_api)


def _create(api: KubeApi, namespace: str, name: str, nodes: int) -> None:
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": nodes}},
    }
    api.create(f"{TRAINER}/namespaces/{namespace}/trainjobs", trainjob)


def _pods(api: KubeApi, namespace: str, name: str, count: int) -> list[KubeObject]:
    def listed() -> list[KubeObject] | None:
        selector = f"jobset.sigs.k8s.io/jobset-name={name}"
        found = api.get(f"/api/v1/namespaces/{namespace}/pods", {"labelSelector": selector})["items"]
        return found if len(found) == count else None

    pods: list[KubeObject] = eventually(listed, f"{count} pods of JobSet {name}")
    return sorted(pods, key=lambda p: p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"])


def _condition(api: KubeApi, namespace: str, name: str, type_: str) -> dict[str, Any] | None:
    status = api.get(f"{TRAINER}/namespaces/{namespace}/trainjobs/{name}").get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == type_), None)


def test_a_trainjob_completes_when_its_jobsets_pods_succeed(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator, pod_driver: PodDriver, installed: None
) -> None:
    start_operator()
    _create(kube_api, namespace, "ddp", nodes=2)
    pods = _pods(kube_api, namespace, "ddp", 2)
    assert [p["spec"]["subdomain"] for p in pods] == ["ddp", "ddp"]
    env = {e["name"]: e.get("value") for e in pods[1]["spec"]["containers"][0]["env"]}
    assert (env["PET_NNODES"], env["PET_MASTER_ADDR"]) == ("2", "ddp-node-0-0.ddp")
    for pod in pods:
        pod_driver.run((namespace, pod["metadata"]["name"]))
    for pod in pods:
        pod_driver.succeed((namespace, pod["metadata"]["name"]))
    complete = eventually(lambda: _condition(kube_api, namespace, "ddp", "Complete"), "Complete")
    assert (complete["reason"], complete["message"]) == ("AllJobsCompleted", "jobset completed successfully")
    status = kube_api.get(f"{TRAINER}/namespaces/{namespace}/trainjobs/ddp")["status"]
    assert [(s["name"], s["succeeded"]) for s in status["jobsStatus"]] == [("node", 1)]


def test_trainers_own_status_script_sets_a_trainjobs_trainer_status(
    kube_api: KubeApi,
    namespace: str,
    start_operator: StartOperator,
    pod_driver: PodDriver,
    installed: None,
    tmp_path: Path,
) -> None:
    start_endpoint(start_operator, namespace)
    wait_default_service_account(kube_api, namespace)
    _create(kube_api, namespace, "reporting", nodes=1)
    [pod] = _pods(kube_api, namespace, "reporting", 1)
    pod_driver.run((namespace, pod["metadata"]["name"]))
    env = played_env(kube_api, pod, "node", tmp_path)
    assert env["KUBEFLOW_TRAINER_SERVER_URL"].endswith(
        f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/reporting/status"
    )
    ran = subprocess.run(
        [sys.executable, str(TRAINER_SCRIPT)],
        env=env,
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    written = eventually(
        lambda: trainer_status(
            kube_api, namespace, "reporting", plural="trainjobs", api_version="trainer.kubeflow.org/v1alpha1"
        ),
        "trainerStatus",
    )
    assert (written["progressPercentage"], written["estimatedRemainingSeconds"]) == (42, 120)
    assert written["metrics"] == [{"name": "loss", "value": "0.123"}, {"name": "accuracy", "value": "0.95"}]
