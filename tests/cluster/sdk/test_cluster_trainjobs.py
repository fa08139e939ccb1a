"""Kubeflow Trainer TrainJobs on a real API server, the operator running, read by kubetrain's own commands,
SDK and watch beside the v1 jobs: Trainer's states (Running once every node's pod runs), nodes, the JobSet's
jobs, events, diagnosis, suspension and deletion.

No JobSet controller runs here: each test makes the JobSet's pods as the JobSet and Job controllers would
(their labels, one per node) and writes the JobSet's status as its controller would, as the operator's own
TrainJob tests do (tests/cluster/operator/test_trainjobs.py); the pod driver is the kubelet. The real JobSet
controller running them is the e2e and peers tiers' proof."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cluster_sdk_support import eventually, pytorch_job, running_operator

from builders import cli_runner
from kubetrain.api.summary import NodeTally
from kubetrain.api.trainer import TrainJob
from kubetrain.cli.main import app
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.poddriver import PodDriver
from kubetrain.envtest.pytest_plugin import EnvtestCluster
from kubetrain.sdk import JobFailedError, TrainingClient
from kubetrain.sdk.backends.base import JobWatchEvent, WatchEventType
from kubetrain.sdk.backends.kubernetes import KubernetesBackend
from trainjob_cluster import (
    TRAINER,
    install_trainjob_crds,
    jobset_finished,
    jobset_of,
    node_pods,
    set_jobset_status,
    trainjob,
)
from waiting import PATIENCE

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def crds(kube_api: KubeApi) -> None:
    install_trainjob_crds(kube_api)


@pytest.fixture
def operator(envtest: EnvtestCluster, crds: None, namespace: str, tmp_path: Path) -> Iterator[None]:
    with running_operator(envtest.kubeconfig, namespace, tmp_path / "operator.log"):
        yield


@pytest.fixture
def client(envtest: EnvtestCluster, namespace: str) -> TrainingClient:
    return TrainingClient(config_file=str(envtest.kubeconfig), namespace=namespace)


@pytest.fixture
def kubetrain(envtest: EnvtestCluster, namespace: str) -> Any:
    runner = cli_runner()

    def invoke(*args: str) -> Any:
        return runner.invoke(app, [*args, "-n", namespace, "--kubeconfig", str(envtest.kubeconfig)])

    return invoke


def submitted(kubetrain: Any, tmp_path: Path, job: dict[str, Any]) -> None:
    path = tmp_path / f"{job['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(job))
    result = kubetrain("submit", str(path))
    assert result.stdout == f"trainjob.trainer.kubeflow.org/{job['metadata']['name']} created\n", (
        result.stderr
    )


@pytest.mark.usefixtures("operator")
def test_a_trainjob_is_created_until_every_node_runs_then_running_beside_the_v1_jobs(
    kubetrain: Any, tmp_path: Path, kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    submitted(kubetrain, tmp_path, trainjob("llm"))
    path = tmp_path / "classic.yaml"
    path.write_text(yaml.safe_dump(pytorch_job("classic")))
    kubetrain("submit", str(path))
    first, second = node_pods(kube_api, pod_driver, namespace, "llm", 2)
    pod_driver.run((namespace, first))
    listing = kubetrain("get", "trainjobs").stdout.splitlines()
    assert listing[0].split() == ["NAME", "STATE", "PROGRESS", "ETA", "NODES", "RESTARTS", "AGE"]
    assert re.match(r"llm\s+Created\s+-\s+-\s+2/2\s+0\s+\d+s", listing[1]), listing
    pod_driver.run((namespace, second))
    everything = {line.split()[0]: line.split()[1:4] for line in kubetrain("get").stdout.splitlines()[1:]}
    assert everything["llm"][:2] == ["TrainJob", "Running"]
    assert everything["classic"][0] == "PyTorchJob"


@pytest.mark.usefixtures("operator")
def test_wait_for_complete_returns_once_the_jobset_completes(
    kubetrain: Any, tmp_path: Path, kube_api: KubeApi, namespace: str
) -> None:
    submitted(kubetrain, tmp_path, trainjob("done"))
    waiting = threading.Thread(
        target=lambda: waited.append(
            kubetrain("wait", "done", "--for=condition=Complete", f"--timeout={PATIENCE:g}s")
        )
    )
    waited: list[Any] = []
    waiting.start()
    set_jobset_status(
        kube_api,
        namespace,
        "done",
        jobset_finished("Completed", "AllJobsCompleted", "jobset completed successfully"),
    )
    waiting.join(PATIENCE + 30)
    assert (waited[0].exit_code, waited[0].stdout) == (
        0,
        "trainjob.trainer.kubeflow.org/done condition met\n",
    )
    text = kubetrain("describe", "trainjob", "done").stdout
    assert re.search(
        r"Jobs:\n  NAME +READY +ACTIVE +SUCCEEDED +FAILED +SUSPENDED\n  node +0 +0 +1 +0 +0\n", text
    )
    assert re.search(r"Complete +True +AllJobsCompleted +\S+ +jobset completed successfully", text)
    assert "Runtime:       ClusterTrainingRuntime torch-distributed" in text


@pytest.mark.usefixtures("operator")
def test_a_failed_jobset_fails_the_wait_and_the_sdk_raises_its_message(
    kubetrain: Any, client: TrainingClient, tmp_path: Path, kube_api: KubeApi, namespace: str
) -> None:
    submitted(kubetrain, tmp_path, trainjob("bad"))
    message = "jobset failed due to one or more job failures"
    set_jobset_status(kube_api, namespace, "bad", jobset_finished("Failed", "FailedJobs", message))
    waited = kubetrain("wait", "trainjob/bad", "--for=condition=Complete", f"--timeout={PATIENCE:g}s")
    assert (waited.exit_code, waited.stderr) == (1, f"error: TrainJob {namespace}/bad failed: {message}\n")
    with pytest.raises(JobFailedError, match=message):
        client.wait_for_job_conditions(
            "bad", job_kind="TrainJob", polling_interval=0.2, wait_timeout=PATIENCE
        )


@pytest.mark.usefixtures("operator")
def test_the_sdk_reads_a_trainjobs_pods_by_node_and_its_events(
    client: TrainingClient, kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    created = client.create_job(trainjob("pods"))
    assert isinstance(created, TrainJob)
    first, second = node_pods(kube_api, pod_driver, namespace, "pods", 2)
    assert client.get_job_replicas("pods", job_kind="TrainJob") == {first: "node-0", second: "node-1"}
    assert client.get_job_pod_names("pods", job_kind="TrainJob", replica_index=1) == [second]
    assert client.get_job_pod_names("pods", job_kind="TrainJob", is_master=True) == [first]
    assert client.get_job_state("pods", job_kind="TrainJob") == "Created"
    for pod in (first, second):
        pod_driver.run((namespace, pod))
    assert client.is_job_running("pods", job_kind="TrainJob")
    reasons = {(e.involved, e.reason) for e in client.get_job_events("pods", job_kind="TrainJob")}
    assert (f"Pod/{first}", "Scheduled") in reasons


@pytest.mark.usefixtures("operator")
def test_a_trainjobs_node_waiting_for_its_image_is_diagnosed(
    kubetrain: Any, client: TrainingClient, kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    client.create_job(trainjob("pull", nodes=1))
    [pod] = node_pods(kube_api, pod_driver, namespace, "pull", 1, image="example.com/missing:1")
    pod_driver.wait_for_image(
        (namespace, pod), "ImagePullBackOff", 'Back-off pulling image "example.com/missing:1"'
    )
    [finding] = client.get_job_diagnosis("pull", job_kind="TrainJob")
    assert finding.reason == "ImagePullFailed"
    assert "example.com/missing:1" in finding.message
    assert finding.replicas == ("pull-node-0-0",)
    assert kubetrain("describe", "trainjob", "pull").stdout.startswith("Diagnosis:\n  ImagePullFailed: ")


@pytest.mark.usefixtures("operator")
def test_a_trainjob_is_suspended_resumed_and_deleted(
    kubetrain: Any, client: TrainingClient, tmp_path: Path, kube_api: KubeApi, namespace: str
) -> None:
    submitted(kubetrain, tmp_path, trainjob("held"))
    jobset_of(kube_api, namespace, "held")
    assert kubetrain("suspend", "trainjob", "held").stdout == "trainjob.trainer.kubeflow.org/held suspended\n"
    assert kubetrain("wait", "held", "--for=condition=Suspended", f"--timeout={PATIENCE:g}s").exit_code == 0
    assert kube_api.get(f"{TRAINER}/namespaces/{namespace}/trainjobs/held")["spec"]["suspend"] is True
    client.resume_job("held", job_kind="TrainJob")
    assert kube_api.get(f"{TRAINER}/namespaces/{namespace}/trainjobs/held")["spec"]["suspend"] is False
    deleted = kubetrain("delete", "trainjob", "held")
    assert deleted.stdout == 'trainjob.trainer.kubeflow.org "held" deleted\n'
    eventually(lambda: not kube_api.exists(f"{TRAINER}/namespaces/{namespace}/trainjobs/held"))


@pytest.mark.usefixtures("operator")
def test_the_cluster_watch_tells_a_trainjobs_nodes_as_its_pods_start(
    envtest: EnvtestCluster, client: TrainingClient, kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    watch = KubernetesBackend(envtest.kubeconfig).watch(None, namespace)
    events: list[JobWatchEvent] = []
    reader = threading.Thread(target=lambda: events.extend(watch), daemon=True)
    reader.start()
    try:
        client.create_job(trainjob("watched"))
        pods = node_pods(kube_api, pod_driver, namespace, "watched", 2)
        for pod in pods:
            pod_driver.run((namespace, pod))

        def running() -> JobWatchEvent | None:
            return next(
                (
                    e
                    for e in reversed(events)
                    if e.type is WatchEventType.MODIFIED
                    and (e.job or {}).get("kind") == "TrainJob"
                    and e.nodes == NodeTally(seen=2, active=2, running=2)
                ),
                None,
            )

        eventually(running)
    finally:
        watch.close()
        reader.join(5)


def v1_only_kubeconfig(envtest: EnvtestCluster, kube_api: KubeApi, namespace: str, tmp_path: Path) -> Path:
    """A user who may read PyTorchJobs and pods in ``namespace``, and nothing of Kubeflow Trainer's."""
    accounts = f"/api/v1/namespaces/{namespace}/serviceaccounts"
    kube_api.create(accounts, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "v1-user"}})
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
    rules = [
        {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    ]
    kube_api.create(f"{rbac}/roles", {"metadata": {"name": "v1-user"}, "rules": rules})
    binding = {
        "metadata": {"name": "v1-user"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "v1-user"},
        "subjects": [{"kind": "ServiceAccount", "name": "v1-user", "namespace": namespace}],
    }
    kube_api.create(f"{rbac}/rolebindings", binding)
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    token = kube_api.create(f"{accounts}/v1-user/token", request)["status"]["token"]
    config = yaml.safe_load(envtest.kubeconfig.read_text())
    config["users"][0]["user"] = {"token": token}
    path = tmp_path / "v1-user.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_user_of_the_v1_kinds_only_still_lists_and_watches_them(
    envtest: EnvtestCluster, crds: None, kube_api: KubeApi, namespace: str, tmp_path: Path
) -> None:
    kube_api.create(f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs", pytorch_job("classic"))
    config = v1_only_kubeconfig(envtest, kube_api, namespace, tmp_path)
    listing = cli_runner().invoke(app, ["get", "-n", namespace, "--kubeconfig", str(config)])
    assert listing.exit_code == 0, listing.stderr
    assert [line.split()[:2] for line in listing.stdout.splitlines()[1:]] == [["classic", "PyTorchJob"]]
    watch = KubernetesBackend(config).watch(None, namespace)
    seen: list[JobWatchEvent] = []
    for event in watch:
        seen.append(event)
        if event.type is WatchEventType.SYNCED:
            break
    watch.close()
    assert [(e.type, (e.job or {}).get("kind")) for e in seen] == [
        (WatchEventType.ADDED, "PyTorchJob"),
        (WatchEventType.SYNCED, None),
    ]
    refused = cli_runner().invoke(app, ["get", "trainjobs", "-n", namespace, "--kubeconfig", str(config)])
    assert refused.exit_code == 1 and "forbidden" in refused.stderr
