"""The first failure, kept, on a real API server: a job whose master fails under ``cleanPodPolicy: All`` still
shows, after its pods are gone, which replica failed first, its exit code and its last lines, in ``kubetrain
describe``, ``kubetrain logs`` and the SDK; the record is a ConfigMap the job owns. The pod driver plays the
kubelet: the last lines here are the container's termination message (what a kubelet reports under
``FallbackToLogsOnError``), as the operator's log reads on a fake node return nothing; tests/e2e reads a real
kubelet's log."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_sdk_support import CRDS, eventually, pytorch_job, running_operator

from builders import cli_runner
from kubetrain.cli.main import app
from kubetrain.envtest.crds import install_crds
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.poddriver import PodDriver
from kubetrain.envtest.pytest_plugin import EnvtestCluster
from kubetrain.sdk import TrainingClient

pytestmark = pytest.mark.cluster

LAST_LINES = "epoch 3\nloss is nan\n"


@pytest.fixture(scope="session")
def job_crds(kube_api: KubeApi) -> list[str]:
    return install_crds(kube_api, CRDS)


@pytest.fixture
def operator(envtest: EnvtestCluster, job_crds: list[str], namespace: str, tmp_path: Path) -> Iterator[None]:
    with running_operator(envtest.kubeconfig, namespace, tmp_path / "operator.log"):
        yield


def kubetrain(envtest: EnvtestCluster, namespace: str, *args: str) -> Any:
    result = cli_runner().invoke(app, [*args, "-n", namespace, "--kubeconfig", str(envtest.kubeconfig)])
    assert result.exit_code == 0, result.output
    return result


def pods(kube_api: KubeApi, namespace: str) -> list[str]:
    return sorted(
        p["metadata"]["name"] for p in kube_api.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
    )


def failed_and_cleaned_up(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver, message: str | None
) -> None:
    """``fails``: Master and Worker, restartPolicy Never, cleanPodPolicy All; the master fails with exit code
    1 while the worker runs, and the job is Failed and its pods gone."""
    job = pytorch_job("fails")
    job["spec"]["runPolicy"] = {"cleanPodPolicy": "All"}
    kube_api.create(f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs", job)
    eventually(lambda: pods(kube_api, namespace) == ["fails-master-0", "fails-worker-0"] or None)
    pod_driver.run((namespace, "fails-worker-0"))
    pod_driver.fail((namespace, "fails-master-0"), exit_code=1, message=message)

    def failed() -> bool:
        job = kube_api.get(f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/fails")
        done = any(
            c["type"] == "Failed" and c["status"] == "True"
            for c in (job.get("status") or {}).get("conditions", [])
        )
        return done and not pods(kube_api, namespace)

    eventually(failed, "the job Failed")


@pytest.mark.usefixtures("operator")
def test_after_cleanup_describe_shows_which_replica_failed_first_its_exit_code_and_last_lines(
    envtest: EnvtestCluster, kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    failed_and_cleaned_up(kube_api, namespace, pod_driver, LAST_LINES)

    text = kubetrain(envtest, namespace, "describe", "pytorchjob", "fails").stdout.splitlines()

    assert text[0] == "First Failure:"
    assert text[1].startswith("  Replica:    Master 0 (pod fails-master-0 on node ")
    assert text[2:3] == ["  How:        container pytorch exited with code 1 (Error)"]
    assert text[4:7] == ["  Last Lines:", "    epoch 3", "    loss is nan"]


@pytest.mark.usefixtures("operator")
def test_after_cleanup_logs_print_the_kept_lines_of_the_gone_pod_and_say_so(
    envtest: EnvtestCluster, kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    failed_and_cleaned_up(kube_api, namespace, pod_driver, LAST_LINES)

    lines = kubetrain(envtest, namespace, "logs", "fails").stdout.splitlines()

    assert lines[0].startswith(
        "master-0 | [kubetrain: pod fails-master-0 is gone; its last 2 line(s) as kept on the job at its "
        "first failure: container pytorch exited with code 1 (Error) at "
    )
    assert lines[1:] == ["master-0 | epoch 3", "master-0 | loss is nan"]


@pytest.mark.usefixtures("operator")
def test_after_cleanup_the_sdk_returns_the_first_failure_kept_in_a_config_map_the_job_owns(
    envtest: EnvtestCluster, kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    failed_and_cleaned_up(kube_api, namespace, pod_driver, LAST_LINES)

    failures = TrainingClient(config_file=str(envtest.kubeconfig), namespace=namespace).get_job_failures(
        "fails"
    )
    config_map = kube_api.get(f"/api/v1/namespaces/{namespace}/configmaps/fails-failure")
    job = kube_api.get(f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/fails")

    assert failures is not None
    first = failures.first
    assert (first.replica, first.exit_code, first.reason, first.lines) == (
        "master-0",
        1,
        "Error",
        LAST_LINES.strip(),
    )
    assert first.node
    [owner] = config_map["metadata"]["ownerReferences"]
    assert (owner["uid"], owner["controller"]) == (job["metadata"]["uid"], True)


@pytest.mark.usefixtures("operator")
def test_the_first_failure_is_one_warning_event_naming_the_replica_and_exit_code(
    envtest: EnvtestCluster, kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    failed_and_cleaned_up(kube_api, namespace, pod_driver, LAST_LINES)

    def first_failure_events() -> list[dict[str, Any]]:
        selector = "involvedObject.name=fails,reason=FirstFailure"
        items = kube_api.get(f"/api/v1/namespaces/{namespace}/events", {"fieldSelector": selector})["items"]
        return list(items)

    [event] = eventually(first_failure_events)
    assert event["type"] == "Warning"
    assert event["message"].startswith(
        "PyTorchJob fails: replica Master 0 failed first (pod fails-master-0 on node "
    )
    assert (
        'container pytorch exited with code 1 (Error); its last lines: "epoch 3 | loss is nan"'
        in event["message"]
    )
    assert event.get("count", 1) == 1


@pytest.mark.usefixtures("operator")
def test_a_failure_whose_log_cannot_be_read_is_kept_without_lines(
    envtest: EnvtestCluster, kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    # No termination message, and a fake node serves no logs: the record names the failure all the same.
    failed_and_cleaned_up(kube_api, namespace, pod_driver, None)

    text = kubetrain(envtest, namespace, "describe", "pytorchjob", "fails").stdout.splitlines()

    assert text[2:5] == [
        "  How:        container pytorch exited with code 1 (Error)",
        text[3],
        "  Last Lines: <none kept>",
    ]
