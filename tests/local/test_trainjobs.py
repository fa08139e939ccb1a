"""Kubeflow Trainer v2's TrainJob on this machine: every node of its runtime's JobSet a real process, the
rendezvous Trainer's plugins inject pointing at the other processes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from local.local_run import REPO, kubetrain_run, write_manifest

pytestmark = pytest.mark.local


def torch_ddp(tmp_path: Path, *args: str) -> dict[str, Any]:
    manifest: dict[str, Any] = yaml.safe_load((REPO / "examples" / "trainjob" / "torch-ddp.yaml").read_text())
    trainer = manifest["spec"]["trainer"]
    trainer["args"] = ["--steps", "30", "--checkpoint-dir", str(tmp_path / "ckpt"), *args]
    return manifest


def test_a_two_node_torch_distributed_trainjob_trains_with_torchrun_on_each_node(
    tmp_path: Path, state_dir: Path
) -> None:
    run = kubetrain_run(write_manifest(tmp_path, torch_ddp(tmp_path)), state_dir)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.condition("Succeeded")["reason"] == "AllJobsCompleted"  # type: ignore[index]
    assert {r["name"] for r in run.status_record["replicas"]} == {"node-0", "node-1"}
    assert "training finished" in run.lines_of("node-0")
    assert (tmp_path / "ckpt" / "model.pt").exists()
    assert run.job_status["trainerStatus"]["progressPercentage"] == 100


EXIT_WITH_RANK = "import os, sys; sys.exit(int(os.environ['PET_NODE_RANK']))"


def test_a_trainjob_whose_node_fails_for_good_fails_with_failed_jobs(tmp_path: Path, state_dir: Path) -> None:
    manifest = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "broken"},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {
                "numNodes": 2,
                "command": ["python", "-c", "import os, sys; sys.exit(int(os.environ['PET_NODE_RANK']))"],
            },
        },
    }
    run = kubetrain_run(write_manifest(tmp_path, manifest), state_dir)
    assert run.returncode == 1
    assert run.condition("Failed")["reason"] == "FailedJobs"  # type: ignore[index]
    assert run.replica("node-1")["exit_codes"][-1] == 1


INDEX = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}


def plain_runtime(command: list[str]) -> dict[str, Any]:
    """A namespaced runtime of 3 plain nodes, each given its completion index as ``RANKING``."""
    node = {
        "name": "node",
        "image": "python",
        "command": command,
        "env": [{"name": "RANKING", "valueFrom": INDEX}],
    }
    job = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": {"containers": [node]}}},
        },
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "plain"},
        "spec": {"mlPolicy": {"numNodes": 3}, "template": {"spec": {"replicatedJobs": [job]}}},
    }


def test_a_trainjob_on_a_runtime_the_file_carries_runs_on_it(tmp_path: Path, state_dir: Path) -> None:
    runtime = plain_runtime(["python", "-c", "print('node', __import__('os').environ['RANKING'])"])
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "plain-job"},
        "spec": {"runtimeRef": {"name": "plain", "kind": "TrainingRuntime"}},
    }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump_all([runtime, trainjob]))
    run = kubetrain_run(path, state_dir)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert [run.lines_of(f"node-{i}") for i in range(3)] == [["node 0"], ["node 1"], ["node 2"]]
