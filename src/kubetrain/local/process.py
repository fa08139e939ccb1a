"""One replica as a process group, supervised the way a kubelet supervises a pod's container.

The replica's main container becomes one process started in its own session, so the whole tree
it spawns (``mpirun`` ranks, torchrun workers) is one process group: stopping sends SIGTERM to the
group, waits a grace period, then SIGKILLs it. When the main process exits, whatever it left
behind in its group is killed too, as a container's processes die with it.

Like a kubelet, the supervisor restarts the process in place when the pod's restart policy says so
(``Always``; ``OnFailure`` on a non-zero exit) and counts the restarts. Everything else — whether
an exit fails the job, whether to recreate the replica — is the engine's decision.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from kubetrain.engine.diagnosis import CRASH_LOOP_BACK_OFF, OOM_REASON
from kubetrain.engine.types import ObservedContainer, ObservedReplica, Phase
from kubetrain.local.logs import LINE_LIMIT, ReplicaLog

CANNOT_START_EXIT_CODE = 127
"""Reported when the program cannot be executed (not found, not executable), as a shell does."""
EXIT_PUMP_TIMEOUT = 2.0
"""How long to wait for a pipe to drain after the group was killed (a daemonised escapee may hold it)."""


class InPlaceRestart(StrEnum):
    """The pod-level ``restartPolicy`` a kubelet applies (replica ``ExitCode`` arrives as ``Never``)."""

    ALWAYS = "Always"
    ON_FAILURE = "OnFailure"
    NEVER = "Never"

    def restarts_after(self, exit_code: int) -> bool:
        return self is InPlaceRestart.ALWAYS or (self is InPlaceRestart.ON_FAILURE and exit_code != 0)


def exit_code_of(returncode: int) -> int:
    """Kubernetes reports death by signal N as exit code 128+N; Python reports it as -N."""
    return 128 - returncode if returncode < 0 else returncode


def restart_delay(restarts: int) -> float:
    """A short, growing pause between in-place restarts (a kubelet's CrashLoopBackOff, scaled to a laptop)."""
    return 0.0 if restarts <= 1 else min(0.5 * 2 ** (restarts - 2), 10.0)


@dataclass(frozen=True)
class LaunchSpec:
    """Everything needed to start one replica's main container as a process."""

    replica_type: str
    index: int
    prefix: str
    """``<type>-<index>``: the console prefix and log file name."""
    argv: tuple[str, ...]
    env: dict[str, str]
    cwd: Path
    restart: InPlaceRestart
    container: str = ""
    """The pod template's main container: what a finding about this replica names."""
    image: str = ""
    """Its image (containers only; a process ignores it)."""
    memory_limit: str | None = None
    """Its ``resources.limits.memory`` as written, where the runtime enforces it (containers)."""


@dataclass
class ProcessState:
    pid: int | None = None
    running: bool = False
    exit_code: int | None = None
    restarts: int = 0
    started_at: float | None = None
    finished_at: float | None = None
    ended_at: float | None = None
    """When the last finished attempt ended (kept while the next one runs: which replica failed first)."""
    history: list[int] = field(default_factory=list)
    """Exit codes of earlier attempts, oldest first."""
    last_lines: str | None = None
    """The end of what the last finished attempt wrote (its log's tail)."""
    oom_killed: bool = False
    """The last finished attempt was killed for running out of memory (containers under a memory limit)."""
    backing_off: bool = False
    """Waiting out the pause before an in-place restart (a kubelet's CrashLoopBackOff)."""


class ReplicaProcess:
    """Start, restart in place, observe and stop one replica."""

    def __init__(self, spec: LaunchSpec, log: ReplicaLog, on_change: Callable[[], None]) -> None:
        self.spec = spec
        self.log = log
        self.state = ProcessState()
        self._on_change = on_change
        self._process: asyncio.subprocess.Process | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._exited = asyncio.Event()
        self._stopping = False
        self._start_failed = False
        self._stop_requested = asyncio.Event()
        self._log_start = 0
        """Where the current attempt's output begins in the log file."""

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the process; a program that cannot be executed is a replica that failed at once."""
        self.log.open()
        try:
            await self._before_spawn()
            await self._spawn()
        except OSError as error:
            self._fail_to_start(error)
            return
        self._supervisor = asyncio.create_task(self._supervise(), name=f"supervise {self.spec.prefix}")

    def _fail_to_start(self, error: OSError) -> None:
        message = f"kubetrain: cannot start {self.spec.argv[0]!r}: {error.strerror or error}"
        self.log.write(message)
        self.log.close()
        self.state.last_lines = message
        self.state.running = False
        self.state.exit_code = CANNOT_START_EXIT_CODE
        self.state.ended_at = time.time()
        self.state.history.append(CANNOT_START_EXIT_CODE)
        self._start_failed = True
        self._on_change()

    async def _spawn(self) -> None:
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.subprocess_exec(
            lambda: _ExitAwareProtocol(limit=LINE_LIMIT, loop=loop),
            *self.spec.argv,
            cwd=self.spec.cwd,
            env=self.spec.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        process = asyncio.subprocess.Process(transport, protocol, loop)
        self._log_start = self.log.size()
        self._process = process
        self._exited = protocol.exited
        self.state.pid = process.pid
        self.state.running = True
        self.state.exit_code = None
        self.state.started_at = time.time()
        self.state.finished_at = None
        self._on_change()

    async def _supervise(self) -> None:
        while True:
            process = self._process
            assert process is not None and process.stdout is not None
            pump = asyncio.create_task(self.log.pump(process.stdout))
            await self._exited.wait()
            returncode = process.returncode
            assert returncode is not None
            # The container is gone: nothing it started may outlive it.
            kill_group(process.pid, signal.SIGKILL)
            await _settle(pump)
            code = exit_code_of(returncode)
            self.state.oom_killed = await self._killed_for_memory(code)
            self.state.last_lines = self.log.tail(self._log_start)
            self.state.running = False
            self.state.exit_code = code
            self.state.finished_at = self.state.ended_at = time.time()
            self.state.history.append(code)
            if self._stopping or not self.spec.restart.restarts_after(code):
                self.log.close()
                self._on_change()
                return
            self.state.restarts += 1
            self.state.backing_off = True
            self._on_change()
            # Wait out the back-off, but a stop request ends the wait at once.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop_requested.wait(), restart_delay(self.state.restarts))
            self.state.backing_off = False
            if self._stopping:
                self.log.close()
                self._on_change()
                return
            try:
                await self._before_spawn()
                await self._spawn()
            except OSError as error:
                self._fail_to_start(error)
                return

    async def stop(self, grace_period: float) -> None:
        """SIGTERM the process group, wait ``grace_period`` seconds, then SIGKILL it; reap."""
        self._stopping = True
        self._stop_requested.set()
        process = self._process
        if process is not None and process.returncode is None:
            await self._terminate(process, grace_period)
        if self._supervisor is not None:
            await self._supervisor

    async def delete(self, grace_period: float) -> None:
        """A process leaves nothing behind once stopped."""
        await self.stop(grace_period)

    async def _terminate(self, process: asyncio.subprocess.Process, grace_period: float) -> None:
        kill_group(process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(self._exited.wait(), grace_period)
        except TimeoutError:
            kill_group(process.pid, signal.SIGKILL)

    async def _before_spawn(self) -> None:
        """Called before every start and in-place restart (a container must not exist twice)."""
        return None

    async def _killed_for_memory(self, exit_code: int) -> bool:
        """Whether the attempt that just ended with ``exit_code`` was killed for running out of memory. A
        process's cannot be told from any other SIGKILL; a container's runtime can tell."""
        return False

    def kill_now(self) -> None:
        """SIGKILL the group at once (a second Ctrl-C)."""
        self._stopping = True
        self._stop_requested.set()
        if self._process is not None and self._process.returncode is None:
            kill_group(self._process.pid, signal.SIGKILL)

    @property
    def finished(self) -> bool:
        return self._start_failed or (self._supervisor is not None and self._supervisor.done())

    # --- observation -------------------------------------------------------------------------

    def observe(self) -> ObservedReplica:
        """The replica as a pod would look: Running while alive or waiting to restart in place."""
        state = self.state
        if state.running or not self.finished:
            phase = Phase.RUNNING
        else:
            phase = Phase.SUCCEEDED if state.exit_code == 0 else Phase.FAILED
        return ObservedReplica(
            replica_type=self.spec.replica_type,
            index=self.spec.index,
            phase=phase,
            exit_code=None if phase is Phase.RUNNING else state.exit_code,
            restart_count=state.restarts,
            terminating=self._stopping and not self.finished,
            ready=state.running,
            containers=(self.observe_container(),),
        )

    def observe_container(self) -> ObservedContainer:
        """The main container as a kubelet reports it: since when it runs, its back-off, its last end."""
        state = self.state
        last_code = state.history[-1] if state.history else None
        if state.oom_killed:
            last_reason: str | None = OOM_REASON
        elif last_code is not None:
            last_reason = "Completed" if last_code == 0 else "Error"
        else:
            last_reason = None
        running_since = state.started_at if state.running else None
        ended_at = state.ended_at if state.history else None
        return ObservedContainer(
            name=self.spec.container or self.spec.prefix,
            image=self.spec.image,
            running_since=None if running_since is None else datetime.fromtimestamp(running_since, UTC),
            waiting_reason=CRASH_LOOP_BACK_OFF if state.backing_off else None,
            last_exit_code=last_code,
            last_reason=last_reason,
            last_lines=state.last_lines,
            memory_limit=self.spec.memory_limit,
            restart_count=state.restarts,
            last_finished_at=None if ended_at is None else datetime.fromtimestamp(ended_at, UTC),
        )


def kill_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _settle(pump: asyncio.Task[None]) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(pump, EXIT_PUMP_TIMEOUT)


class _ExitAwareProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """Reports the process's exit at once.

    ``Process.wait()`` also waits for the output pipes to close, which never happens while a
    descendant that escaped the process group still holds them; the runner must not wait for it.
    """

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited = asyncio.Event()

    def process_exited(self) -> None:
        super().process_exited()
        self.exited.set()
