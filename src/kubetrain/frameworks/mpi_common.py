"""What both MPIJob designs share: replica names, slots, GPU launchers, the local hostfile."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from kubetrain.api.common import ReplicaSpec, RestartPolicy
from kubetrain.api.defaults import template_containers
from kubetrain.api.jobs import TrainingJob
from kubetrain.frameworks.addressing import replica_name
from kubetrain.frameworks.base import EnvTarget, Framework, ReplicaPhase

LAUNCHER = "Launcher"
WORKER = "Worker"
CONFIG_MOUNT_PATH = "/etc/mpi"
HOSTFILE = "hostfile"
DISCOVER_HOSTS = "discover_hosts.sh"
LOCALHOST = "localhost"
EVICTED = "Evicted"
OPEN_MPI_ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
"""What MPI images set so ``mpirun`` may run as root (containers usually do)."""


def launcher_name(job: TrainingJob) -> str:
    """The launcher pod (v1) or launcher hostname (v2beta1): ``<job>-launcher``, no index."""
    return f"{job.name}-launcher"


def worker_count(job: TrainingJob) -> int:
    spec = job.replica_specs.get(WORKER)
    return (spec.replicas or 0) if spec is not None else 0


def slots_per_worker(slots: int | None) -> int:
    """Unset means 1 slot per host (upstream's effective default)."""
    return 1 if slots is None else slots


def requests_gpus(spec: ReplicaSpec | None) -> bool:
    """Upstream's "GPU launcher": any container limit named ``*.com/gpu`` or containing ``gpu``."""
    if spec is None:
        return False
    for container in template_containers(spec.template):
        limits = (container.get("resources") or {}).get("limits") or {}
        if any(str(key).endswith(".com/gpu") or "gpu" in str(key) for key in limits):
            return True
    return False


def container_env_names(spec: ReplicaSpec | None, index: int = 0) -> set[str]:
    """Names the user already set on container ``index`` (some injected env yields to them)."""
    containers = template_containers(spec.template) if spec is not None else []
    if len(containers) <= index:
        return set()
    return {str(e.get("name")) for e in containers[index].get("env") or [] if isinstance(e, dict)}


def observed(replicas: Sequence[ReplicaPhase], replica_type: str) -> list[ReplicaPhase]:
    return [r for r in replicas if r.replica_type == replica_type]


def evicted_workers_message(workers: Sequence[ReplicaPhase]) -> str | None:
    """``<n>/<total> workers are evicted`` when any worker pod was evicted."""
    evicted = sum(1 for w in workers if w.reason == EVICTED)
    return f"{evicted}/{len(workers)} workers are evicted" if evicted else None


CONFIG_VOLUME = "mpi-job-config"


def config_map_name(job: TrainingJob) -> str:
    return f"{job.name}-config"


def config_volume(job: TrainingJob, modes: Mapping[str, int], files: Sequence[str]) -> dict[str, Any]:
    """The ``mpi-job-config`` volume projecting ``files`` of ``<job>-config`` with their modes."""
    items = [{"key": name, "path": name, "mode": modes[name]} for name in files]
    return {"name": CONFIG_VOLUME, "configMap": {"name": config_map_name(job), "items": items}}


def config_mount() -> dict[str, Any]:
    return {"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT_PATH}


MPIJobT = TypeVar("MPIJobT", bound=TrainingJob)


class MPIFrameworkBase(Framework[MPIJobT]):
    """What both MPIJob designs share: a launcher that runs ``mpirun`` against its workers.

    The launcher is ``<job>-launcher`` and the master; workers are created first (the launcher
    waits for them); locally only the launcher is a process, since ``mpirun`` forks the ranks.
    """

    framework_label: ClassVar[str] = "mpi"
    replica_types: ClassVar[tuple[str, ...]] = (LAUNCHER, WORKER)
    default_container: ClassVar[str] = "mpi"
    default_port_name: ClassVar[str | None] = None
    default_port: ClassVar[int | None] = None
    default_restart_policy: ClassVar[RestartPolicy] = RestartPolicy.NEVER
    env_target: ClassVar[EnvTarget] = EnvTarget.FIRST_CONTAINER
    per_replica_services: ClassVar[bool] = False
    exit_code_events: ClassVar[bool] = False
    config_mount_path: ClassVar[str | None] = CONFIG_MOUNT_PATH
    local_root_env: ClassVar[Mapping[str, str]] = OPEN_MPI_ROOT_ENV

    def is_master_role(self, job: MPIJobT, replica_type: str, index: int) -> bool:
        return replica_type == LAUNCHER

    def pod_name(self, job: MPIJobT, replica_type: str, index: int) -> str:
        return launcher_name(job) if replica_type == LAUNCHER else replica_name(job.name, replica_type, index)

    def materialised_replica_types(self, job: MPIJobT, colocated: bool) -> tuple[str, ...]:
        if colocated:
            return (LAUNCHER,) if LAUNCHER in job.replica_specs else ()
        return tuple(t for t in (WORKER, LAUNCHER) if t in job.replica_specs)
