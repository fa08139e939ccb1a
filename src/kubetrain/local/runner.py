"""``kubetrain run``: observe the processes, ask the engine, carry out its decision, show it.

The loop is the local twin of the operator's reconcile: the processes are observed as pods would
be (phase, exit code, restarts), the engine's ``reconcile`` decides everything (restarts,
backoffLimit, activeDeadlineSeconds, cleanPodPolicy, success and failure), and the runner only
creates and deletes processes. It reconciles whenever a process changes and no later than the
engine's ``requeue_after``. When the job has finished, or on Ctrl-C / SIGTERM, every replica still
running is stopped (SIGTERM, grace period, SIGKILL): a local run never leaves processes behind.

The run serves its own status endpoint (``status_endpoint.py``) for as long as it runs: a report its
replicas send becomes the job's ``status.trainerStatus`` and a point of its history, and wakes the loop,
so the engine's progress deadline sees it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from kubetrain.api.common import ConditionType
from kubetrain.api.jobs import TrainingJob
from kubetrain.api.progress import ProgressHistory, StatusTarget, TrainerStatus
from kubetrain.engine.diagnosis import Finding
from kubetrain.engine.failures import FailureRecord, first_failure_event, record_failures
from kubetrain.engine.planning import desired_replicas, plan_replica
from kubetrain.engine.reconciler import reconcile
from kubetrain.engine.types import (
    Action,
    CreateReplica,
    DeleteReplica,
    EmitEvent,
    EventType,
    Observation,
    ReplicaPlan,
)
from kubetrain.frameworks.addressing import Addressing
from kubetrain.frameworks.base import Framework
from kubetrain.frameworks.registry import framework_for
from kubetrain.local import orphans
from kubetrain.local.display import ConditionView, Display, Snapshot, make_display, report_text
from kubetrain.local.gpus import detect_gpus
from kubetrain.local.launch import short_name
from kubetrain.local.logs import ReplicaLog
from kubetrain.local.state import DEFAULT_GRACE_PERIOD, ReplicaRecord, RunDirectory, RunRecord, wire_time
from kubetrain.local.status_endpoint import RunStatusEndpoint
from kubetrain.local.substrate import (
    ProcessOptions,
    ProcessSubstrate,
    Replica,
    RunContext,
    Substrate,
)
from kubetrain.progress.server import Reporter

POLL_INTERVAL = 1.0
"""Reconcile at least this often even when nothing is reported (a safety net, not the mechanism)."""
KEPT_EVENTS = 50
MAX_ANNOUNCED = 1000
"""Distinct findings a run announces; past that many (a message that changes without end) it stops."""
FINISH_DRAIN = 2.0
"""Seconds replicas still running when the job finishes get to exit by themselves before being stopped."""
RESTARTED_REASONS = frozenset({"restart", "job-restart"})
"""``DeleteReplica.reason`` when the engine replaces a replica to restart it (ExitCode; every replica under
restart scope Job): the new one counts a restart."""

ReplicaKey = tuple[str, int]


class Outcome(StrEnum):
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    INTERRUPTED = "Interrupted"


@dataclass(frozen=True)
class RunOptions:
    state_dir: Path
    cwd: Path = field(default_factory=Path.cwd)
    grace_period: float = DEFAULT_GRACE_PERIOD
    """Seconds between SIGTERM and SIGKILL for a replica whose template sets no
    ``terminationGracePeriodSeconds`` (a pod's default)."""
    quiet: bool = False
    base_env: Mapping[str, str] | None = None
    """The environment replicas inherit; this process's by default."""
    detect_gpus: Callable[[], list[str]] = detect_gpus
    display: Display | None = None
    adopt_orphans: bool = False
    """Become the child subreaper so processes that escape their group are still stopped (CLI only)."""
    substrate: Substrate | None = None
    """What runs the replicas; processes on this host (``ProcessSubstrate``) by default."""
    addressing: Addressing | None = None
    """How the replicas reach each other, when already decided (a TrainJob's env is planned with it); else
    the substrate's."""

    def make_substrate(self) -> Substrate:
        if self.substrate is not None:
            return self.substrate
        return ProcessSubstrate(ProcessOptions(self.cwd, self.base_env, self.detect_gpus))


@dataclass(frozen=True)
class RunResult:
    job: TrainingJob
    outcome: Outcome
    run_directory: RunDirectory
    stopped_by: signal.Signals | None = None


class LocalRun:
    """One job, run to completion on this machine. ``job`` must already be admitted (defaulted)."""

    def __init__(self, job: TrainingJob, options: RunOptions) -> None:
        self.job = job
        self.options = options
        self.framework: Framework[Any] = framework_for(job)
        self.directory = RunDirectory(options.state_dir, job.name)
        self.substrate = options.make_substrate()
        self.traits = self.substrate.traits
        self.addressing: Addressing = options.addressing or self.substrate.addressing(
            job,
            (
                (replica_type, index)
                for replica_type, spec in job.replica_specs.items()
                for index in range(1 if spec.replicas is None else spec.replicas)
            ),
        )
        self.config_files: dict[str, str] = self.framework.config_files(job, self.addressing, [])
        self.plans: dict[ReplicaKey, ReplicaPlan] = {
            key: plan_replica(job, *key, self.addressing) for key in desired_replicas(job, self.traits)
        }
        self.substrate.prepare(RunContext(job, self.framework, self.plans, self.config_files, self.directory))
        names = [short_name(*key) for key in self.plans]
        self.display = options.display or make_display(names, quiet=options.quiet)
        self.processes: dict[ReplicaKey, Replica] = {}
        self.events: list[dict[str, Any]] = []
        self.findings: tuple[Finding, ...] = ()
        """What the last reconcile diagnosed (``engine.diagnosis``)."""
        self.failures: FailureRecord | None = None
        """Which replica failed first, and how (``engine.failures``); None while none did."""
        self._announced: set[tuple[str, str]] = set()
        """``(reason, message)`` of every finding said so far."""
        self._replaced: dict[ReplicaKey, tuple[int, list[int]]] = {}
        """Per replica, the restarts and exit codes of processes already deleted (ExitCode restarts)."""
        self._deleting: set[Replica] = set()
        """Replicas being deleted (stopped within their grace period): a second interrupt kills them too."""
        self._changed = asyncio.Event()
        self._observed: Observation | None = None
        """What the last reconcile observed."""
        self._interrupts = 0
        self.stopped_by: signal.Signals | None = None
        """The signal that interrupted the run (SIGINT for Ctrl-C, SIGTERM)."""
        self._said_suspended = False
        self._started_at = time.time()
        self.history = ProgressHistory()
        self.endpoint = RunStatusEndpoint(job, names, self.directory.progress_dir, self)

    # --- preparation: everything that can be wrong is found before anything starts -------------

    def _write_config_files(self) -> None:
        for name, content in self.config_files.items():
            path = self.directory.config_dir / name
            path.write_text(content, encoding="utf-8")
            path.chmod(self.framework.config_file_modes.get(name, 0o644))

    # --- the loop ------------------------------------------------------------------------------

    async def run(self) -> RunResult:
        # A previous run of the same job name is replaced: its logs would otherwise be appended to.
        self.directory.reset()
        self._write_config_files()
        for note in self.substrate.notes():
            self.display.note(note)
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, self._interrupt, signum)
        if self.options.adopt_orphans:
            orphans.become_subreaper()
        self.display.start()
        outcome = Outcome.INTERRUPTED
        try:
            await self.substrate.open()
            await self.endpoint.start(self.substrate.status_access())
            outcome = await self._reconcile_until_done()
            if outcome is not Outcome.INTERRUPTED:
                await self._drain()
        finally:
            await self._stop_all()
            # After the replicas: what they report as they exit still counts.
            await self.endpoint.stop()
            await self.substrate.close(interrupted=outcome is Outcome.INTERRUPTED)
            if self.options.adopt_orphans:
                orphans.kill_adopted()
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)
        self._record(finished=True, interrupted=outcome is Outcome.INTERRUPTED)
        self.display.finish(self._snapshot())
        return RunResult(self.job, outcome, self.directory, self.stopped_by)

    async def _reconcile_until_done(self) -> Outcome:
        while True:
            self._changed.clear()
            if self._interrupts:
                return Outcome.INTERRUPTED
            observation = Observation(replicas=tuple(p.observe() for p in self.processes.values()))
            now = datetime.now(UTC)
            decision = reconcile(self.job, observation, now, self.traits)
            self._keep_failures(observation, now)
            self.job = self.job.with_status(decision.status)
            # An operator reconciles when something changes; this loop also wakes on a timer, and an event
            # the engine repeats while a state lasts (a replica's exit code) counts only when it changed.
            changed, self._observed = observation != self._observed, observation
            await self._carry_out(decision.actions, count_repeats=changed)
            self._diagnosed(decision.findings, decision.actions)
            self._record(finished=False)
            self.display.status(self._snapshot())
            if self.job.status.is_true(ConditionType.SUSPENDED) and not self._said_suspended:
                self._said_suspended = True
                self.display.note(
                    "the job is suspended (runPolicy.suspend): no replica starts; Ctrl-C to stop"
                )
            if self.job.status.is_finished:
                return (
                    Outcome.SUCCEEDED if self.job.status.is_true(ConditionType.SUCCEEDED) else Outcome.FAILED
                )
            timeout = (
                POLL_INTERVAL
                if decision.requeue_after is None
                else min(decision.requeue_after, POLL_INTERVAL)
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), max(timeout, 0.01))

    async def _carry_out(self, actions: tuple[Action, ...], *, count_repeats: bool = True) -> None:
        deletions = [a for a in actions if isinstance(a, DeleteReplica)]
        await asyncio.gather(*(self._delete(a.replica_type, a.index, a.reason) for a in deletions))
        for action in actions:
            if isinstance(action, CreateReplica):
                await self._create(action.replica_type, action.index)
            elif isinstance(action, EmitEvent):
                self._event(action, count_repeat=count_repeats)
            # Services, PodGroups and TTL deletion have no local counterpart.

    async def _create(self, replica_type: str, index: int) -> None:
        key = (replica_type, index)
        if key in self.processes or key not in self.plans:
            return
        prefix = short_name(*key)
        log = ReplicaLog(prefix, self.directory.log_path(prefix), self.display.line)
        process = self.substrate.replica(key, log, self._changed.set, self.endpoint.access(prefix))
        await process.start()
        self.processes[key] = process

    async def _delete(self, replica_type: str, index: int, reason: str) -> None:
        key = (replica_type, index)
        process = self.processes.pop(key, None)
        if process is not None:
            self._deleting.add(process)
            try:
                await process.delete(self._grace_period(key))
            finally:
                self._deleting.discard(process)
            restarts, codes = self._replaced.get(key, (0, []))
            recreated = 1 if reason in RESTARTED_REASONS else 0
            self._replaced[key] = (
                restarts + process.state.restarts + recreated,
                codes + process.state.history,
            )

    def _keep_failures(self, observation: Observation, now: datetime) -> None:
        """The run's failure record (``engine.failures``), from the job as it was before this reconcile; the
        first failure is announced once."""
        record = record_failures(self.job, self.framework, observation.replicas, self.failures, now)
        if record is None or record == self.failures:
            return
        if self.failures is None:
            self._event(first_failure_event(self.job, record))
        self.failures = record

    def _event(self, event: EmitEvent, *, count_repeat: bool = True) -> None:
        """Kept as a cluster keeps Events: stamped with when it last happened, and a repeat of one already
        kept (the engine says some on every reconcile) folded into it with a count, unless
        ``count_repeat`` is False."""
        key = {"type": str(event.type), "reason": event.reason, "message": event.message}
        earlier = next((e for e in self.events if all(e.get(k) == v for k, v in key.items())), None)
        if earlier is not None and not count_repeat:
            return
        count = int(earlier.get("count", 1)) + 1 if earlier is not None else 1
        kept = [e for e in self.events if e is not earlier]
        self.events = [*kept, {**key, "count": count, "lastTimestamp": wire_time(time.time())}][-KEPT_EVENTS:]
        if event.type is EventType.WARNING:
            # Normal events repeat the condition changes the display already shows.
            self.display.note(f"{event.type} {event.reason}: {event.message}")

    def _diagnosed(self, findings: tuple[Finding, ...], actions: tuple[Action, ...]) -> None:
        """Each distinct finding becomes a Warning event once, when it first appears, not on every reconcile:
        the runner has no Event to fold repeats into, and a crash loop that pauses while its replica runs
        again is the same one. One that repeats an event of the same Decision (the Stalled condition's) is
        not said twice."""
        said = {(a.reason, a.message) for a in actions if isinstance(a, EmitEvent)}
        for finding in findings:
            key = (finding.reason, finding.message)
            if key not in self._announced and len(self._announced) < MAX_ANNOUNCED:
                self._announced.add(key)
                if key not in said:
                    self._event(EmitEvent(EventType.WARNING, finding.reason, finding.message))
        self.findings = findings

    def accept(self, target: StatusTarget, status: TrainerStatus, reporter: Reporter) -> None:
        """An accepted report (the ``ReportSink``): the job's latest, and a point of its history."""
        self.job = self.job.with_status(self.job.status.model_copy(update={"trainer_status": status}))
        self.history.add(status)
        self._changed.set()

    def _interrupt(self, signum: signal.Signals) -> None:
        self._interrupts += 1
        self.stopped_by = self.stopped_by or signum
        if self._interrupts == 1:
            self.display.note(
                f"stopping every replica (SIGTERM, then SIGKILL after {self.options.grace_period:g}s; "
                "interrupt again to kill now)"
            )
        else:
            for process in (*self.processes.values(), *self._deleting):
                process.kill_now()
        self._changed.set()

    async def _drain(self) -> None:
        """Give replicas still running when the job finished a moment to exit on their own.

        Workers usually finish right after the master that decided success; stopping them at
        once would record a SIGTERM (143) for a replica that was about to exit 0.
        """
        deadline = time.monotonic() + min(FINISH_DRAIN, self.options.grace_period)
        while not self._interrupts and not all(p.finished for p in self.processes.values()):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)

    async def _stop_all(self) -> None:
        await asyncio.gather(
            *(
                p.stop(0.0 if self._interrupts > 1 else self._grace_period(key))
                for key, p in self.processes.items()
            )
        )

    def _grace_period(self, key: ReplicaKey) -> float:
        """The replica's ``terminationGracePeriodSeconds``, as a kubelet gives a pod it stops (the time to
        write a checkpoint after SIGTERM); the run's ``--grace-period`` when its template sets none."""
        plan = self.plans.get(key)
        seconds = ((plan.template.get("spec") if plan is not None else None) or {}).get(
            "terminationGracePeriodSeconds"
        )
        if isinstance(seconds, int) and not isinstance(seconds, bool) and seconds >= 0:
            return float(seconds)
        return self.options.grace_period

    # --- reporting -----------------------------------------------------------------------------

    def _replica_records(self) -> list[ReplicaRecord]:
        records = []
        for key in self.plans:
            process = self.processes.get(key)
            replaced_restarts, replaced_codes = self._replaced.get(key, (0, []))
            state = process.state if process is not None else None
            if process is None or state is None:
                phase = "Deleted" if key in self._replaced else "Pending"
            else:
                phase = str(process.observe().phase)
            records.append(
                ReplicaRecord(
                    name=short_name(*key),
                    replica_type=key[0],
                    index=key[1],
                    pid=state.pid if state is not None and state.running else None,
                    phase=phase,
                    restarts=replaced_restarts + (state.restarts if state is not None else 0),
                    exit_code=state.exit_code if state is not None else None,
                    exit_codes=replaced_codes + (list(state.history) if state is not None else []),
                    log=str(self.directory.log_path(short_name(*key))),
                )
            )
        return records

    def _record(self, *, finished: bool, interrupted: bool = False) -> None:
        runner = orphans.this_process_started_at()
        self.directory.write(
            RunRecord(
                job=self.job.to_wire(),
                replicas=self._replica_records(),
                runner_pid=os.getpid(),
                runner_started_at=runner,
                finished=finished,
                interrupted=interrupted,
                events=self.events,
                runtime=self.substrate.runtime,
                findings=[
                    {"reason": f.reason, "message": f.message, "replicas": list(f.replicas)}
                    for f in self.findings
                ],
                progress_history=self.history.to_json(),
                failures=None if self.failures is None else self.failures.to_json(),
                grace_period=max((self._grace_period(key) for key in self.plans), default=0.0),
            )
        )

    def _snapshot(self) -> Snapshot:
        return Snapshot(
            job=self.job.name,
            kind=self.job.shown_kind,
            conditions=tuple(
                ConditionView(str(c.type), str(c.status), c.reason or "", c.message or "")
                for c in self.job.status.conditions
            ),
            replicas=tuple(self._replica_records()),
            started_at=self._started_at,
            progress=self._report_text(),
        )

    def _report_text(self) -> str:
        report = self.job.status.trainer_status
        if report is None:
            return ""
        metrics = tuple((m.name, m.value) for m in report.metrics or ())
        return report_text(report.progress_percentage, report.estimated_remaining_seconds, metrics)
