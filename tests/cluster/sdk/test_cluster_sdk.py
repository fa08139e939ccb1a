"""TrainingClient against a real API server, the operator running and the pod driver playing the kubelet."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_sdk_support import CRDS, eventually, pytorch_job, running_operator

from kubetrain.api.jobs import TrainingJob
from kubetrain.envtest.crds import install_crds
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.poddriver import PodDriver
from kubetrain.envtest.pytest_plugin import EnvtestCluster
from kubetrain.sdk import JobFailedError, JobNotFoundError, TrainingClient, UnsupportedOperationError
from kubetrain.sdk.backends.base import JobEvent
from waiting import PATIENCE

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="session")
def job_crds(kube_api: KubeApi) -> list[str]:
    return install_crds(kube_api, CRDS)


@pytest.fixture
def operator(envtest: EnvtestCluster, job_crds: list[str], namespace: str, tmp_path: Path) -> Iterator[None]:
    with running_operator(envtest.kubeconfig, namespace, tmp_path / "operator.log"):
        yield


@pytest.fixture
def client(envtest: EnvtestCluster, namespace: str, operator: None) -> TrainingClient:
    return TrainingClient(config_file=str(envtest.kubeconfig), namespace=namespace)


def wait(client: TrainingClient, name: str, condition: str) -> TrainingJob:
    job = client.wait_for_job_conditions(
        name, expected_conditions={condition}, polling_interval=0.2, wait_timeout=PATIENCE
    )
    assert isinstance(job, TrainingJob)
    return job


def wait_pods(client: TrainingClient, name: str, count: int) -> list[str]:
    def probe() -> list[str] | None:
        names = client.get_job_pod_names(name)
        return names if len(names) == count else None

    return eventually(probe)


def test_a_job_created_by_the_sdk_runs_to_succeeded(
    client: TrainingClient, namespace: str, pod_driver: PodDriver
) -> None:
    created = client.create_job(pytorch_job("ok"))
    assert (created.metadata.namespace, created.metadata.uid is not None) == (namespace, True)
    for pod in wait_pods(client, "ok", 2):
        pod_driver.run((namespace, pod))
    client.wait_for_job_conditions(
        "ok", expected_conditions={"Running"}, polling_interval=0.2, wait_timeout=PATIENCE
    )
    pod_driver.succeed((namespace, "ok-worker-0"))
    pod_driver.succeed((namespace, "ok-master-0"))
    job = wait(client, "ok", "Succeeded")
    assert client.is_job_succeeded(job=job)
    assert [j.name for j in client.list_jobs()] == ["ok"]


def test_a_failing_job_raises_with_the_failed_conditions_message(
    client: TrainingClient, namespace: str, pod_driver: PodDriver
) -> None:
    client.create_job(pytorch_job("bad"))
    wait_pods(client, "bad", 2)
    pod_driver.fail((namespace, "bad-master-0"), exit_code=3)
    with pytest.raises(JobFailedError, match=r"bad failed: .*Master replica") as info:
        wait(client, "bad", "Succeeded")
    failed = client.get_job_conditions("bad")[-1]
    assert failed.message is not None
    assert failed.message in str(info.value)


def test_a_function_job_becomes_a_bash_command_in_the_pods(
    client: TrainingClient, namespace: str, kube_api: KubeApi
) -> None:
    def train() -> None:
        print("hello")

    client.create_job(name="fn", train_func=train, num_workers=2)
    pods = wait_pods(client, "fn", 2)
    assert pods == ["fn-master-0", "fn-worker-0"]
    container = kube_api.get(f"/api/v1/namespaces/{namespace}/pods/fn-worker-0")["spec"]["containers"][0]
    assert container["command"] == ["bash", "-c"]
    assert "torchrun" in container["args"][0]


def test_pods_are_selected_by_replica_type_in_any_case(client: TrainingClient) -> None:
    client.create_job(pytorch_job("sel", workers=2))
    wait_pods(client, "sel", 3)
    assert client.get_job_pod_names("sel", replica_type="Worker") == ["sel-worker-0", "sel-worker-1"]
    assert client.get_job_pod_names("sel", is_master=True) == ["sel-master-0"]


def test_reading_logs_without_a_kubelet_is_a_clear_error(
    client: TrainingClient, namespace: str, pod_driver: PodDriver
) -> None:
    client.create_job(pytorch_job("logs"))
    for pod in wait_pods(client, "logs", 2):
        pod_driver.run((namespace, pod))
    with pytest.raises(UnsupportedOperationError, match="no kubelet serves logs"):
        client.get_job_logs("logs")


def test_the_operators_events_are_listed_for_the_job(client: TrainingClient) -> None:
    client.create_job(pytorch_job("ev"))
    wait_pods(client, "ev", 2)

    def pod_creations() -> list[JobEvent] | None:
        found = [e for e in client.get_job_events("ev") if e.reason == "SuccessfulCreatePod"]
        return found if len(found) == 2 else None

    assert {e.involved for e in eventually(pod_creations)} == {"PyTorchJob/ev"}


def test_suspending_deletes_the_pods_and_resuming_creates_them(client: TrainingClient) -> None:
    client.create_job(pytorch_job("hold"))
    wait_pods(client, "hold", 2)
    client.suspend_job("hold")
    client.wait_for_job_conditions(
        "hold", expected_conditions={"Suspended"}, polling_interval=0.2, wait_timeout=PATIENCE
    )
    eventually(lambda: client.get_job_pod_names("hold") == [])
    client.resume_job("hold")
    assert wait_pods(client, "hold", 2) == ["hold-master-0", "hold-worker-0"]


def test_scaling_sets_the_worker_replicas_through_the_scale_subresource(client: TrainingClient) -> None:
    client.create_job(pytorch_job("grow"))
    scaled = client.scale_job("grow", 3)
    assert scaled.replica_specs["Worker"].replicas == 3
    assert wait_pods(client, "grow", 4)[-1] == "grow-worker-2"


def test_a_deleted_job_is_not_found(client: TrainingClient) -> None:
    client.create_job(pytorch_job("gone"))
    client.delete_job("gone")
    with pytest.raises(JobNotFoundError, match="gone not found"):
        eventually(lambda: client.get_job("gone") and None)
