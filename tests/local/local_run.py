"""Helpers for the local tier: run ``kubetrain run`` for real and read what its processes did.

(A uniquely named module rather than ``conftest``: tests/cluster has a conftest too, and both
would be importable as ``conftest``.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from waiting import eventually

REPO = Path(__file__).resolve().parents[2]
KUBETRAIN = str(Path(sys.executable).parent / "kubetrain")
SCRIPTS = Path(__file__).resolve().parent / "scripts"


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    state_dir: Path
    job_name: str

    @property
    def status_record(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.state_dir / self.job_name / "status.json").read_text())
        return data

    @property
    def job_status(self) -> dict[str, Any]:
        status: dict[str, Any] = self.status_record["job"]["status"]
        return status

    def condition(self, type_: str) -> dict[str, Any] | None:
        found = [
            c for c in self.job_status.get("conditions", []) if c["type"] == type_ and c["status"] == "True"
        ]
        return found[-1] if found else None

    def replica(self, name: str) -> dict[str, Any]:
        records: list[dict[str, Any]] = self.status_record["replicas"]
        return next(r for r in records if r["name"] == name)

    def lines_of(self, replica: str) -> list[str]:
        """What one replica printed, in order, from the multiplexed stdout."""
        found = []
        for line in self.stdout.splitlines():
            head, separator, text = line.partition(" | ")
            if separator and head.strip() == replica:
                found.append(text)
        return found


def write_manifest(directory: Path, manifest: dict[str, Any]) -> Path:
    path = directory / "job.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    return path


def kubetrain_run(
    manifest: Path, state_dir: Path, *, timeout: float = 240, extra: tuple[str, ...] = ()
) -> Run:
    documents = [d for d in yaml.safe_load_all(manifest.read_text()) if d]
    job = next(d for d in documents if not str(d.get("kind", "")).endswith("TrainingRuntime"))
    job_name = str(job["metadata"]["name"])
    result = subprocess.run(
        [KUBETRAIN, "run", str(manifest), "--state-dir", str(state_dir), "--grace-period", "5", *extra],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Run(result.returncode, result.stdout, result.stderr, state_dir, job_name)


def python_job(
    name: str,
    replicas: dict[str, tuple[int, list[str]]],
    *,
    kind: str = "PyTorchJob",
    specs_field: str = "pytorchReplicaSpecs",
    container: str = "pytorch",
    restart_policy: str = "Never",
    run_policy: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A job whose replicas run ``python <argv>``: type → (replicas, argv after python)."""
    spec: dict[str, Any] = {
        specs_field: {
            replica_type: {
                "replicas": count,
                "restartPolicy": restart_policy,
                "template": {
                    "spec": {
                        "containers": [
                            {"name": container, "image": "python:3.11", "command": ["python", *argv]}
                        ]
                    }
                },
            }
            for replica_type, (count, argv) in replicas.items()
        }
    }
    if run_policy:
        spec["runPolicy"] = run_policy
    return {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


MASTER_AFTER_WORKERS = """
import os, pathlib, time


def gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


while True:
    pids = [int(file.read_text() or 0) for file in pathlib.Path({directory}).glob("rank-*")]
    if len(pids) == {workers} and all(pid and gone(pid) for pid in pids):
        break
    time.sleep(0.05)
"""

WORKER_DONE = """
import os, pathlib, sys
sys.stdout.flush()
pathlib.Path({directory}, "rank-" + os.environ["RANK"]).write_text(str(os.getpid()))
"""


def master_last(directory: Path, rank: str, workers: int) -> tuple[str, str]:
    """(master, worker) scripts that each run ``rank``, the master only once every worker's process has
    ended: a PyTorchJob ends with its master's success, which would stop a worker still running. Each
    worker leaves its pid in ``directory``, so the order holds however slowly a loaded machine runs them."""
    directory.mkdir(exist_ok=True)
    where = repr(str(directory))
    master = MASTER_AFTER_WORKERS.format(directory=where, workers=workers) + rank
    return master, rank + "\n" + WORKER_DONE.format(directory=where)


def wait_for_findings(status: Path) -> list[dict[str, Any]]:
    """A local run's diagnosis findings, once its ``status.json`` holds any."""

    def findings() -> list[dict[str, Any]]:
        try:
            found: list[dict[str, Any]] = json.loads(status.read_text())["findings"]
        except (OSError, ValueError, KeyError):
            return []  # not written yet, or caught mid-write
        return found

    return eventually(findings, f"a finding in {status}")
