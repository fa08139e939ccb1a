"""What ``kubetrain run`` would start for a job, without starting it.

``kubetrain plan --target local`` prints one entry per process: its command after ``$(VAR)``
expansion, its working directory, the container env it receives (injected env included, on
loopback, with the run's status endpoint's variables last) and its restart policy. The process also
inherits kubetrain's own environment, which is not shown. Ports are the free ones found now; a real
run finds its own, and its status endpoint's (``<port>``) when it starts.

With ``--runtime podman`` or ``docker`` it prints one entry per container instead: its image,
network, DNS aliases and the exact ``run`` command line (a real run fills in its run id and pid, and
the job network's gateway where the endpoint listens).

A Kubeflow Trainer TrainJob is planned as ``kubetrain run`` runs it (``local.trainjob.prepare``): its
runtime's JobSet for this machine's addresses, each node a process (or a container) of the JobSet's run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubetrain.api.jobs import TrainingJob
from kubetrain.api.trainer import TrainingRuntime, TrainJob
from kubetrain.engine.admission import admit
from kubetrain.engine.planning import desired_replicas, plan_replica
from kubetrain.engine.types import Traits
from kubetrain.frameworks.addressing import ClusterAddressing, LocalAddressing
from kubetrain.frameworks.registry import framework_for
from kubetrain.local.container_run import (
    HOST_NAMES,
    JOB_LABEL,
    RUN_ID_LABEL,
    RUNNER_PID_LABEL,
    ContainerPlan,
    Engine,
    replica_argv,
    with_reporting,
)
from kubetrain.local.containers import plan_containers
from kubetrain.local.launch import container_env, launch_spec, main_container, short_name
from kubetrain.local.ports import ReplicaKey, allocate_addressing
from kubetrain.local.runtime import Runtime
from kubetrain.local.state import RunDirectory, default_state_dir
from kubetrain.local.status_access import (
    LOOPBACK,
    PORT_PLACEHOLDER,
    ReporterAccess,
    status_target,
    status_url,
)
from kubetrain.local.substrate import RunContext
from kubetrain.local.trainjob import prepare

TRAITS = Traits(colocated=True)
CONTAINER_TRAITS = Traits(colocated=False)
GATEWAY_PLACEHOLDER = "<gateway>"
"""What ``kubetrain plan`` shows for the job network's gateway (known once the run creates the network)."""


def local_plan(
    job: TrainingJob,
    working_dir: Path,
    ports: Mapping[ReplicaKey, int] | None = None,
    state_dir: Path | None = None,
) -> list[dict[str, Any]]:
    """One description per local process, in start order; raises ``InvalidJobError`` if it can't run."""
    job = admit(job)
    framework = framework_for(job)
    progress_dir = RunDirectory(state_dir or default_state_dir(), job.name).progress_dir
    url = status_url(LOOPBACK, PORT_PLACEHOLDER, status_target(job))
    keys = desired_replicas(job, TRAITS, framework)
    addressing = LocalAddressing(dict(ports)) if ports is not None else allocate_addressing(keys)
    processes: list[dict[str, Any]] = []
    for replica_type, index in keys:
        plan = plan_replica(job, replica_type, index, addressing)
        spec = launch_spec(plan, job, cwd=working_dir, base_env={}, extra_env={})
        position, container = main_container(plan)
        path = f"{job.replica_specs_path}.{replica_type}.template.spec.containers[{position}]"
        processes.append(
            {
                "replica": spec.prefix,
                "name": plan.name,
                "command": list(spec.argv),
                "workingDir": str(working_dir),
                "env": {
                    **container_env(plan, job, container, path),
                    **ReporterAccess(url, progress_dir / spec.prefix).host_env(),
                },
                "restartPolicy": str(plan.restart_policy),
            }
        )
    files = framework.config_files(job, addressing, [])
    if files and framework.config_mount_path:
        processes.append({"configFiles": {"mountPath": framework.config_mount_path, "files": files}})
    return processes


def container_plan(job: TrainingJob, engine: Engine, state_dir: Path | None = None) -> list[dict[str, Any]]:
    """One description per container, in start order; raises ``InvalidJobError`` if it can't run."""
    job = admit(job)
    framework = framework_for(job)
    addressing = ClusterAddressing()
    plans = {
        key: plan_replica(job, *key, addressing) for key in desired_replicas(job, CONTAINER_TRAITS, framework)
    }
    files = framework.config_files(job, addressing, [])
    directory = RunDirectory(state_dir or default_state_dir(), job.name)
    labels = {RUN_ID_LABEL: "<run-id>", JOB_LABEL: job.name, RUNNER_PID_LABEL: "<pid>"}
    runs = plan_containers(RunContext(job, framework, plans, files, directory), labels=labels, gpus={})
    host = HOST_NAMES[engine]
    url = status_url(host, PORT_PLACEHOLDER, status_target(job))
    reporting = {
        key: with_reporting(
            run, ReporterAccess(url, directory.progress_dir / short_name(*key)), (host, GATEWAY_PLACEHOLDER)
        )
        for key, run in runs.items()
    }
    return [
        ContainerPlan(run, replica_argv(engine, engine.value, run)).to_dict() for run in reporting.values()
    ]


def plan_for(job: TrainingJob, runtime: Runtime, working_dir: Path) -> list[dict[str, Any]]:
    if runtime is Runtime.PROCESS:
        return local_plan(job, working_dir)
    return container_plan(job, Engine(runtime.value))


def trainjob_plan_for(
    trainjob: TrainJob, training_runtime: TrainingRuntime, runtime: Runtime, working_dir: Path
) -> list[dict[str, Any]]:
    """What ``kubetrain run`` starts for a TrainJob on ``training_runtime``: one entry per node's process (or
    container), planned with the addresses the run would give them."""
    if runtime is Runtime.PROCESS:
        planned = prepare(trainjob, training_runtime, lambda job, keys: allocate_addressing(keys), TRAITS)
        assert isinstance(planned.addressing, LocalAddressing)
        return local_plan(planned.run, working_dir, ports=planned.addressing.ports)
    planned = prepare(trainjob, training_runtime, lambda job, keys: ClusterAddressing(), CONTAINER_TRAITS)
    return container_plan(planned.run, Engine(runtime.value))
