"""Kueue v0.17.0 (built from its Go module) on envtest with its TrainJob integration, beside the JobSet and
TrainJob CRDs (Kubeflow Trainer v2.3.0's): what the cluster tier's TrainJob queueing tests stand on."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubetrain.envtest import kueue, peers
from kubetrain.envtest.crds import install_crd_files
from kubetrain.envtest.kubeapi import KubeApi, KubeObject
from kubetrain.envtest.pytest_plugin import EnvtestCluster
from kueue_cluster import kueue_beside
from trainjob_cluster import install_builtin_runtimes

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def kueue_running(jobset_controller: EnvtestCluster, kube_api: KubeApi) -> Iterator[EnvtestCluster]:
    """Kueue integrating TrainJobs, on the session's envtest; stopped, its webhooks removed, afterwards."""
    install_crd_files(kube_api, sorted(peers.TRAINER.crds_dir().glob("trainer.kubeflow.org_*.yaml")))
    # Kueue's TrainJob webhook looks up the job's runtime; the module made none, and passed only after
    # another module had installed them on the session's envtest.
    install_builtin_runtimes(kube_api)
    with kueue_beside(jobset_controller) as cluster:
        yield cluster


def train_job(name: str, queue: str | None) -> KubeObject:
    labels = {kueue.QUEUE_NAME_LABEL: queue} if queue else {}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "labels": labels},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 2}},
    }


def test_kueue_runs_its_trainjob_controller(kueue_running: EnvtestCluster) -> None:
    assert kueue_running.run_dir is not None
    log = (kueue_running.run_dir / "logs" / f"{kueue.PROCESS}.log").read_text()

    assert "trainjob" in kueue.started_controllers(log)


def test_a_queued_trainjob_is_created_suspended_by_kueues_webhook(
    kueue_running: EnvtestCluster, kube_api: KubeApi, namespace: str
) -> None:
    collection = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs"

    created = kube_api.create(f"{collection}?dryRun=All", train_job("queued", "team-a"))

    assert created["spec"]["suspend"] is True
    [patch] = created["spec"]["runtimePatches"]
    assert patch["manager"] == "kueue.x-k8s.io/manager"
    assert patch["trainingRuntimeSpec"]["template"]["metadata"]["labels"] == {
        kueue.QUEUE_NAME_LABEL: "team-a"
    }


def test_a_trainjob_without_a_queue_is_not_suspended_but_still_gets_kueues_empty_runtime_patch(
    kueue_running: EnvtestCluster, kube_api: KubeApi, namespace: str
) -> None:
    collection = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs"

    created = kube_api.create(f"{collection}?dryRun=All", train_job("unqueued", None))

    assert created["spec"]["suspend"] is False
    empty = {"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {"template": {"spec": {}}}}
    assert created["spec"]["runtimePatches"] == [empty]
