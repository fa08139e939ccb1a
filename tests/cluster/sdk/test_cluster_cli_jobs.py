"""The kubectl-like commands against a real API server, the operator running, the pod driver as kubelet."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cluster_sdk_support import CRDS, eventually, pytorch_job, running_operator

from builders import cli_runner
from kubetrain.cli.main import app
from kubetrain.envtest.crds import install_crds
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.poddriver import PodDriver
from kubetrain.envtest.pytest_plugin import EnvtestCluster
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
def kubetrain(envtest: EnvtestCluster, namespace: str) -> Any:
    runner = cli_runner()

    def invoke(*args: str, kubeconfig: Path | None = None) -> Any:
        config = kubeconfig or envtest.kubeconfig
        return runner.invoke(
            app, [*args, "-n", namespace, "--kubeconfig", str(config)], env={"NO_COLOR": "1"}
        )

    return invoke


def submit(kubetrain: Any, tmp_path: Path, name: str, restart_policy: str = "Never") -> None:
    job = pytorch_job(name)
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        spec["restartPolicy"] = restart_policy
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job))
    result = kubetrain("submit", str(path))
    assert result.stdout == f"pytorchjob.kubeflow.org/{name} created\n", result.stderr


def pods_of(kube_api: KubeApi, namespace: str, count: int) -> list[str]:
    def probe() -> list[str] | None:
        items = kube_api.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
        names = sorted(p["metadata"]["name"] for p in items)
        return names if len(names) == count else None

    return eventually(probe)


@pytest.mark.usefixtures("operator")
def test_submit_then_wait_until_succeeded_and_get_shows_it(
    kubetrain: Any, tmp_path: Path, kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    submit(kubetrain, tmp_path, "ok")
    for pod in pods_of(kube_api, namespace, 2):
        pod_driver.succeed((namespace, pod))
    waited = kubetrain("wait", "ok", "--for=condition=Succeeded", f"--timeout={PATIENCE:g}s")
    assert (waited.exit_code, waited.stdout) == (0, "pytorchjob.kubeflow.org/ok condition met\n"), (
        waited.stderr
    )
    listing = kubetrain("get", "pytorchjobs").stdout.splitlines()
    assert listing[0].split() == ["NAME", "STATE", "PROGRESS", "ETA", "REPLICAS", "RESTARTS", "AGE"]
    assert re.match(r"ok\s+Succeeded\s+-\s+-\s+Master 0/1 Worker 0/1\s+0\s+\d+s$", listing[1].rstrip())


@pytest.mark.usefixtures("operator")
def test_waiting_on_a_failing_job_exits_1_with_the_condition_message(
    kubetrain: Any, tmp_path: Path, kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    submit(kubetrain, tmp_path, "bad")
    pods_of(kube_api, namespace, 2)
    pod_driver.fail((namespace, "bad-master-0"), exit_code=2)
    waited = kubetrain("wait", "pytorchjob/bad", f"--timeout={PATIENCE:g}s")
    assert waited.exit_code == 1
    message = "PyTorchJob bad is failed because 1 Master replica(s) failed."
    assert waited.stderr == f"error: PyTorchJob {namespace}/bad failed: {message}\n"


@pytest.mark.usefixtures("operator")
def test_describe_shows_the_replicas_pods_and_the_operators_events(
    kubetrain: Any, tmp_path: Path, kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    submit(kubetrain, tmp_path, "told")
    for pod in pods_of(kube_api, namespace, 2):
        pod_driver.run((namespace, pod))
    kubetrain("wait", "told", "--for=condition=Running", f"--timeout={PATIENCE:g}s")
    text = kubetrain("describe", "pytorchjob", "told").stdout
    assert re.search(r"Master\s+1\s+1\s+0\s+0\s+Never\s+example.com/trainer:1", text)
    assert re.search(r"told-worker-0\s+Running\s+0\s+envtest-node-\d", text)
    assert re.search(r"Running\s+True\s+PyTorchJobRunning", text)
    assert "SuccessfulCreatePod" in text.split("Events:")[1]


@pytest.mark.usefixtures("operator")
@pytest.mark.parametrize("follow", [[], ["--follow"]], ids=["read", "follow"])
def test_logs_without_a_kubelet_is_a_one_line_error(
    kubetrain: Any,
    tmp_path: Path,
    kube_api: KubeApi,
    namespace: str,
    pod_driver: PodDriver,
    follow: list[str],
) -> None:
    submit(kubetrain, tmp_path, "quiet")
    for pod in pods_of(kube_api, namespace, 2):
        pod_driver.run((namespace, pod))
    result = kubetrain("logs", "quiet", *follow)
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1
    assert "no kubelet serves logs on this cluster" in result.stderr


@pytest.mark.usefixtures("operator")
def test_scale_suspend_resume_and_delete(
    kubetrain: Any, tmp_path: Path, kube_api: KubeApi, namespace: str
) -> None:
    submit(kubetrain, tmp_path, "grow")
    pods_of(kube_api, namespace, 2)
    assert kubetrain("scale", "pytorchjob", "grow", "--replicas", "2").stdout.endswith("scaled\n")
    pods_of(kube_api, namespace, 3)
    assert kubetrain("suspend", "pytorchjob/grow").exit_code == 0
    assert kubetrain("wait", "grow", "--for=condition=Suspended", f"--timeout={PATIENCE:g}s").exit_code == 0
    assert kubetrain("resume", "grow").exit_code == 0
    pods_of(kube_api, namespace, 3)
    assert kubetrain("delete", "pytorchjob", "grow").stdout == 'pytorchjob.kubeflow.org "grow" deleted\n'


def test_a_missing_job_is_a_one_line_not_found(kubetrain: Any, job_crds: list[str], namespace: str) -> None:
    result = kubetrain("get", "pytorchjob", "ghost")
    assert (result.exit_code, result.stderr) == (1, f"error: PyTorchJob {namespace}/ghost not found\n")


def test_a_missing_kubeconfig_is_a_one_line_error(kubetrain: Any, tmp_path: Path) -> None:
    result = kubetrain("get", kubeconfig=tmp_path / "absent.kubeconfig")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: no usable kubeconfig (Configuration file ")
    assert result.stderr.count("\n") == 1


def test_a_user_without_rights_gets_a_one_line_forbidden(
    kubetrain: Any,
    job_crds: list[str],
    kube_api: KubeApi,
    namespace: str,
    envtest: EnvtestCluster,
    tmp_path: Path,
) -> None:
    accounts = f"/api/v1/namespaces/{namespace}/serviceaccounts"
    kube_api.create(accounts, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "nobody"}})
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    token = kube_api.create(f"{accounts}/nobody/token", request)["status"]["token"]
    config = yaml.safe_load(envtest.kubeconfig.read_text())
    config["users"][0]["user"] = {"token": token}
    restricted = tmp_path / "nobody.kubeconfig"
    restricted.write_text(yaml.safe_dump(config))
    result = kubetrain("get", "pytorchjobs", kubeconfig=restricted)
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1
    assert re.match(
        r"error: Failed to list PyTorchJob in .*: forbidden: .*cannot list resource", result.stderr
    )


@pytest.mark.usefixtures("job_crds")
def test_a_dry_run_is_checked_by_the_server_and_creates_nothing(kubetrain: Any, tmp_path: Path) -> None:
    path = tmp_path / "draft.yaml"
    path.write_text(yaml.safe_dump(pytorch_job("draft")))
    printed = yaml.safe_load(kubetrain("submit", str(path), "--dry-run").stdout)
    assert printed["metadata"]["uid"]
    assert kubetrain("get", "pytorchjob", "draft").exit_code == 1


@pytest.mark.usefixtures("operator")
def test_get_shows_the_restarts_of_the_jobs_live_pods(
    kubetrain: Any, tmp_path: Path, kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    submit(kubetrain, tmp_path, "bumpy", restart_policy="OnFailure")
    for pod in pods_of(kube_api, namespace, 2):
        pod_driver.run((namespace, pod))
    pod_driver.restart((namespace, "bumpy-worker-0"))
    pod_driver.restart((namespace, "bumpy-worker-0"))

    def restarts_column() -> str | None:
        row = kubetrain("get", "pytorchjob", "bumpy").stdout.splitlines()[1].split()
        return row[-2] if row[-2] == "2" else None

    assert eventually(restarts_column) == "2"
