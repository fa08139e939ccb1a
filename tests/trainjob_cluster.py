"""What the cluster and browser tiers' TrainJob tests share: the CRDs (kubetrain's, and JobSet v0.12.0's from
its Go module), Trainer's built-in runtimes, and the JobSet's pods and status made as the JobSet and Job
controllers would make them (no JobSet controller runs on the cluster tier's envtest; the e2e and peers tiers
run the real one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubetrain.envtest import jobset
from kubetrain.envtest.crds import install_crd_files, install_crds
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.poddriver import PodDriver
from kubetrain.frameworks.trainer.builtin import builtin_runtime_documents
from waiting import eventually

CRDS = Path(__file__).resolve().parents[1] / "manifests" / "crds"

TRAINER = "/apis/trainer.kubeflow.org/v1alpha1"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2"


def trainjob(name: str, nodes: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": nodes, "image": "example.com/trainer:1", "command": ["torchrun", "t.py"]},
        },
    }


def jobset_of(kube_api: KubeApi, namespace: str, name: str) -> dict[str, Any]:
    return eventually(lambda: kube_api.get_or_none(f"{JOBSETS}/namespaces/{namespace}/jobsets/{name}"))


def node_pods(
    kube_api: KubeApi, pod_driver: PodDriver, namespace: str, name: str, nodes: int, image: str = "busybox"
) -> list[str]:
    """The node pods the JobSet and Job controllers would make of the TrainJob's JobSet, bound by the
    scheduler: ``<trainjob>-node-0-<i>-<random>`` with the JobSet's labels and the completion index."""
    jobset = jobset_of(kube_api, namespace, name)
    names = []
    for index in range(nodes):
        labels = {
            "jobset.sigs.k8s.io/jobset-name": name,
            "jobset.sigs.k8s.io/replicatedjob-name": "node",
            "jobset.sigs.k8s.io/job-index": "0",
            "batch.kubernetes.io/job-completion-index": str(index),
        }
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-node-0-{index}-x{index}q",
                "labels": labels,
                "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
                "ownerReferences": [
                    {
                        "apiVersion": "jobset.x-k8s.io/v1alpha2",
                        "kind": "JobSet",
                        "name": name,
                        "uid": jobset["metadata"]["uid"],
                    }
                ],
            },
            "spec": {"containers": [{"name": "node", "image": image}]},
        }
        created = kube_api.create(f"/api/v1/namespaces/{namespace}/pods", pod)
        names.append(created["metadata"]["name"])
        pod_driver.wait_bound((namespace, names[-1]))
    return names


def set_jobset_status(kube_api: KubeApi, namespace: str, name: str, status: dict[str, Any]) -> None:
    jobset_of(kube_api, namespace, name)
    kube_api.patch(f"{JOBSETS}/namespaces/{namespace}/jobsets/{name}/status", {"status": status})


def jobset_finished(kind: str, reason: str, message: str) -> dict[str, Any]:
    condition = {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-11-27T12:00:00Z",
    }
    done = kind == "Completed"
    jobs = {
        "name": "node",
        "ready": 0,
        "succeeded": int(done),
        "failed": int(not done),
        "active": 0,
        "suspended": 0,
    }
    return {"conditions": [condition], "replicatedJobsStatus": [jobs]}


def install_trainjob_crds(kube_api: KubeApi) -> None:
    """kubetrain's CRDs, JobSet's, and the built-in ClusterTrainingRuntimes, as the operator's chart installs
    them."""
    install_crds(kube_api, CRDS)
    install_crd_files(kube_api, [jobset.crd_path()])
    install_builtin_runtimes(kube_api)


def install_builtin_runtimes(kube_api: KubeApi) -> None:
    """The built-in ClusterTrainingRuntimes, those not there yet."""
    for document in builtin_runtime_documents():
        path = f"{TRAINER}/clustertrainingruntimes"
        if not kube_api.exists(f"{path}/{document['metadata']['name']}"):
            kube_api.create(path, document)
