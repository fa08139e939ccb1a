"""Kubeflow Trainer v2.3.0 with its TrainJobStatus gate on (alpha; what kubetrain always does): the trainer
pods' template gets the progress protocol's three variables, its projected token and CA volume, and the
TrainJob a ``<name>-tls-config`` ConfigMap with the status server's CA. Its pods are not made on the fake-node
envtest (a projected token without ``serviceAccountName`` needs the ServiceAccount admission plugin, which it
runs without: peers.TRAINER_FEATURE_GATES), so this module checks the JobSet and what Trainer made beside
it."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from typing import Any

import pytest

from kubetrain.envtest import peers
from kubetrain.envtest.pytest_plugin import EnvtestCluster

from .peer_suite import Cluster
from .test_trainer import JOBSETS, TRAINJOBS, eventually, show, train_job, trainer_running

pytestmark = [
    pytest.mark.peers,
    pytest.mark.skipif(
        os.geteuid() != 0, reason="Trainer's status server runs in a mount namespace: root only"
    ),
]

STATUS_ENV = (
    "KUBEFLOW_TRAINER_SERVER_URL",
    "KUBEFLOW_TRAINER_SERVER_CA_CERT",
    "KUBEFLOW_TRAINER_SERVER_TOKEN",
)


@pytest.fixture(scope="module")
def status_namespace(cluster: Cluster, jobset_controller: EnvtestCluster) -> Iterator[str]:
    for namespace, _ in trainer_running(cluster, {"TrainJobStatus": True}):
        yield namespace


def node_container(jobset: dict[str, Any]) -> dict[str, Any]:
    [node] = jobset["spec"]["replicatedJobs"]
    [container] = node["template"]["spec"]["template"]["spec"]["containers"]
    return dict(container)


def test_the_trainer_pods_template_gets_the_progress_protocols_variables_and_volume(
    cluster: Cluster, status_namespace: str
) -> None:
    api, namespace = cluster.api, status_namespace
    api.create(TRAINJOBS.format(namespace=namespace), train_job("progress"))

    jobset = eventually(lambda: api.get_or_none(f"{JOBSETS.format(namespace=namespace)}/progress"), "JobSet")
    show("trainjob-torch-distributed-trainjobstatus", {"jobset": jobset})

    env = {e["name"]: e.get("value") for e in node_container(jobset).get("env", [])}
    assert env["KUBEFLOW_TRAINER_SERVER_URL"] == (
        f"https://{peers.TRAINER_SERVICE}.{peers.TRAINER_NAMESPACE}.svc:{peers.TRAINER_STATUS_PORT}"
        f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/progress/status"
    )
    assert [env[name] for name in STATUS_ENV[1:]] == [
        "/var/run/secrets/kubeflow/trainer/ca.crt",
        "/var/run/secrets/kubeflow/trainer/token",
    ]
    pod_spec = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    [volume] = [v for v in pod_spec["volumes"] if v["name"] == "kubeflow-trainer-token"]
    sources = volume["projected"]["sources"]
    assert sources[1]["configMap"]["name"] == "progress-tls-config"
    assert "serviceAccountName" not in pod_spec


def test_the_trainjob_gets_a_configmap_with_the_status_servers_ca(
    cluster: Cluster, status_namespace: str
) -> None:
    api, namespace = cluster.api, status_namespace
    api.create(TRAINJOBS.format(namespace=namespace), train_job("ca"))

    configmap = eventually(
        lambda: api.get_or_none(f"/api/v1/namespaces/{namespace}/configmaps/ca-tls-config"), "ConfigMap"
    )

    secret = api.get(f"/api/v1/namespaces/{peers.TRAINER_NAMESPACE}/secrets/{peers.TRAINER_SECRET}")
    assert configmap["data"] == {"ca.crt": base64.b64decode(secret["data"]["ca.crt"]).decode()}
    assert configmap["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
