"""Operator replicas as real ``kubetrain operator`` processes, each with its log, metrics port and status
endpoint, and the signals a fault sends them: SIGKILL (a crash, a node lost), SIGTERM (a pod deleted),
SIGSTOP / SIGCONT (a process frozen and thawed)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kubetrain.envtest.controlplane import free_port

KUBETRAIN = Path(sys.executable).parent / "kubetrain"
LEASE_NAME = "kubetrain-faults"
SUPERVISE_SECONDS = 0.2
_CAMPAIGNING = re.compile(r"^(?P<identity>\S+): campaigning for the leader Lease")


@dataclass
class Replica:
    """One ``kubetrain operator`` process."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    metrics_port: int
    started_at: float = field(default_factory=time.time)
    """Wall-clock seconds, comparable with the audit log's times."""
    exit_noted: bool = False

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_lines(self) -> list[dict[str, object]]:
        lines = []
        for line in self.log.splitlines():
            try:
                lines.append(json.loads(line))
            except ValueError:
                continue
        return lines

    def identity(self) -> str | None:
        """Its leader-election identity, once it has said it campaigns (with --leader-elect)."""
        for line in self.log_lines():
            match = _CAMPAIGNING.match(str(line.get("msg", "")))
            if match:
                return match.group("identity")
        return None

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: no shutdown at all, as a crash or a lost node."""
        if self.running:
            self.process.kill()
        self.process.wait(10)

    def terminate(self) -> int:
        """SIGTERM, as a kubelet sends when the pod is deleted: the operator releases the Lease and exits."""
        if self.running:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(20)

    def pause(self) -> None:
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)


@dataclass(frozen=True)
class Exit:
    replica: str
    code: int
    at: float
    """Wall-clock seconds."""


@dataclass
class Replicas:
    """The replicas of one scenario, kept at ``desired`` running as a Deployment's ReplicaSet and kubelet keep
    them: one that exits (killed, stopped, stepped down) is replaced at once. Each logs to ``log_dir``."""

    kubeconfig: Path
    namespace: str
    log_dir: Path
    leader_elect: bool
    desired: int
    started: list[Replica] = field(default_factory=list)
    exits: list[Exit] = field(default_factory=list)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _supervisor: threading.Thread | None = None

    def start(self) -> None:
        """Start ``desired`` replicas and keep them running until ``stop_all``."""
        for _ in range(self.desired):
            self._start_one()
        self._supervisor = threading.Thread(target=self._supervise, name="replica supervisor", daemon=True)
        self._supervisor.start()

    def _supervise(self) -> None:
        while not self._stopping.wait(SUPERVISE_SECONDS):
            with self._lock:
                for replica in self.started:
                    code = replica.process.poll()
                    if code is not None and not replica.exit_noted:
                        replica.exit_noted = True
                        self.exits.append(Exit(replica.name, code, time.time()))
                if sum(replica.running for replica in self.started) < self.desired:
                    self._start_one()

    def _start_one(self) -> Replica:
        name = f"operator-{len(self.started)}"
        metrics, status = free_port(), free_port()
        command = [
            str(KUBETRAIN),
            "operator",
            "--kubeconfig",
            str(self.kubeconfig),
            "--namespace",
            self.namespace,
            "--metrics-bind-address",
            f"127.0.0.1:{metrics}",
            "--health-probe-bind-address",
            "0",
            # The endpoint on, as installed: its writes are every replica's and must be told apart.
            "--status-server-bind-address",
            f"127.0.0.1:{status}",
            "--status-server-url",
            f"https://127.0.0.1:{status}",
            "--status-server-namespace",
            self.namespace,
        ]
        if self.leader_elect:
            command += ["--leader-elect", "--leader-election-namespace", self.namespace]
            command += ["--leader-election-id", LEASE_NAME]
        log_path = self.log_dir / f"{self.namespace}-{name}.log"
        with log_path.open("ab") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
        replica = Replica(name, process, log_path, metrics)
        self.started.append(replica)
        return replica

    def running(self) -> list[Replica]:
        with self._lock:
            return [replica for replica in self.started if replica.running]

    def holding(self, identity: str) -> Replica:
        """The replica whose leader-election identity this is."""
        for replica in list(self.started):
            if replica.identity() == identity:
                return replica
        raise LookupError(f"no replica of {self.namespace} campaigns as {identity}")

    def log_mentions(self, text: str) -> int:
        """Lines of every replica's log (those that exited too) containing ``text``."""
        return sum(line.count(text) for replica in list(self.started) for line in replica.log.splitlines())

    def stop_all(self) -> None:
        self._stopping.set()
        if self._supervisor is not None:
            self._supervisor.join(timeout=10)
        for replica in self.started:
            if replica.running:
                replica.resume()  # a paused process cannot act on SIGTERM
                try:
                    replica.terminate()
                except subprocess.TimeoutExpired:
                    replica.kill()
