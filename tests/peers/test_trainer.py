"""Kubeflow Trainer v2.3.0's controller manager (built from its Go module) on the envtest, at the release's
defaults, with its CRDs, the release's built-in ClusterTrainingRuntimes and the JobSet controller: a TrainJob
on ``torch-distributed`` becomes a JobSet, the JobSet its Jobs and pods, and the pods' success the TrainJob's
``Complete``, as on a cluster. What it made is printed (``-s``) and, with ``KUBETRAIN_PEERS_DUMP``, written as
JSON: the reference the TrainJob conformance cases compare with. (test_trainer_status.py: the TrainJobStatus
gate on.)"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from kubetrain.envtest import binaries, peers
from kubetrain.envtest.kubeapi import KubeApi, KubeObject
from kubetrain.envtest.pytest_plugin import EnvtestCluster
from waiting import eventually as eventually

from .peer_runner import DUMP, Case, Side, run_on
from .peer_suite import Cluster, Phase, Running, running, trainer, trainer_crds

pytestmark = pytest.mark.peers

TRAINJOBS = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
NODES = 2


def trainer_running(cluster: Cluster, feature_gates: Mapping[str, bool]) -> Iterator[tuple[str, Running]]:
    """Trainer running with ``feature_gates``, its webhooks serving a fresh namespace, yielded with it; the
    built-in runtimes installed. One module's at a time: two Trainers would both reconcile every TrainJob."""
    phase = Phase("trainer", trainer_crds(), trainer(cluster, feature_gates))
    with running(cluster, phase) as (namespace, operator, _log):
        peers.install_trainer_runtimes(cluster.api, binaries.locate().kubectl)
        yield namespace, operator


@pytest.fixture(scope="module")
def trainer_phase(cluster: Cluster, jobset_controller: EnvtestCluster) -> Iterator[tuple[str, Running]]:
    yield from trainer_running(cluster, peers.TRAINER_FEATURE_GATES)


@pytest.fixture
def trainer_namespace(trainer_phase: tuple[str, Running]) -> str:
    return trainer_phase[0]


def train_job(name: str) -> KubeObject:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {
                "numNodes": NODES,
                "command": ["torchrun", "train.py"],
                "resourcesPerNode": {"requests": {"cpu": "2"}},
            },
        },
    }


def pods_of(api: KubeApi, namespace: str, name: str) -> list[KubeObject]:
    selector = {"labelSelector": f"{JOBSET_NAME}={name}"}
    return list(api.get(f"/api/v1/namespaces/{namespace}/pods", selector)["items"])


def all_pods_of(api: KubeApi, namespace: str, name: str) -> list[KubeObject] | None:
    """The TrainJob's pods once there is one for each node."""
    found = pods_of(api, namespace, name)
    return found if len(found) == NODES else None


def made_for(api: KubeApi, namespace: str, name: str) -> dict[str, Any]:
    """The TrainJob and what was made for it, in the order it was made."""
    return {
        "trainjob": api.get(f"{TRAINJOBS.format(namespace=namespace)}/{name}"),
        "jobset": api.get(f"{JOBSETS.format(namespace=namespace)}/{name}"),
        "configmaps": api.get(f"/api/v1/namespaces/{namespace}/configmaps")["items"],
        "jobs": api.get(
            f"/apis/batch/v1/namespaces/{namespace}/jobs", {"labelSelector": f"{JOBSET_NAME}={name}"}
        )["items"],
        "services": api.get(f"/api/v1/namespaces/{namespace}/services")["items"],
        "pods": pods_of(api, namespace, name),
    }


def show(case: str, objects: dict[str, Any]) -> None:
    text = json.dumps(objects, indent=1, sort_keys=True)
    print(f"--- {case}: what Trainer v2.3.0 and JobSet v0.12.0 made ---\n{text}")
    if DUMP is not None:
        DUMP.mkdir(parents=True, exist_ok=True)
        (DUMP / f"{case}.trainer.json").write_text(text)


def env_of(pod: KubeObject, container: str = "node") -> dict[str, Any]:
    [spec] = [c for c in pod["spec"]["containers"] if c["name"] == container]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in spec.get("env", [])}


def test_a_torch_distributed_trainjob_becomes_a_jobset_with_its_jobs_and_pods(
    cluster: Cluster, trainer_namespace: str
) -> None:
    api, namespace = cluster.api, trainer_namespace
    job = api.create(TRAINJOBS.format(namespace=namespace), train_job("torch"))

    pods = eventually(lambda: all_pods_of(api, namespace, "torch"), "pods")
    objects = made_for(api, namespace, "torch")
    show("trainjob-torch-distributed", objects)

    jobset = objects["jobset"]
    owner = jobset["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("TrainJob", "torch", job["metadata"]["uid"])
    [node] = jobset["spec"]["replicatedJobs"]
    assert node["name"] == "node"
    assert node["template"]["spec"]["parallelism"] == NODES
    assert [j["metadata"]["name"] for j in objects["jobs"]] == ["torch-node-0"]
    env = env_of(pods[0])
    assert env["PET_NNODES"] == str(NODES)
    assert env["PET_MASTER_ADDR"] == "torch-node-0-0.torch"
    assert env["PET_MASTER_PORT"] == "29500"
    assert {pod["spec"]["subdomain"] for pod in pods} == {"torch"}


def test_its_pods_succeeding_complete_the_trainjob(cluster: Cluster, trainer_namespace: str) -> None:
    api, namespace = cluster.api, trainer_namespace
    api.create(TRAINJOBS.format(namespace=namespace), train_job("done"))
    pods = eventually(lambda: all_pods_of(api, namespace, "done"), "pods")

    for pod in pods:
        cluster.driver.run(pod)
    for pod in pods:
        cluster.driver.succeed(pod)

    def complete() -> KubeObject | None:
        status = api.get(f"{TRAINJOBS.format(namespace=namespace)}/done").get("status") or {}
        return next((c for c in status.get("conditions") or [] if c["type"] == "Complete"), None)

    condition = eventually(complete, "TrainJob Complete")
    show("trainjob-torch-distributed-complete", made_for(api, namespace, "done"))
    assert (condition["status"], condition["reason"]) == ("True", "AllJobsCompleted")


def test_the_releases_built_in_runtimes_are_installed_with_their_framework_labels(
    cluster: Cluster, trainer_namespace: str
) -> None:
    listed = cluster.api.get("/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes")["items"]
    frameworks = {
        r["metadata"]["name"]: r["metadata"]["labels"]["trainer.kubeflow.org/framework"] for r in listed
    }

    assert frameworks == {
        "deepspeed-distributed": "deepspeed",
        "jax-distributed": "jax",
        "mlx-distributed": "mlx",
        "torch-distributed": "torch",
        "torchtune-llama3.2-1b": "torchtune",
        "torchtune-llama3.2-3b": "torchtune",
        "torchtune-qwen2.5-1.5b": "torchtune",
        "xgboost-distributed": "xgboost",
    }
    assert {r["metadata"]["labels"]["trainer.kubeflow.org/webhook-validation"] for r in listed} == {
        "disabled"
    }


def test_the_conformance_runner_snapshots_what_trainer_makes_of_a_trainjob(
    cluster: Cluster, trainer_phase: tuple[str, Running]
) -> None:
    namespace, operator = trainer_phase
    side = Side("trainer", cluster.api, cluster.driver, namespace, idle=operator.idle)

    outcome = run_on(Case("trainjob-runner", train_job("runner")), side)

    names = set(outcome.snapshot.objects)
    assert outcome.failure is None
    assert {"TrainJob runner", "JobSet runner", "Job runner-node-0", "Service runner"} <= names
    assert "ConfigMap runner-runtime-snapshot" in names
    assert sorted(name for name in names if name.startswith("Pod ")) == [
        "Pod runner-node-0-0-*",
        "Pod runner-node-0-1-*",
    ]
