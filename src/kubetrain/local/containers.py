"""The container substrate: every replica runs in its image under podman or docker, on a job network.

kubetrain drives the engine through its command line, not podman-py or docker-py: podman needs no
API service or socket that way (docker-py would need one, podman-py its REST service), the two CLIs
take the same arguments for everything used here, so one code path serves both, and a replica's
``podman run`` is an ordinary child process whose output is the container's output, supervised by
the same ``ReplicaProcess`` as a local process (restart in place, exit codes, logs).

Nothing outlives a run:

- every container and the network carry the labels ``kubetrain.io/run-id`` (this run) and
  ``kubetrain.io/local-job`` (the job);
- the run removes containers as the engine deletes their pods, and when it is interrupted (Ctrl-C,
  SIGTERM) it removes every container and the network of the run;
- a detached reaper (``python -m kubetrain.local.reaper``) waits for the runner's pid to die; if the
  runner died without finishing (SIGKILL, a crash) it stops the engine's client processes (SIGTERM,
  which they pass to their containers), then removes every container and the network of the run.
  The runner stops it when it ends by itself;
- ``kubetrain run`` first removes whatever an earlier run of the same job left (containers kept by
  ``cleanPodPolicy: None``, or left by a reaper that could not run).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import math
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.types import ObservedReplica, Phase, ReplicaPlan, Traits
from kubetrain.frameworks.addressing import Addressing, ClusterAddressing
from kubetrain.frameworks.base import decorate_pod_spec
from kubetrain.frameworks.ssh_keys import SSH_AUTH_TYPE, new_key_pair
from kubetrain.local.container_run import (
    HOST_NAMES,
    JOB_LABEL,
    RUN_ID_LABEL,
    RUNNER_PID_LABEL,
    ContainerRun,
    Engine,
    PullPolicy,
    container_run,
    network_name,
    replica_argv,
    with_reporting,
)
from kubetrain.local.gpus import assign_gpus
from kubetrain.local.launch import main_container
from kubetrain.local.logs import ReplicaLog
from kubetrain.local.orphans import RUN_ID_ENV
from kubetrain.local.process import InPlaceRestart, LaunchSpec, ReplicaProcess, kill_group
from kubetrain.local.reaper import start_reaper, stop_reaper
from kubetrain.local.runtime import Runtime
from kubetrain.local.status_access import ReporterAccess, StatusAccess
from kubetrain.local.substrate import (
    ProcessOptions,
    ProcessSubstrate,
    Replica,
    ReplicaKey,
    RunContext,
    Substrate,
    gpu_requests,
)

CLI_TIMEOUT = 120.0
"""Seconds any one engine command may take (a pull is the slow one)."""
IMAGE_RETRY_FIRST = 5.0
IMAGE_RETRY_MAX = 60.0
"""Seconds between tries of an image that could not be had: doubling from the first to the most."""
SIGKILL_EXIT_CODE = 128 + signal.SIGKILL
ENGINE_DIR = "engine"
"""Under the run's directory: the working directory of its engine commands."""
KERNEL_LOG = Path("/dev/kmsg")
EXIT_AFTER_STOP = 5.0
"""How long the attached ``run`` may take to return once its container has stopped."""


ENGINE_NOISE = frozenset({"failed to connect to syslog: Initialization"})
"""What the engine, not the container, writes into an attached run's output: podman's aardvark-dns (the
job network's DNS server, started by the first container on a network and inheriting that ``podman run``'s
stderr) says this once where the host has no syslog socket (/dev/log), and nothing is lost by it."""


class ContainerEngineError(RuntimeError):
    """The engine is missing or broken, or an image cannot be had: nothing was started."""


@dataclass(frozen=True)
class ContainerEngine:
    """The engine's CLI: the few commands kubetrain needs, with the same arguments for both engines."""

    kind: Engine
    binary: str

    @classmethod
    def find(cls, kind: Engine) -> ContainerEngine:
        binary = shutil.which(kind.value)
        if binary is None:
            raise ContainerEngineError(
                f"{kind} is not installed (no {kind} on PATH); install it or use --runtime process"
            )
        return cls(kind, binary)

    def _run(self, *args: str, timeout: float = CLI_TIMEOUT) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.binary, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )

    def check(self) -> None:
        """The engine answers (``podman info``; for docker, its daemon is reachable)."""
        try:
            result = self._run("info", "--format", "{{json .}}", timeout=60)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise ContainerEngineError(f"{self.kind} info failed: {error}") from None
        if result.returncode != 0:
            raise ContainerEngineError(
                f"{self.kind} does not work here ({self.kind} info: {_last_line(result)})"
            )

    def has_image(self, image: str) -> bool:
        return self._run("image", "inspect", "--format", "{{.Id}}", image).returncode == 0

    def killed_for_memory(self, container: str) -> bool:
        """Whether the container's last run was killed for running out of memory: the engine says so
        (``.State.OOMKilled``), or the kernel's log records an OOM kill in the container's memory cgroup
        (conmon on a cgroup v1 host never tells podman: seen on this project's machine)."""
        result = self._run("inspect", "--format", "{{.State.OOMKilled}} {{.Id}}", container, timeout=60)
        if result.returncode != 0:
            return False
        reported, _, container_id = result.stdout.strip().partition(" ")
        return reported == "true" or (bool(container_id) and kernel_logged_oom_kill(container_id))

    def pull(self, image: str) -> str | None:
        """Pull ``image``; the engine's error, or None when it worked."""
        try:
            result = self._run("pull", image)
        except subprocess.TimeoutExpired:
            return f"no answer within {CLI_TIMEOUT:g}s"
        return None if result.returncode == 0 else _last_line(result)

    def labelled(self, label: str, value: str) -> list[str]:
        """Ids of every container, running or not, carrying ``label=value``."""
        result = self._run("ps", "--all", "--quiet", "--filter", f"label={label}={value}")
        return result.stdout.split() if result.returncode == 0 else []

    def remove(self, *containers: str) -> None:
        if containers:
            self._run("rm", "--force", *containers)

    def create_network(self, name: str, labels: dict[str, str]) -> None:
        flags = [f for key, value in sorted(labels.items()) for f in ("--label", f"{key}={value}")]
        result = self._run("network", "create", *flags, name)
        if result.returncode != 0:
            raise ContainerEngineError(f"{self.kind} network create {name} failed: {_last_line(result)}")

    def remove_network(self, name: str) -> None:
        self._run("network", "rm", name)

    def network_gateway(self, name: str) -> str | None:
        """The host's address on network ``name`` (its first subnet's gateway), None when it has none."""
        result = self._run("network", "inspect", name)
        try:
            inspected = json.loads(result.stdout) if result.returncode == 0 else []
        except ValueError:
            return None
        return network_gateway(inspected[0]) if isinstance(inspected, list) and inspected else None

    def remove_run(self, label: str, value: str, network: str) -> None:
        """Every container labelled ``label=value``, then the network."""
        self.remove(*self.labelled(label, value))
        self.remove_network(network)

    async def stop(self, container: str, grace_period: float) -> None:
        """``stop --time``: SIGTERM, ``grace_period`` seconds, then SIGKILL, inside the container."""
        await self._async("stop", "--time", str(math.ceil(grace_period)), container)

    async def remove_async(self, container: str) -> None:
        await self._async("rm", "--force", container)

    def kill_detached(self, container: str) -> None:
        """SIGKILL the container without waiting for the engine (a second Ctrl-C)."""
        with contextlib.suppress(OSError):
            subprocess.Popen(
                [self.binary, "kill", container],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

    async def _async(self, *args: str) -> int:
        process = await asyncio.create_subprocess_exec(
            self.binary,
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            return await asyncio.wait_for(process.wait(), CLI_TIMEOUT)
        except TimeoutError:
            process.kill()
            return await process.wait()


def network_gateway(inspected: object) -> str | None:
    """The first gateway of a network's ``network inspect``: podman's ``subnets``, docker's ``IPAM``."""
    if not isinstance(inspected, dict):
        return None
    subnets = inspected.get("subnets") or (inspected.get("IPAM") or {}).get("Config") or []
    for subnet in subnets if isinstance(subnets, list) else []:
        gateway = subnet.get("gateway") or subnet.get("Gateway") if isinstance(subnet, dict) else None
        if isinstance(gateway, str) and gateway:
            return gateway
    return None


def _last_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in (result.stderr or result.stdout).splitlines() if line.strip()]
    return lines[-1].strip() if lines else f"exit {result.returncode}"


class ContainerReplica(ReplicaProcess):
    """A replica's ``podman run``, supervised like a process; stopping and deleting act on the container."""

    def __init__(
        self,
        spec: LaunchSpec,
        container: str,
        engine: ContainerEngine,
        log: ReplicaLog,
        on_change: Callable[[], None],
        init_containers: tuple[str, ...] = (),
        missing_image: MissingImage | None = None,
    ) -> None:
        super().__init__(spec, log, on_change)
        self.container = container
        self.engine = engine
        self.init_containers = init_containers
        self.missing_image = missing_image
        """An image of the replica that is not there: it waits, Pending, and tries again now and then."""
        self._image_wait: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self.missing_image is None:
            await super().start()
            return
        self._image_wait = asyncio.create_task(self._wait_for_image(), name=f"image of {self.spec.prefix}")
        self._on_change()

    async def _wait_for_image(self) -> None:
        """As a kubelet backs off pulling: try again after a growing pause until the image is there (loaded by
        hand, or its registry answers), then start."""
        missing = self.missing_image
        assert missing is not None
        delay = IMAGE_RETRY_FIRST
        while True:
            await asyncio.sleep(delay)
            delay = min(delay * 2, IMAGE_RETRY_MAX)
            try:
                problem = await asyncio.to_thread(image_problem, self.engine, missing.image, missing.pull)
            except (OSError, subprocess.SubprocessError) as error:  # the engine did not answer: try again
                problem = replace(missing, message=f"{missing.message} (and then: {error})")
            if problem is None:
                break
            if problem != missing:
                missing = self.missing_image = problem
                self._on_change()
        self.missing_image = None
        await super().start()

    async def stop(self, grace_period: float) -> None:
        await self._cancel_image_wait()
        await super().stop(grace_period)

    async def _cancel_image_wait(self) -> None:
        if self._image_wait is not None and not self._image_wait.done():
            self._image_wait.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._image_wait
            self._stopping = True
            self._on_change()

    @property
    def finished(self) -> bool:
        if self._image_wait is not None and self.missing_image is not None:
            return self._image_wait.done()  # stopped while waiting for its image
        return super().finished

    def observe(self) -> ObservedReplica:
        missing = self.missing_image
        if missing is None or self.finished:
            return super().observe()
        waiting = replace(
            self.observe_container(),
            image=missing.image,
            waiting_reason=missing.reason,
            waiting_message=missing.message,
        )
        return ObservedReplica(
            self.spec.replica_type,
            self.spec.index,
            Phase.PENDING,
            containers=(waiting,),
            created_at=self.created_at,
        )

    async def _killed_for_memory(self, exit_code: int) -> bool:
        if exit_code != SIGKILL_EXIT_CODE:
            return False  # the kernel's OOM killer sends SIGKILL
        return await asyncio.to_thread(self.engine.killed_for_memory, self.container)

    async def _before_spawn(self) -> None:
        # An in-place restart is a new container of the same name, as the kubelet makes one (and an init
        # container killed with its run client may still hold its name).
        for name in (*self.init_containers, self.container):
            await self.engine.remove_async(name)

    async def _terminate(self, process: asyncio.subprocess.Process, grace_period: float) -> None:
        # Whichever runs now: an init container, or the main one.
        await asyncio.gather(
            *(self.engine.stop(name, grace_period) for name in (*self.init_containers, self.container))
        )
        try:
            await asyncio.wait_for(self._exited.wait(), EXIT_AFTER_STOP)
        except TimeoutError:
            kill_group(process.pid, signal.SIGKILL)

    async def delete(self, grace_period: float) -> None:
        await self.stop(grace_period)
        for name in (*self.init_containers, self.container):
            await self.engine.remove_async(name)

    def kill_now(self) -> None:
        if self._image_wait is not None:
            self._image_wait.cancel()
        super().kill_now()
        for name in (*self.init_containers, self.container):
            self.engine.kill_detached(name)


class ContainerSubstrate:
    """Replicas as containers of their images on a per-job network, addressed by their cluster names."""

    traits = Traits(colocated=False)

    def __init__(
        self,
        engine: ContainerEngine,
        *,
        cwd: Path,
        detect_gpus: Callable[[], list[str]],
        run_id: str | None = None,
        reaper: bool = True,
    ) -> None:
        self.engine = engine
        self.runtime = engine.kind.value
        self.cwd = cwd
        self.detect_gpus = detect_gpus
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.use_reaper = reaper
        self.runs: dict[ReplicaKey, ContainerRun] = {}
        self.job_name = ""
        self.network = ""
        self._reaper: subprocess.Popen[bytes] | None = None
        self._status_path: Path | None = None
        self._init_containers = False
        self.missing_images: dict[str, MissingImage] = {}
        self.main_containers: dict[ReplicaKey, dict[str, Any]] = {}
        """Each replica's main container in its pod template (its name and memory limit, for diagnosis)."""
        self._gateway = ""
        self._engine_dir = cwd
        """Where the engine's commands run: conmon (podman's monitor) writes a file named ``oom`` into its
        working directory when the kernel OOM-kills a container on a cgroup v1 host, which must not litter
        the user's."""

    def addressing(self, job: TrainingJob, keys: Iterable[ReplicaKey]) -> Addressing:
        # Each container has its own network namespace and the cluster's DNS names: ports as declared.
        return ClusterAddressing()

    def labels(self) -> dict[str, str]:
        return {RUN_ID_LABEL: self.run_id, JOB_LABEL: self.job_name, RUNNER_PID_LABEL: str(os.getpid())}

    def prepare(self, context: RunContext) -> None:
        self.job_name = context.job.name
        self.network = network_name(context.job.name)
        self._status_path = context.directory.status_path
        runs = plan_containers(context, labels=self.labels(), gpus=self._assign_gpus(context))
        self.runs = {key: with_absolute_sources(run, self.cwd) for key, run in runs.items()}
        self._engine_dir = self.cwd / context.directory.root / ENGINE_DIR
        self._init_containers = any(
            (p.template.get("spec") or {}).get("initContainers") for p in context.plans.values()
        )
        self.engine.check()
        self.missing_images = missing_images(
            self.engine, [c for run in self.runs.values() for c in (*run.init, run)]
        )
        self.main_containers = {key: main_container(plan)[1] for key, plan in context.plans.items()}

    def _assign_gpus(self, context: RunContext) -> dict[str, list[str]]:
        requests = gpu_requests(context)
        if not any(r.count for r in requests):
            return {}
        return assign_gpus(requests, self.detect_gpus())

    async def open(self) -> None:
        await asyncio.to_thread(self._open)

    def _open(self) -> None:
        self._engine_dir.mkdir(parents=True, exist_ok=True)
        # What an earlier run of this job kept (cleanPodPolicy None) or a dead run left behind.
        self.engine.remove(*self.engine.labelled(JOB_LABEL, self.job_name))
        self.engine.remove_network(self.network)
        if self.use_reaper:
            assert self._status_path is not None
            self._reaper = start_reaper(self.engine.binary, self.run_id, self._status_path, self.network)
        self.engine.create_network(self.network, self.labels())
        gateway = self.engine.network_gateway(self.network)
        if gateway is None:
            raise ContainerEngineError(
                f"{self.engine.kind} network {self.network} has no gateway: the run's status endpoint would "
                "have no address its containers reach"
            )
        self._gateway = gateway
        containers = [c for run in self.runs.values() for c in (*run.init, run)]
        for directory in {d for c in containers for d in c.emptydirs}:
            shutil.rmtree(directory, ignore_errors=True)
            Path(directory).mkdir(parents=True)
        write_volume_files(containers)

    def status_access(self) -> StatusAccess:
        # The host's address on the job network: what the engine's host name is pointed at.
        host = HOST_NAMES[self.engine.kind]
        return StatusAccess(bind_host=self._gateway, url_host=host, names=(host, self._gateway))

    def replica(
        self, key: ReplicaKey, log: ReplicaLog, on_change: Callable[[], None], reporting: ReporterAccess
    ) -> Replica:
        run = with_reporting(self.runs[key], reporting, (HOST_NAMES[self.engine.kind], self._gateway))
        main = self.main_containers.get(key, {})
        spec = LaunchSpec(
            replica_type=key[0],
            index=key[1],
            prefix=run.replica,
            argv=tuple(replica_argv(self.engine.kind, self.engine.binary, run)),
            # The engine's client: the run's reaper stops it (and so its container) if the runner dies.
            env={**os.environ, RUN_ID_ENV: self.run_id},
            cwd=self._engine_dir,
            restart=_in_place_restart(run.restart_policy),
            container=str(main.get("name") or ""),
            image=run.image,
            memory_limit=_memory_limit(main),
        )
        log.noise = ENGINE_NOISE
        missing = next(
            (self.missing_images[c.image] for c in (*run.init, run) if c.image in self.missing_images), None
        )
        return ContainerReplica(
            spec, run.name, self.engine, log, on_change, tuple(i.name for i in run.init), missing
        )

    async def close(self, *, interrupted: bool) -> None:
        await asyncio.to_thread(self._close, interrupted)

    def _close(self, interrupted: bool) -> None:
        if interrupted:
            self.engine.remove_run(RUN_ID_LABEL, self.run_id, self.network)
        elif not self.engine.labelled(RUN_ID_LABEL, self.run_id):
            # Containers kept by cleanPodPolicy keep their network until the next run of the job.
            self.engine.remove_network(self.network)
        if self._reaper is not None:
            stop_reaper(self._reaper)

    def notes(self) -> list[str]:
        notes = [
            f"every replica runs in its image with {self.engine.kind}, on network {self.network} "
            f"(run {self.run_id}), reachable by its Kubernetes names"
        ]
        if self._init_containers:
            notes.append("init containers run to completion, in order, before each replica's main container")
        return notes


def plan_containers(
    context: RunContext,
    *,
    labels: dict[str, str],
    gpus: dict[str, list[str]],
) -> dict[ReplicaKey, ContainerRun]:
    """Every replica's container, in plan order; raises ``InvalidJobError`` for what cannot run."""
    mount = context.framework.config_mount_path
    config_mount = (mount, context.directory.config_dir) if context.config_files and mount else None
    secrets = generated_secrets(context)
    runs = {}
    for key, plan in context.plans.items():
        run = container_run(
            decorated(plan, context),
            context.job,
            labels=labels,
            volumes_dir=context.directory.root / "volumes",
            config_mount=config_mount,
            secrets=secrets,
            gpus=gpus.get(f"{key[0].lower()}-{key[1]}", ()),
        )
        runs[key] = run
    return runs


def with_absolute_sources(run: ContainerRun, cwd: Path) -> ContainerRun:
    """``run`` with every bind mount's host path absolute (a relative one is relative to ``cwd``), so that it
    does not depend on the directory the engine is run in."""
    mounts = tuple(replace(m, source=str(cwd / m.source)) for m in run.mounts)
    return replace(run, mounts=mounts, init=tuple(with_absolute_sources(i, cwd) for i in run.init))


def decorated(plan: ReplicaPlan, context: RunContext) -> ReplicaPlan:
    """``plan`` with the framework's pod decoration, as the operator renders the pod (MPI: SSH keys,
    hostfile, the workers' sshd command)."""
    template = copy.deepcopy(plan.template)
    spec = template.setdefault("spec", {})
    decorate_pod_spec(spec, context.framework.pod_decoration(context.job, plan.replica_type, plan.index))
    return replace(plan, template=template)


def generated_secrets(context: RunContext) -> dict[str, dict[str, bytes]]:
    """The data of the Secrets the operator would generate for the job (MPI v2beta1's SSH key pair)."""
    return {
        str(obj["metadata"]["name"]): new_key_pair()
        for obj in context.framework.companion_objects(context.job)
        if obj.get("kind") == "Secret" and obj.get("type") == SSH_AUTH_TYPE
    }


def write_volume_files(runs: Iterable[ContainerRun]) -> None:
    """Every replica's Secret volume files, in fresh directories, with the volume's modes."""
    files = [f for run in runs for f in run.files]
    for directory in {Path(f.path).parent for f in files}:
        shutil.rmtree(directory, ignore_errors=True)
    for file in files:
        path = Path(file.path)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Created with its mode, so the private key is never readable by others, even for a moment.
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, file.mode)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(file.content)
        path.chmod(file.mode)  # the umask may have narrowed what os.open set


@dataclass(frozen=True)
class MissingImage:
    """An image a replica cannot have yet, as a kubelet's waiting container says it."""

    image: str
    pull: PullPolicy
    reason: str
    """``ErrImageNeverPull`` or ``ErrImagePull``."""
    message: str


def missing_images(engine: ContainerEngine, runs: Iterable[ContainerRun]) -> dict[str, MissingImage]:
    """Every image present, or pulled once as its policy allows, before any replica starts; those that cannot
    be had. Their replicas wait (Pending) and try again, as pods do; the run's diagnosis says why."""
    policies: dict[str, PullPolicy] = {}
    for run in runs:
        policies.setdefault(run.image, run.pull)
    missing = {}
    for image, pull in policies.items():
        problem = image_problem(engine, image, pull)
        if problem is not None:
            missing[image] = problem
    return missing


def image_problem(engine: ContainerEngine, image: str, pull: PullPolicy) -> MissingImage | None:
    """Why ``image`` cannot be had now under ``pull`` (None: it is there), in the kubelet's words."""
    if pull is not PullPolicy.ALWAYS and engine.has_image(image):
        return None
    if pull is PullPolicy.NEVER:
        message = f'Container image "{image}" is not present with pull policy of Never'
        return MissingImage(image, pull, "ErrImageNeverPull", message)
    error = engine.pull(image)
    if error is None:
        return None
    return MissingImage(image, pull, "ErrImagePull", f'failed to pull image "{image}": {error}')


def _memory_limit(container: dict[str, Any]) -> str | None:
    limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
    return None if limit is None else str(limit)


def _in_place_restart(pod_policy: str) -> InPlaceRestart:
    try:
        return InPlaceRestart(pod_policy)
    except ValueError:
        return InPlaceRestart.NEVER


def kernel_logged_oom_kill(container_id: str, kernel_log: Path = KERNEL_LOG) -> bool:
    """Whether the kernel's log (``/dev/kmsg``, readable by root) records an OOM kill in a memory cgroup named
    after ``container_id`` (``oom-kill:...,oom_memcg=/libpod_parent/libpod-<id>,...``); False where it cannot
    be read."""
    try:
        descriptor = os.open(kernel_log, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        while True:
            try:
                record = os.read(descriptor, 8192)
            except BlockingIOError:
                return False  # read to its end
            except BrokenPipeError:
                continue  # a record was overwritten while reading: go on with the next one
            except OSError:
                return False
            if not record:
                return False
            # One record per read: "<priority>,<sequence>,<time>,<flags>;<message>" (then " KEY=value" lines).
            for line in record.decode("utf-8", errors="replace").splitlines():
                message = line.partition(";")[2]
                if message.startswith("oom-kill:") and container_id in message:
                    return True
    finally:
        os.close(descriptor)


def make_substrate(runtime: Runtime, options: ProcessOptions) -> Substrate:
    """The substrate ``--runtime`` names; ``ContainerEngineError`` when its engine is not installed."""
    if runtime is Runtime.PROCESS:
        return ProcessSubstrate(options)
    engine = ContainerEngine.find(Engine(runtime.value))
    return ContainerSubstrate(engine, cwd=options.cwd, detect_gpus=options.detect_gpus)


def remove_job_containers(runtime: str, job_name: str) -> None:
    """Remove the containers and network of a run of ``job_name`` (deleting a job deletes its pods)."""
    if runtime == Runtime.PROCESS.value:
        return
    binary = shutil.which(runtime)
    if binary is not None:
        ContainerEngine(Engine(runtime), binary).remove_run(JOB_LABEL, job_name, network_name(job_name))
