"""The operator as a real subprocess against envtest, and small helpers the operator's cluster tests share."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kubetrain.api.jobs import JOB_MODELS
from kubetrain.envtest.kubeapi import ApiError, KubeApi, KubeObject
from waiting import PATIENCE
from waiting import eventually as eventually

KUBETRAIN = Path(sys.executable).parent / "kubetrain"
GROUP = "/apis/kubeflow.org/v1"
PLURALS = {model.KIND: model.PLURAL for model in JOB_MODELS}


class OperatorProcess:
    """``kubetrain operator`` running in the background, its log in a file."""

    def __init__(
        self, kubeconfig: Path, log_path: Path, args: Sequence[str], env: dict[str, str] | None = None
    ) -> None:
        self.log_path = log_path
        command = [
            str(KUBETRAIN),
            "operator",
            "--kubeconfig",
            str(kubeconfig),
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            "0",
            "--kube-api-qps",
            "200",
            "--kube-api-burst",
            "400",
            *args,
        ]
        self._log = log_path.open("ab")
        self.process = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def terminate(self, timeout: float = PATIENCE) -> int:
        """SIGTERM and wait: the operator's graceful shutdown."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        finally:
            self._log.close()

    def kill(self) -> None:
        """SIGKILL: no shutdown at all, as when a node dies."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(PATIENCE)
        self._log.close()


StartOperator = Callable[..., OperatorProcess]
"""``start_operator(*flags, watch_namespace=..., env=...)``: the fixture that starts operators for a test."""


def job_collection(kind: str, namespace: str) -> str:
    return f"{GROUP}/namespaces/{namespace}/{PLURALS[kind]}"


def job_path(kind: str, namespace: str, name: str) -> str:
    return f"{job_collection(kind, namespace)}/{name}"


def create_job(api: KubeApi, namespace: str, manifest: KubeObject) -> KubeObject:
    manifest = {**manifest, "metadata": {**manifest["metadata"], "namespace": namespace}}
    return api.create(job_collection(manifest["kind"], namespace), manifest)


def get_job(api: KubeApi, kind: str, namespace: str, name: str) -> KubeObject:
    return api.get(job_path(kind, namespace, name))


def condition_true(job: KubeObject, type_: str) -> KubeObject | None:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition["type"] == type_ and condition["status"] == "True":
            return dict(condition)
    return None


def wait_condition(api: KubeApi, kind: str, namespace: str, name: str, type_: str) -> KubeObject:
    def probe() -> KubeObject | None:
        job = get_job(api, kind, namespace, name)
        return job if condition_true(job, type_) else None

    return eventually(probe, f"{kind} {namespace}/{name} condition {type_}=True")


def pods(api: KubeApi, namespace: str, selector: str = "") -> list[KubeObject]:
    params = {"labelSelector": selector} if selector else None
    return list(api.get(f"/api/v1/namespaces/{namespace}/pods", params)["items"])


def services(api: KubeApi, namespace: str) -> list[KubeObject]:
    return list(api.get(f"/api/v1/namespaces/{namespace}/services")["items"])


def names(objects: Sequence[KubeObject]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objects)


def wait_pods(api: KubeApi, namespace: str, expected: Sequence[str]) -> list[KubeObject]:
    """Wait until exactly the pods ``expected`` exist (none terminating)."""

    def probe() -> tuple[list[KubeObject]] | None:
        current = [p for p in pods(api, namespace) if not p["metadata"].get("deletionTimestamp")]
        return (current,) if names(current) == sorted(expected) else None  # a tuple: [] is an answer too

    return eventually(probe, f"pods {sorted(expected)} in {namespace}")[0]


def pod(api: KubeApi, namespace: str, name: str) -> KubeObject:
    return api.get(f"/api/v1/namespaces/{namespace}/pods/{name}")


def env_of(pod_object: KubeObject, container: str) -> dict[str, Any]:
    spec = next(c for c in pod_object["spec"]["containers"] if c["name"] == container)
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in spec.get("env") or []}


def events(api: KubeApi, namespace: str, reason: str) -> list[KubeObject]:
    items = api.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    return [e for e in items if e.get("reason") == reason]


def gone(api: KubeApi, path: str) -> bool:
    try:
        api.get(path)
    except ApiError as error:
        return error.code == 404
    return False


def container(name: str, port: tuple[str, int] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": name, "image": "example.com/trainer:1"}
    if port is not None:
        spec["ports"] = [{"name": port[0], "containerPort": port[1]}]
    return spec


def replica(container_name: str, replicas: int = 1, restart_policy: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "replicas": replicas,
        "template": {"spec": {"containers": [container(container_name)]}},
    }
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return spec


def pytorch_job(
    name: str, workers: int = 2, restart_policy: str | None = None, **run_policy: Any
) -> KubeObject:
    spec: dict[str, Any] = {
        "pytorchReplicaSpecs": {
            "Master": replica("pytorch", 1, restart_policy),
            "Worker": replica("pytorch", workers, restart_policy),
        }
    }
    if run_policy:
        spec["runPolicy"] = run_policy
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name}, "spec": spec}
