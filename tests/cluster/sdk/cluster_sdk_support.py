"""What the SDK's and CLI's cluster tests share: the operator as a subprocess, a tiny PyTorchJob, polling."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
CRDS = Path(__file__).resolve().parents[3] / "manifests" / "crds"
KUBETRAIN = Path(sys.executable).parent / "kubetrain"


def eventually(probe: Callable[[], T | None], timeout: float = 30.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g}s")
        time.sleep(0.1)


@contextmanager
def running_operator(kubeconfig: Path, namespace: str, log_path: Path) -> Iterator[None]:
    """``kubetrain operator`` watching only ``namespace`` (other tests share the cluster); its log is printed
    afterwards, so a failing test shows what the operator did."""
    command = [str(KUBETRAIN), "operator", "--kubeconfig", str(kubeconfig), "--namespace", namespace]
    command += ["--metrics-bind-address", "0", "--health-probe-bind-address", "0"]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
    try:
        yield
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        print(f"--- operator log\n{log_path.read_text(errors='replace')[-4000:]}")


def pytorch_job(name: str, workers: int = 1) -> dict[str, Any]:
    def replicas(count: int) -> dict[str, Any]:
        template = {"spec": {"containers": [{"name": "pytorch", "image": "example.com/trainer:1"}]}}
        return {"replicas": count, "restartPolicy": "Never", "template": template}

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": {"Master": replicas(1), "Worker": replicas(workers)}},
    }
