"""``kubetrain dashboard`` as a subprocess, for the cluster tier, the browser tier and the bench: started on a
free port, its URL read from what it prints, stopped with Ctrl-C (SIGINT) as a person stops it."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from waiting import PATIENCE

KUBETRAIN = Path(sys.executable).parent / "kubetrain"
CRDS = Path(__file__).resolve().parents[1] / "manifests" / "crds"
URL = re.compile(r"at (http://\S+/) \(Ctrl-C stops it\)")


@dataclass
class RunningDashboard:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, timeout: float = PATIENCE) -> int:
        """Ctrl-C; the exit status. Everything the dashboard started ends with it."""
        children = psutil.Process(self.process.pid).children(recursive=True)
        self.process.send_signal(signal.SIGINT)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
            raise AssertionError(f"the dashboard did not stop within {timeout}s of Ctrl-C") from None
        _, alive = psutil.wait_procs(children, timeout=PATIENCE)
        assert not alive, f"left running after Ctrl-C: {alive}"
        return code


@contextmanager
def running_dashboard(
    *arguments: str, log: Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Iterator[RunningDashboard]:
    command = [str(KUBETRAIN), "dashboard", "--port", "0", *arguments]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    dashboard = RunningDashboard("", process, log)
    try:
        deadline = time.monotonic() + PATIENCE
        while not (found := URL.search(dashboard.output())):
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the dashboard did not start:\n{dashboard.output()}")
            time.sleep(0.05)
        dashboard.url = found.group(1)
        yield dashboard
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        print(f"--- dashboard output\n{dashboard.output()[-4000:]}")


def pytorch_job(name: str, workers: int = 1, restart_policy: str = "Never") -> dict[str, Any]:
    """A small PyTorchJob for the cluster tier, whose pods the pod driver runs."""

    def replicas(count: int) -> dict[str, Any]:
        template = {"spec": {"containers": [{"name": "pytorch", "image": "example.com/trainer:1"}]}}
        return {"replicas": count, "restartPolicy": restart_policy, "template": template}

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": {"Master": replicas(1), "Worker": replicas(workers)}},
    }
