"""What the SDK's and CLI's cluster tests share: the operator as a subprocess, a tiny PyTorchJob, polling."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from operator_process import running_operator
from waiting import eventually

__all__ = ["CRDS", "KUBETRAIN", "eventually", "pytorch_job", "running_operator"]

CRDS = Path(__file__).resolve().parents[3] / "manifests" / "crds"
KUBETRAIN = Path(sys.executable).parent / "kubetrain"


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
