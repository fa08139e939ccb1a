"""MPIJob (``kubeflow.org/v2beta1``, and the training operator's ``kubeflow.org/v1``) → TrainJob on the mpi
policy, with a TrainingRuntime of the job's own (Trainer ships no plain MPI runtime since v2.1).

mpi-operator's design carries over almost whole: Trainer's MPI policy makes the same ECDSA SSH key Secret
and a hostfile with ``slots=<slotsPerWorker>`` per node, mounts them as mpi-operator did, and sets the same
Open MPI env on the launcher. The Worker becomes the replicated job ``node`` (its command kept, ``sshd -De``
when it had none, as mpi-operator defaulted it), the Launcher the replicated job ``launcher``, whose program
(image, command, args, env) the TrainJob carries; the TrainJob succeeds when the launcher does
(``successPolicy``), and the launcher waits for the nodes when ``launcherCreationPolicy`` said so.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubetrain.api.common import CleanPodPolicy, RestartPolicy
from kubetrain.api.errors import FieldError
from kubetrain.api.jobs import LauncherCreationPolicy, MPIImplementation, MPIJob, MPIJobV2
from kubetrain.api.trainer import TRAINING_RUNTIME, TrainingRuntime, TrainJob
from kubetrain.frameworks.migration.common import (
    Obj,
    main_container_index,
    node_container,
    pod_template,
    retries,
    run_policy,
    runtime_metadata,
    trainjob_metadata,
    with_env,
    without_reserved,
)
from kubetrain.frameworks.migration.result import Migration, Note, NotMigratableError
from kubetrain.frameworks.registry import framework_for
from kubetrain.frameworks.trainer.constants import (
    ANCESTOR_LABEL,
    ANCESTOR_TRAINER,
    LAUNCHER,
    MPI_RESERVED_ENV,
    NODE,
)
from kubetrain.frameworks.trainer.info import gpus_per_node

SSHD = ["/usr/sbin/sshd", "-De"]
DEFAULT_SSH_AUTH_MOUNT_PATH = "/root/.ssh"
"""mpi-operator's and Trainer's default alike."""
"""mpi-operator's Worker command when the template gives none."""
ROLE_ENV = "K_MPI_JOB_ROLE"
NO_GPU_ENV = ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")
"""Blanked on a launcher that runs no rank, so it takes no GPU from the device plugin's view."""
FRAMEWORK_LABEL = "mpi"


@dataclass(frozen=True)
class _Shape:
    """What the two MPIJob generations say differently, read once."""

    v2: bool
    slots: int
    launcher_as_node: bool
    implementation: MPIImplementation
    ssh_auth_mount_path: str | None
    main_container: str | None
    wait_for_workers: bool
    clean_pod_policy: CleanPodPolicy | None
    """v1's deprecated top-level copy of ``runPolicy.cleanPodPolicy``."""


def _shape(job: MPIJob | MPIJobV2) -> _Shape:
    if isinstance(job, MPIJobV2):
        spec = job.spec
        return _Shape(
            v2=True,
            slots=spec.slots_per_worker or 1,
            launcher_as_node=bool(spec.run_launcher_as_worker),
            implementation=spec.mpi_implementation or MPIImplementation.OPEN_MPI,
            ssh_auth_mount_path=spec.ssh_auth_mount_path,
            main_container=None,
            wait_for_workers=spec.launcher_creation_policy is LauncherCreationPolicy.WAIT_FOR_WORKERS_READY,
            clean_pod_policy=None,
        )
    v1 = job.spec
    return _Shape(
        v2=False,
        slots=v1.slots_per_worker or 1,
        launcher_as_node=False,
        implementation=MPIImplementation.OPEN_MPI,
        ssh_auth_mount_path=None,
        main_container=v1.main_container,
        wait_for_workers=False,
        clean_pod_policy=v1.clean_pod_policy,
    )


def migrate_mpi(job: MPIJob | MPIJobV2) -> Migration:
    framework = framework_for(job)
    defaulted = framework.set_defaults(job)
    specs, path = defaulted.replica_specs, job.replica_specs_path
    shape = _shape(defaulted)
    v2 = shape.v2
    workers = (specs["Worker"].replicas or 0) if "Worker" in specs else 0
    if workers < 1:
        raise NotMigratableError(
            [
                FieldError(
                    f"{path}.Worker.replicas",
                    "Trainer's MPI policy needs at least one node besides the launcher",
                )
            ]
        )
    if shape.implementation is not MPIImplementation.OPEN_MPI:
        raise NotMigratableError(
            [
                FieldError(
                    "spec.mpiImplementation",
                    f"{shape.implementation.value}: Trainer v2.3 writes hostfiles and env for OpenMPI only",
                )
            ]
        )
    as_node, slots = shape.launcher_as_node, shape.slots
    notes: list[Note] = []

    launcher_spec = specs["Launcher"]
    launcher_template = pod_template(launcher_spec.template)
    launcher_pod: Obj = launcher_template.get("spec") or {}
    launcher_containers: list[Obj] = launcher_pod.get("containers") or []
    launcher_path = f"{path}.Launcher.template.spec.containers[0]"
    program = launcher_containers[0]
    env, dropped = without_reserved(
        list(program.get("env") or []), MPI_RESERVED_ENV, launcher_path, "Trainer's MPI policy"
    )
    notes += dropped
    launcher_node = node_container(program)
    injected: list[Obj] = [{"name": ROLE_ENV, "value": LAUNCHER}] if v2 else []
    gpu_launcher = gpus_per_node(program.get("resources") or {}) > 0
    if not (as_node if v2 else gpu_launcher):
        injected += [{"name": name, "value": ""} for name in NO_GPU_ENV]
    if injected:
        launcher_node["env"] = injected
    launcher_containers[0] = launcher_node

    worker_spec = specs["Worker"]
    worker_template = pod_template(worker_spec.template)
    worker_pod: Obj = worker_template.get("spec") or {}
    worker_containers: list[Obj] = worker_pod.get("containers") or []
    main = main_container_index(worker_template, shape.main_container)
    worker_path = f"{path}.Worker.template.spec.containers[{main}]"
    worker = {"name": NODE, **{k: v for k, v in worker_containers[main].items() if k != "name"}}
    if not worker.get("command") and not worker.get("args"):
        worker["command"] = list(SSHD)
        if not v2:
            notes.append(
                Note(
                    f"{worker_path}.command",
                    "unset: v1 kept Workers alive with sleep for kubectl exec; Trainer's launcher reaches "
                    "them over SSH, so they run sshd -De (the image needs sshd)",
                )
            )
    if v2:
        worker["env"] = with_env(list(worker.get("env") or []), {"name": ROLE_ENV, "value": "worker"})
    worker_containers[main] = worker

    if not v2:
        notes.append(
            Note(
                "apiVersion",
                "v1's launcher reached the Workers with kubectl exec; Trainer's reaches them over SSH with "
                "the job's key (mounted at /root/.ssh): the images need ssh and sshd, as mpi-operator's "
                "have",
            )
        )
        if shape.main_container is not None:
            notes.append(
                Note("spec.mainContainer", "is dropped: mpirun reaches each node's sshd, not a container")
            )
    notes.append(
        Note(
            path,
            f"the hostfile names the nodes {job.name}-node-0-<i>.{job.name} (they were "
            f"{job.name}-worker-<i>), and /etc/mpi/discover_hosts.sh is gone: Trainer writes only the "
            "hostfile",
        )
    )

    written_policy = job.run_policy
    if written_policy.clean_pod_policy is None and shape.clean_pod_policy is not None:
        written_policy = written_policy.model_copy(update={"clean_pod_policy": shape.clean_pod_policy})
    policy = run_policy(written_policy)
    notes += policy.notes

    launcher_policy = launcher_spec.restart_policy or framework.default_restart_policy
    if v2:
        # mpi-operator runs the launcher as a batch Job with the run policy's backoffLimit (Kubernetes'
        # default when unset) and its pods' restart policy (ExitCode as Never): the replicated job is that
        # Job.
        restart = (
            "Never" if launcher_policy in (RestartPolicy.NEVER, RestartPolicy.EXIT_CODE) else "OnFailure"
        )
        launcher_job: Obj = {}
        if job.run_policy.backoff_limit is not None:
            launcher_job["backoffLimit"] = job.run_policy.backoff_limit
        worker_retries = retries(
            worker_spec.restart_policy or RestartPolicy.NEVER, None, f"{path}.Worker.restartPolicy"
        )
    else:
        launcher_retries = retries(
            launcher_policy, job.run_policy.backoff_limit, f"{path}.Launcher.restartPolicy"
        )
        restart, launcher_job = launcher_retries.pod_restart_policy, launcher_retries.job_fields
        notes += launcher_retries.notes
        worker_retries = retries(
            worker_spec.restart_policy or RestartPolicy.NEVER,
            job.run_policy.backoff_limit,
            f"{path}.Worker.restartPolicy",
        )
    notes += worker_retries.notes

    node_job = {
        "name": NODE,
        "template": {
            "spec": {
                **worker_retries.job_fields,
                "template": {
                    **worker_template,
                    "spec": {**worker_pod, "restartPolicy": worker_retries.pod_restart_policy},
                },
            }
        },
    }
    launcher_job_spec: Obj = {
        **launcher_job,
        "template": {**launcher_template, "spec": {**launcher_pod, "restartPolicy": restart}},
    }
    launcher_replicated: Obj = {
        "name": LAUNCHER,
        "template": {"metadata": {"labels": {ANCESTOR_LABEL: ANCESTOR_TRAINER}}, "spec": launcher_job_spec},
    }
    if shape.wait_for_workers:
        launcher_replicated["dependsOn"] = [{"name": NODE, "status": "Ready"}]
    mpi: Obj = {"numProcPerNode": slots, "mpiImplementation": MPIImplementation.OPEN_MPI.value}
    if shape.ssh_auth_mount_path not in (None, DEFAULT_SSH_AUTH_MOUNT_PATH):
        mpi["sshAuthMountPath"] = shape.ssh_auth_mount_path
    if as_node:
        mpi["runLauncherAsNode"] = True
    nodes = workers + (1 if as_node else 0)
    jobset: Obj = {
        "network": {"publishNotReadyAddresses": True},
        "successPolicy": {"operator": "All", "targetReplicatedJobs": [LAUNCHER]},
        "replicatedJobs": [node_job, launcher_replicated],
        **policy.jobset_spec,
    }
    template: Obj = {"spec": jobset}
    if policy.template_annotations:
        template["metadata"] = {"annotations": policy.template_annotations}
    # Trainer counts the launcher's pods by mlPolicy.numNodes (it is the trainer job) and the nodes by the
    # TrainJob's numNodes, as its own MPI runtimes do: one launcher.
    runtime_spec: Obj = {"mlPolicy": {"numNodes": 1, "mpi": mpi}, "template": template}
    if policy.pod_group_policy is not None:
        runtime_spec["podGroupPolicy"] = policy.pod_group_policy.to_wire()
    runtime = TrainingRuntime.model_validate(
        {"metadata": runtime_metadata(job, FRAMEWORK_LABEL), "spec": runtime_spec}
    )

    trainer: Obj = {
        "image": program.get("image"),
        "command": program.get("command"),
        "args": program.get("args"),
        "env": env or None,
        "numNodes": nodes,
    }
    spec: Obj = {
        "runtimeRef": {"name": job.name, "kind": TRAINING_RUNTIME},
        **policy.trainjob_spec,
        "trainer": {k: v for k, v in trainer.items() if v is not None},
    }
    trainjob = TrainJob.model_validate({"metadata": trainjob_metadata(job), "spec": spec})
    return Migration(trainjob, runtime, tuple(notes))
