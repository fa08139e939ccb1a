"""What the SDK's and CLI's cluster tests share: the operator as a subprocess, a tiny PyTorchJob, polling."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from operator_process import running_operator

__all__ = ["CRDS", "KUBETRAIN", "eventually", "pytorch_job", "running_operator"]

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
