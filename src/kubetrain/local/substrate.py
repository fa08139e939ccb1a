"""What the local runner needs from whatever runs a replica: processes on this host, or containers.

``LocalRun`` (``runner.py``) owns the job logic — observe, ``engine.reconcile``, carry out the
decision, record the state — and asks a ``Substrate`` only for the things that differ between a
process and a container: how replicas address each other and the run's status endpoint, how one
replica is started, stopped and deleted, and what to set up before the first replica and tear down
after the last. The process substrate lives here; the container one in ``containers.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.types import ObservedReplica, ReplicaPlan, Traits
from kubetrain.frameworks.addressing import Addressing
from kubetrain.frameworks.base import Framework
from kubetrain.local.gpus import CUDA_VISIBLE_DEVICES, GpuRequest, assign_gpus, requested_gpus
from kubetrain.local.launch import launch_spec, main_container, short_name
from kubetrain.local.logs import ReplicaLog
from kubetrain.local.orphans import RUN_ID_ENV
from kubetrain.local.ports import allocate_addressing
from kubetrain.local.process import LaunchSpec, ProcessState, ReplicaProcess
from kubetrain.local.reaper import PROCESS_ENGINE, start_reaper, stop_reaper
from kubetrain.local.state import RunDirectory
from kubetrain.local.status_access import PROCESS_ACCESS, ReporterAccess, StatusAccess

ReplicaKey = tuple[str, int]


class Replica(Protocol):
    """One replica as the runner sees it: a pod's lifecycle and what it looks like to the engine."""

    state: ProcessState

    async def start(self) -> None: ...

    async def stop(self, grace_period: float) -> None:
        """Stop it (SIGTERM, ``grace_period``, SIGKILL); what it leaves behind may be kept."""
        ...

    async def delete(self, grace_period: float) -> None:
        """Stop it and remove everything it leaves behind (the engine deleted the pod)."""
        ...

    def kill_now(self) -> None: ...

    @property
    def finished(self) -> bool: ...

    def observe(self) -> ObservedReplica: ...


@dataclass(frozen=True)
class RunContext:
    """What a substrate gets once the job is planned."""

    job: TrainingJob
    framework: Framework[Any]
    plans: Mapping[ReplicaKey, ReplicaPlan]
    config_files: Mapping[str, str]
    directory: RunDirectory


class Substrate(Protocol):
    traits: Traits
    runtime: str
    """The ``--runtime`` it is, recorded in the run's state."""

    def addressing(self, job: TrainingJob, keys: Iterable[ReplicaKey]) -> Addressing:
        """How the replicas ``keys`` reach each other."""
        ...

    def prepare(self, context: RunContext) -> None:
        """Check and translate every replica before anything starts; raises what cannot run."""
        ...

    async def open(self) -> None:
        """Set up what replicas share (a network); called after the state directory is reset."""
        ...

    def status_access(self) -> StatusAccess:
        """Where the run's status endpoint listens and the name replicas reach it by (after ``open``)."""
        ...

    def replica(
        self, key: ReplicaKey, log: ReplicaLog, on_change: Callable[[], None], reporting: ReporterAccess
    ) -> Replica:
        """The replica ``key``, reporting its progress with ``reporting`` (the variables, the files)."""
        ...

    async def close(self, *, interrupted: bool) -> None:
        """After every replica has stopped: remove what the run set up (and, if interrupted, kept)."""
        ...

    def notes(self) -> list[str]:
        """What the user should know about how the manifest runs here (said once at the start)."""
        ...


@dataclass(frozen=True)
class ProcessOptions:
    cwd: Path
    base_env: Mapping[str, str] | None
    detect_gpus: Callable[[], list[str]]


class ProcessSubstrate:
    """Every replica's main container as a process group on this host, on loopback ports."""

    traits = Traits(colocated=True)
    runtime = "process"

    def __init__(self, options: ProcessOptions) -> None:
        self.options = options
        self.specs: dict[ReplicaKey, LaunchSpec] = {}
        self._images: list[str] = []
        self.run_id = uuid.uuid4().hex[:12]
        self._status_path: Path | None = None
        self._reaper: subprocess.Popen[bytes] | None = None

    def addressing(self, job: TrainingJob, keys: Iterable[ReplicaKey]) -> Addressing:
        return allocate_addressing(keys)

    def prepare(self, context: RunContext) -> None:
        self._status_path = context.directory.status_path
        base_env = dict(os.environ if self.options.base_env is None else self.options.base_env)
        devices = self._assign_gpus(context)
        mounts = _config_mounts(context)
        for key, plan in context.plans.items():
            extra = dict(context.framework.local_root_env) if os.geteuid() == 0 else {}
            if short_name(*key) in devices:
                extra[CUDA_VISIBLE_DEVICES] = ",".join(devices[short_name(*key)])
            spec = launch_spec(plan, context.job, cwd=self.options.cwd, base_env=base_env, extra_env=extra)
            self.specs[key] = _remount(spec, mounts)
        self._images = sorted(
            {str(main_container(p)[1].get("image")) for p in context.plans.values()} - {"None"}
        )

    def _assign_gpus(self, context: RunContext) -> dict[str, list[str]]:
        requests = gpu_requests(context)
        if not any(r.count for r in requests):
            return {}
        return assign_gpus(requests, self.options.detect_gpus())

    async def open(self) -> None:
        assert self._status_path is not None
        self._reaper = start_reaper(PROCESS_ENGINE, self.run_id, self._status_path)

    def status_access(self) -> StatusAccess:
        return PROCESS_ACCESS

    def replica(
        self, key: ReplicaKey, log: ReplicaLog, on_change: Callable[[], None], reporting: ReporterAccess
    ) -> Replica:
        # After the container's env, as the operator appends what it injects.
        spec = self.specs[key]
        env = {**spec.env, **reporting.host_env(), RUN_ID_ENV: self.run_id}
        return ReplicaProcess(replace(spec, env=env), log, on_change)

    async def close(self, *, interrupted: bool) -> None:
        if self._reaper is not None:
            stop_reaper(self._reaper)

    def notes(self) -> list[str]:
        if not self._images:
            return []
        return [
            f"image {', '.join(self._images)} is ignored locally: each replica runs its command on this "
            f"machine, with {sys.executable} first on PATH, in {self.options.cwd} "
            "(--runtime podman or docker runs it in its image)"
        ]


def gpu_requests(context: RunContext) -> list[GpuRequest]:
    """Each replica's ``nvidia.com/gpu`` limit, with the field that asks for it."""
    requests = []
    for key, plan in context.plans.items():
        position, container = main_container(plan)
        container_path = f"{context.job.replica_specs_path}.{key[0]}.template.spec.containers[{position}]"
        requests.append(
            GpuRequest(short_name(*key), f"{container_path}.resources.limits", requested_gpus(container))
        )
    return requests


def _config_mounts(context: RunContext) -> dict[str, str]:
    """Where the framework's mounted files (MPI hostfile) live locally: mount path → directory."""
    mount = context.framework.config_mount_path
    if not context.config_files or mount is None:
        return {}
    return {mount: str(context.directory.config_dir)}


def _remount(spec: LaunchSpec, mounts: Mapping[str, str]) -> LaunchSpec:
    """Paths under a pod mount (``/etc/mpi/hostfile``) pointed at the run's local copy."""
    if not mounts:
        return spec

    def local(value: str) -> str:
        for mount, directory in mounts.items():
            root = mount.rstrip("/")
            if value == root or value.startswith(root + "/"):
                return directory + value[len(root) :]
        return value

    return replace(
        spec,
        argv=tuple(local(a) for a in spec.argv),
        env={name: local(value) for name, value in spec.env.items()},
    )
