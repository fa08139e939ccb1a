"""A run's state directory: ``status.json`` and per-replica logs, readable from another terminal.

Layout, under the state directory (default ``~/.local/state/kubetrain/runs``, or
``$KUBETRAIN_STATE_DIR``, or ``--state-dir``)::

    <job>/status.json          the job (wire form, with status) and every replica's process
    <job>/logs/<type>-<i>.log  each replica's output, whole lines, every attempt appended
    <job>/config/              files the framework asks for beside the replicas (MPI hostfile)
    <job>/progress/<type>-<i>/ each replica's credentials for the run's status endpoint (CA, token)

``status.json`` is replaced atomically on every change, so readers never see half a file. It
records the runner's pid and start time: a record whose runner is gone but whose job never
finished is reported as stale rather than as still running.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kubetrain.api.summary import NodeTally, is_finished
from kubetrain.local.trainjob_record import (
    carried_trainjob,
    event_as_trainjob,
    finding_as_trainjob,
    node_tally,
    trainjob_wire,
)

STATE_DIR_ENV = "KUBETRAIN_STATE_DIR"
STATUS_FILE = "status.json"
DEFAULT_GRACE_PERIOD = 30.0
"""A pod's default ``terminationGracePeriodSeconds``."""


def default_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    if environ.get(STATE_DIR_ENV):
        return Path(environ[STATE_DIR_ENV]).expanduser()
    state_home = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "kubetrain" / "runs"


@dataclass
class ReplicaRecord:
    name: str
    """``<type>-<index>``."""
    replica_type: str
    index: int
    pid: int | None
    phase: str
    restarts: int
    exit_code: int | None
    exit_codes: list[int]
    log: str


@dataclass
class RunRecord:
    job: dict[str, Any]
    """The job's wire form, ``status`` included."""
    replicas: list[ReplicaRecord]
    runner_pid: int
    runner_started_at: float
    """The runner process's creation time: a reused pid does not pass for a live runner."""
    finished: bool = False
    """The runner has ended (the job finished, or the run was interrupted)."""
    interrupted: bool = False
    events: list[dict[str, Any]] = field(default_factory=list)
    """The run's events as a cluster keeps them: type, reason, message, count, lastTimestamp."""
    runtime: str = "process"
    """What ran the replicas (``--runtime``): deleting a container run removes its containers too."""
    findings: list[dict[str, Any]] = field(default_factory=list)
    """The run's diagnosis as of its last reconcile (``engine.diagnosis.Finding``: reason, message,
    replicas): what ``describe --local`` and ``get_job_diagnosis`` show."""
    progress_history: dict[str, Any] = field(default_factory=dict)
    """The job's progress reports over the run, thinned (``api.progress.ProgressHistory.to_json``; kept as
    plain data here so that listing runs needs no model). The latest report is in the job's status."""
    failures: dict[str, Any] | None = None
    """Which replica failed first, and how, and each failed replica's latest failure
    (``engine.failures.FailureRecord.to_json``); None while no replica failed."""
    grace_period: float = DEFAULT_GRACE_PERIOD
    """The longest time a replica of the run is given between SIGTERM and SIGKILL (its template's
    ``terminationGracePeriodSeconds``, or ``--grace-period``): what the reaper gives the processes of a run
    whose runner died."""

    @property
    def name(self) -> str:
        return str(self.job.get("metadata", {}).get("name", ""))

    def runner_alive(self) -> bool:
        import psutil  # not for listing an empty state directory

        try:
            started = float(psutil.Process(self.runner_pid).create_time())
            return abs(started - self.runner_started_at) < 1.0
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return False

    @property
    def stale(self) -> bool:
        """The runner died without finishing the run (killed, machine rebooted)."""
        return not self.finished and not self.runner_alive()

    @property
    def restarts(self) -> int:
        """Restarts of every replica process of the run."""
        return sum(replica.restarts for replica in self.replicas)

    def job_wire(self) -> dict[str, Any]:
        """The job as listings and the SDK show it: created when its runner started (no API server stamps a
        local run), and Failed when the run ended without a result, so that waiting on it ends. A TrainJob's
        run shows as that TrainJob (``local.trainjob_record``), not as the JobSet run carrying it out."""
        job = dict(self.job)
        metadata = dict(job.get("metadata") or {})
        if not metadata.get("creationTimestamp"):
            metadata["creationTimestamp"] = wire_time(self.runner_started_at)
        job["metadata"] = metadata
        stopped = self._stopped_condition()
        if stopped is not None and not is_finished(job):
            status = dict(job.get("status") or {})
            status["conditions"] = [*(status.get("conditions") or []), stopped]
            job["status"] = status
        trainjob = carried_trainjob(job)
        return job if trainjob is None else trainjob_wire(job, trainjob, self.replicas)

    @property
    def nodes(self) -> NodeTally | None:
        """A TrainJob run's training nodes (None for a v1 job's run)."""
        return None if carried_trainjob(self.job) is None else node_tally(self.job, self.replicas)

    def shown_events(self) -> list[dict[str, Any]]:
        """The run's events as the job shown (``job_wire``) has them."""
        if carried_trainjob(self.job) is None:
            return self.events
        return [event_as_trainjob(e, self.name) for e in self.events]

    def shown_findings(self) -> list[dict[str, Any]]:
        """The run's findings as the job shown (``job_wire``) has them."""
        if carried_trainjob(self.job) is None:
            return self.findings
        return [finding_as_trainjob(f, self.name) for f in self.findings]

    def with_runner_gone(self, stopped: str) -> RunRecord:
        """The record of a run whose runner died, once its reaper stopped what the runner left: no replica
        shows as running or active any more (the stopped ones count as failed), and a Warning event says what
        was stopped (``stopped``)."""
        replicas = [
            replace(r, pid=None, phase="Failed") if r.phase == "Running" else r for r in self.replicas
        ]
        status = dict(self.job.get("status") or {})
        status["replicaStatuses"] = {
            replica_type: {**counts, "active": 0, "failed": counts.get("failed", 0) + counts.get("active", 0)}
            for replica_type, counts in (status.get("replicaStatuses") or {}).items()
        }
        message = f"the local runner (pid {self.runner_pid}) died before the job finished; stopped {stopped}"
        event = {
            "type": "Warning",
            "reason": "LocalRunnerGone",
            "message": message,
            "count": 1,
            "lastTimestamp": wire_time(time.time()),
        }
        job = {**self.job, "status": status}
        return replace(self, job=job, replicas=replicas, events=[*self.events, event])

    def _stopped_condition(self) -> dict[str, str] | None:
        if self.stale:
            message = f"the local runner (pid {self.runner_pid}) is gone without finishing the job"
            reason = "LocalRunnerGone"
        elif self.finished and self.interrupted:
            message = "the local run was stopped before the job finished"
            reason = "LocalRunInterrupted"
        else:
            return None
        now = wire_time(time.time())
        times = {"lastUpdateTime": now, "lastTransitionTime": now}
        return {"type": "Failed", "status": "True", "reason": reason, "message": message, **times}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRecord:
        return cls(
            job=dict(data["job"]),
            replicas=[ReplicaRecord(**r) for r in data.get("replicas", [])],
            runner_pid=int(data["runner_pid"]),
            runner_started_at=float(data["runner_started_at"]),
            finished=bool(data.get("finished", False)),
            interrupted=bool(data.get("interrupted", False)),
            events=list(data.get("events", [])),
            runtime=str(data.get("runtime", "process")),
            findings=list(data.get("findings", [])),
            progress_history=_mapping(data.get("progress_history")),
            failures=_mapping(data["failures"]) if isinstance(data.get("failures"), Mapping) else None,
            grace_period=float(data.get("grace_period", DEFAULT_GRACE_PERIOD)),
        )


class RunDirectory:
    """The files of one job's run."""

    def __init__(self, state_dir: Path, job_name: str) -> None:
        self.root = state_dir / job_name
        self.status_path = self.root / STATUS_FILE
        self.logs_dir = self.root / "logs"
        self.config_dir = self.root / "config"
        self.progress_dir = self.root / "progress"

    def log_path(self, replica: str) -> Path:
        return self.logs_dir / f"{replica}.log"

    def reset(self) -> None:
        """Forget a previous run of the same job name (its logs would otherwise be appended to)."""
        for directory in (self.logs_dir, self.config_dir, self.progress_dir):
            shutil.rmtree(directory, ignore_errors=True)
        self.status_path.unlink(missing_ok=True)
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self.config_dir.mkdir(parents=True, exist_ok=True)

    def write(self, record: RunRecord) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.root, prefix=".status-", suffix=".json")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(record.to_json(), out, indent=2)
            Path(temporary).replace(self.status_path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def read(self) -> RunRecord | None:
        try:
            return RunRecord.from_json(json.loads(self.status_path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None


def _mapping(value: object) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def wire_time(seconds: float) -> str:
    """A Kubernetes ``metav1.Time``: RFC 3339 in UTC, second precision."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def list_runs(state_dir: Path) -> list[RunRecord]:
    """Every run recorded under ``state_dir``, by job name."""
    if not state_dir.is_dir():
        return []
    records = (RunDirectory(state_dir, d.name).read() for d in sorted(state_dir.iterdir()) if d.is_dir())
    return [r for r in records if r is not None]
