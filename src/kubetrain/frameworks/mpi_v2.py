"""MPIJob kubeflow.org/v2beta1 (mpi-operator): the launcher reaches workers over SSH (§1.4, §2.8, §5.3).

Pods are addressed by hostname under the job's headless service (``<host>.<job>.<ns>.svc``).
Only the launcher's outcome (or an evicted worker) decides the job; ``Restarting`` is never used.
Locally the ranks are children of the launcher's ``mpirun``: only the launcher is a process and
the hostfile is ``localhost``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from kubetrain.api.common import CleanPodPolicy, ConditionType, RestartPolicy
from kubetrain.api.defaults import (
    with_default_clean_pod_policy,
    with_default_replicas,
    with_default_restart_policy,
)
from kubetrain.api.errors import FieldError
from kubetrain.api.jobs import LauncherCreationPolicy, MPIImplementation, MPIJobV2
from kubetrain.api.validation import (
    containers_errors,
    derived_name_errors,
    invalid,
    job_name_errors,
    managed_by_errors,
    non_negative_errors,
    not_supported,
    replica_keys_errors,
    required,
)
from kubetrain.frameworks.addressing import Addressing, replica_name
from kubetrain.frameworks.base import (
    Announcement,
    ConditionProposal,
    EnvVar,
    EventStyle,
    PodDecoration,
    StatusContext,
)
from kubetrain.frameworks.labels import APP_LABEL, JOB_ROLE_LABEL, REPLICA_INDEX_LABEL, job_labels
from kubetrain.frameworks.mpi_common import (
    CONFIG_MOUNT_PATH,
    DISCOVER_HOSTS,
    HOSTFILE,
    LAUNCHER,
    LOCALHOST,
    WORKER,
    MPIFrameworkBase,
    config_mount,
    config_volume,
    evicted_workers_message,
    launcher_name,
    observed,
    slots_per_worker,
    worker_count,
)
from kubetrain.frameworks.standard import counts, env

V2_MANAGED_BY = ("kubeflow.org/mpi-operator", "kueue.x-k8s.io/multikueue")
DEFAULT_SSH_AUTH_MOUNT_PATH = "/root/.ssh"
VALID_RESTART_POLICIES = (RestartPolicy.NEVER.value, RestartPolicy.ON_FAILURE.value)
SSH_RETRIES = "-o ConnectionAttempts=10"
SSH_VOLUME = "ssh-auth"
SSH_AUTH_SECRET_TYPE = "kubernetes.io/ssh-auth"
SSH_KEY_FILES = (
    ("ssh-privatekey", "id_rsa"),
    ("ssh-publickey", "id_rsa.pub"),
    ("ssh-publickey", "authorized_keys"),
)


class MPIV2Framework(MPIFrameworkBase[MPIJobV2]):
    model: ClassVar[type[MPIJobV2]] = MPIJobV2
    scheme_name: ClassVar[str] = "mpijob-v2beta1"
    controller_name: ClassVar[str] = "mpi-operator"
    """The workers' default; the launcher defaults to ``OnFailure`` (its batch Job retries it)."""
    managed_by_self: ClassVar[str] = "kubeflow.org/mpi-operator"
    event_style: ClassVar[EventStyle] = EventStyle.MPI_OPERATOR
    event_source: ClassVar[str] = "mpi-job-controller"
    counts_end_with: ClassVar[str | None] = LAUNCHER
    mpi_operator_gang: ClassVar[bool] = True
    config_file_modes: ClassVar[Mapping[str, int]] = {HOSTFILE: 0o444, DISCOVER_HOSTS: 0o555}

    # --- defaulting ---------------------------------------------------------------------------

    def set_defaults(self, job: MPIJobV2) -> MPIJobV2:
        specs = dict(job.replica_specs)
        for replica_type, replicas, policy in (
            (LAUNCHER, 1, RestartPolicy.ON_FAILURE),
            (WORKER, 0, RestartPolicy.NEVER),
        ):
            if replica_type in specs:
                specs[replica_type] = with_default_restart_policy(
                    with_default_replicas(specs[replica_type], replicas), policy
                )
        spec = job.spec
        update: dict[str, Any] = {
            spec.REPLICA_SPECS_FIELD: specs,
            "run_policy": with_default_clean_pod_policy(job.run_policy, CleanPodPolicy.NONE),
        }
        defaults: dict[str, Any] = {
            "slots_per_worker": 1,
            "run_launcher_as_worker": False,
            "ssh_auth_mount_path": DEFAULT_SSH_AUTH_MOUNT_PATH,
            "mpi_implementation": MPIImplementation.OPEN_MPI,
            "launcher_creation_policy": LauncherCreationPolicy.AT_STARTUP,
        }
        update |= {name: value for name, value in defaults.items() if getattr(spec, name) is None}
        return job.model_copy(update={"spec": spec.model_copy(update=update)})

    # --- validation ---------------------------------------------------------------------------

    def validate(self, job: MPIJobV2) -> list[FieldError]:
        """mpi-operator's controller-side checks on the defaulted job, plus the job name itself."""
        spec, path = job.spec, "spec.mpiReplicaSpecs"
        errors = job_name_errors(job.name)
        errors += managed_by_errors(job.run_policy, V2_MANAGED_BY)
        if not job.replica_specs:
            errors.append(required(path, "must have replica specs"))
        errors += replica_keys_errors(path, job.replica_specs, self.replica_types)
        for replica_type, replica in job.replica_specs.items():
            role_path = f"{path}.{replica_type}"
            if replica.replicas is None:
                errors.append(required(f"{role_path}.replicas", "must define number of replicas"))
            policy = replica.restart_policy.value if replica.restart_policy else ""
            if policy not in VALID_RESTART_POLICIES:
                errors.append(not_supported(f"{role_path}.restartPolicy", policy, VALID_RESTART_POLICIES))
            errors += containers_errors(role_path, replica, None)
        launcher = job.replica_specs.get(LAUNCHER)
        if launcher is None:
            errors.append(required(f"{path}.{LAUNCHER}", "must have Launcher replica spec"))
        elif launcher.replicas is not None and launcher.replicas != 1:
            errors.append(invalid(f"{path}.{LAUNCHER}.replicas", launcher.replicas, "must be 1"))
        workers = job.replica_specs.get(WORKER)
        if workers is not None and workers.replicas is not None and workers.replicas <= 0:
            errors.append(
                invalid(f"{path}.{WORKER}.replicas", workers.replicas, "must be greater than or equal to 1")
            )
        if spec.slots_per_worker is None:
            errors.append(required("spec.slotsPerWorker", "must have number of slots per worker"))
        errors += non_negative_errors("spec.slotsPerWorker", spec.slots_per_worker)
        if not spec.ssh_auth_mount_path:
            errors.append(required("spec.sshAuthMountPath", "must have a mount path for SSH credentials"))
        if job.run_policy.clean_pod_policy is None:
            errors.append(required("spec.runPolicy.cleanPodPolicy", "must have clean Pod policy"))
        derived = [launcher_name(job), replica_name(job.name, WORKER, max(worker_count(job), 1) - 1)]
        return errors + derived_name_errors(job.name, derived)

    # --- roles, names, processes --------------------------------------------------------------

    def replica_labels(self, job: MPIJobV2, replica_type: str, index: int) -> dict[str, str]:
        """mpi-operator v0.6.0's set: ``job-role`` launcher/worker, no replica-type; a worker's index is
        its own (also when the launcher is a worker too: it is first in the hostfile, not in the labels),
        the launcher has none."""
        labels = job_labels(self.controller_name, job.name)
        if replica_type == LAUNCHER:
            labels[JOB_ROLE_LABEL] = "launcher"
        else:
            labels[JOB_ROLE_LABEL] = "worker"
            labels[REPLICA_INDEX_LABEL] = str(index)
        return labels

    # --- env ----------------------------------------------------------------------------------

    def replica_env(
        self, job: MPIJobV2, replica_type: str, index: int, addressing: Addressing
    ) -> list[EnvVar]:
        """``K_MPI_JOB_ROLE``; the launcher also gets its MPI implementation's hostfile settings."""
        if replica_type != LAUNCHER:
            return [env("K_MPI_JOB_ROLE", "worker")]
        slots = slots_per_worker(job.spec.slots_per_worker)
        hostfile = f"{CONFIG_MOUNT_PATH}/{HOSTFILE}"
        found = [env("K_MPI_JOB_ROLE", "launcher")]
        implementation = job.spec.mpi_implementation or MPIImplementation.OPEN_MPI
        if implementation == MPIImplementation.OPEN_MPI:
            found += [
                env("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
                env("OMPI_MCA_orte_default_hostfile", hostfile),
                env("OMPI_MCA_plm_rsh_args", SSH_RETRIES),
                env("OMPI_MCA_orte_set_default_slots", slots),
            ]
        elif implementation == MPIImplementation.INTEL:
            found += [
                env("I_MPI_HYDRA_HOST_FILE", hostfile),
                env("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", SSH_RETRIES),
                env("I_MPI_PERHOST", slots),
            ]
        else:
            found += [env("HYDRA_HOST_FILE", hostfile), env("HYDRA_LAUNCH_EXTRA_ARGS", SSH_RETRIES)]
        if not job.spec.run_launcher_as_worker and not addressing.colocated:
            # A launcher that is not also a worker stays off the GPUs; locally the ranks are its children.
            found += [env("NVIDIA_VISIBLE_DEVICES", ""), env("NVIDIA_DRIVER_CAPABILITIES", "")]
        return found

    # --- config files -------------------------------------------------------------------------

    def config_files(
        self, job: MPIJobV2, addressing: Addressing, running_hosts: Sequence[str]
    ) -> dict[str, str]:
        """``<job>-config``: hostfile (every desired host) and discover_hosts.sh (running ones)."""
        slots = slots_per_worker(job.spec.slots_per_worker)
        as_worker = bool(job.spec.run_launcher_as_worker)
        if addressing.colocated:
            total = slots * (worker_count(job) + (1 if as_worker else 0))
            hostfile = self._host_line(job, LOCALHOST, total) if total else ""
            return {HOSTFILE: hostfile, DISCOVER_HOSTS: f"#!/bin/sh\necho {LOCALHOST}\n"}
        launcher = [launcher_name(job)] if as_worker else []
        workers = [replica_name(job.name, WORKER, i) for i in range(worker_count(job))]
        hostfile = "".join(
            self._host_line(job, addressing.subdomain_fqdn(job, host), slots) for host in launcher + workers
        )
        discover = "#!/bin/sh\n" + "".join(
            f"echo {addressing.subdomain_fqdn(job, host)}\n" for host in launcher + sorted(running_hosts)
        )
        return {HOSTFILE: hostfile, DISCOVER_HOSTS: discover}

    def _host_line(self, job: MPIJobV2, host: str, slots: int) -> str:
        if (job.spec.mpi_implementation or MPIImplementation.OPEN_MPI) == MPIImplementation.OPEN_MPI:
            return f"{host} slots={slots}\n"
        return f"{host}:{slots}\n"

    # --- Kubernetes objects ---------------------------------------------------------------------

    def _ssh_volume(self, job: MPIJobV2) -> dict[str, Any]:
        secret: dict[str, Any] = {
            "secretName": ssh_secret_name(job),
            "items": [{"key": key, "path": path} for key, path in SSH_KEY_FILES],
        }
        if (job.spec.ssh_auth_mount_path or DEFAULT_SSH_AUTH_MOUNT_PATH) == DEFAULT_SSH_AUTH_MOUNT_PATH:
            # sshd refuses keys readable by others; Kubernetes' default 0644 is only safe elsewhere.
            secret["defaultMode"] = 0o600
        return {"name": SSH_VOLUME, "secret": secret}

    def pod_decoration(self, job: MPIJobV2, replica_type: str, index: int) -> PodDecoration:
        """SSH keys everywhere; the launcher gets ``/etc/mpi``; every pod a hostname under ``<job>``."""
        ssh_mount = {
            "name": SSH_VOLUME,
            "mountPath": job.spec.ssh_auth_mount_path or DEFAULT_SSH_AUTH_MOUNT_PATH,
        }
        if replica_type == LAUNCHER:
            return PodDecoration(
                volumes=(
                    self._ssh_volume(job),
                    config_volume(job, self.config_file_modes, (HOSTFILE, DISCOVER_HOSTS)),
                ),
                main_volume_mounts=(ssh_mount, config_mount()),
                hostname=launcher_name(job),
                subdomain=job.name,
            )
        return PodDecoration(
            volumes=(self._ssh_volume(job),),
            main_volume_mounts=(ssh_mount,),
            default_command=("/usr/sbin/sshd", "-De"),
            hostname=replica_name(job.name, WORKER, index),
            subdomain=job.name,
            dns_searches=(f"{job.name}.{job.namespace}.svc.cluster.local",),
        )

    def companion_objects(self, job: MPIJobV2) -> list[dict[str, Any]]:
        """The headless Service every pod's hostname resolves under, and the SSH key Secret."""
        labels = {APP_LABEL: job.name}
        return [
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": job.name, "labels": labels},
                "spec": {
                    "clusterIP": "None",
                    "selector": job_labels(self.controller_name, job.name),
                },
            },
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": ssh_secret_name(job), "labels": labels},
                "type": SSH_AUTH_SECRET_TYPE,
            },
        ]

    def runs_as_batch_job(self, job: MPIJobV2, replica_type: str) -> bool:
        """The launcher is a ``batch/v1`` Job: its retries and deadline are the Job controller's."""
        return replica_type == LAUNCHER

    def condition_message(self, job: MPIJobV2, type_: ConditionType, value: bool, default: str) -> str:
        """mpi-operator's wording (§4.12): the job as ``<ns>/<name>``, and terse Suspended messages."""
        full_name = f"{job.namespace}/{job.name}"
        messages = {
            (ConditionType.CREATED, True): f"MPIJob {full_name} is created.",
            (ConditionType.SUSPENDED, True): "MPIJob suspended",
            (ConditionType.SUSPENDED, False): "MPIJob resumed",
            (ConditionType.RUNNING, False): f"MPIJob {full_name} is suspended.",
        }
        return messages.get((type_, value), default)

    def awaited_replica_type(self, job: MPIJobV2, replica_type: str) -> str | None:
        waits = job.spec.launcher_creation_policy == LauncherCreationPolicy.WAIT_FOR_WORKERS_READY
        return WORKER if replica_type == LAUNCHER and waits else None

    def child_event(
        self, job: MPIJobV2, replica_type: str, kind: str, name: str, action: str
    ) -> tuple[str, str] | None:
        """The mpi-operator records no event for the pods, Service and Job it creates or deletes."""
        return None

    def replica_type_of(self, labels: Mapping[str, str]) -> str | None:
        """v2beta1 pods carry no replica-type label: the job role says it."""
        return {"launcher": LAUNCHER, "worker": WORKER}.get(labels.get(JOB_ROLE_LABEL, ""))

    def replica_index_of(self, job: MPIJobV2, labels: Mapping[str, str]) -> int | None:
        """The launcher is index 0; a worker's index is its label's."""
        role = self.replica_type_of(labels)
        if role == LAUNCHER:
            return 0
        index = super().replica_index_of(job, labels)
        if role is None or index is None:
            return None
        return index

    # --- status -------------------------------------------------------------------------------

    def status_rules(self, context: StatusContext) -> list[ConditionProposal]:
        """The launcher decides success and failure; evicted workers fail the job.

        Upstream watches the launcher's batch Job: it fails once the Job gives up. Here the
        launcher is a replica, so it fails the job when it failed under restart policy ``Never``
        (with ``OnFailure`` it is restarted, and ``backoffLimit`` bounds the restarts). Running
        needs the launcher and every worker running; locally workers are not processes, so the
        launcher alone.
        """
        job = context.job
        full_name = f"{job.namespace}/{job.name}"
        launcher = counts(context, LAUNCHER)
        if launcher.succeeded > 0:
            message = f"MPIJob {full_name} successfully completed."
            return [
                ConditionProposal(ConditionType.SUCCEEDED, "MPIJobSucceeded", message, Announcement("Normal"))
            ]
        found: list[ConditionProposal] = []
        failed = [p for p in observed(context.replicas, LAUNCHER) if p.phase == "Failed"]
        if LAUNCHER in context.retried_by_controller:
            # Its batch Job's failed count is history; only the Job giving up is final.
            final = bool(failed)
        else:
            final = launcher.failed > 0 and launcher.restart_policy == RestartPolicy.NEVER
        if final:
            reason = next((p.reason for p in failed if p.reason), None) or "MPIJobFailed"
            message = next((p.message for p in failed if p.message), None) or f"MPIJob {full_name} has failed"
            found.append(ConditionProposal(ConditionType.FAILED, reason, message, Announcement("Warning")))
        workers = observed(context.replicas, WORKER)
        evicted = evicted_workers_message(workers)
        if evicted is not None:
            found.append(
                ConditionProposal(ConditionType.FAILED, "MPIJobEvicted", evicted, Announcement("Warning"))
            )
        workers_running = context.colocated or (
            len(workers) == worker_count(job) and all(w.phase == "Running" for w in workers)
        )
        if not found and launcher.running > 0 and workers_running:
            message = f"MPIJob {full_name} is running."
            event = Announcement("Normal", message=f"MPIJob {full_name} is running")
            found.append(ConditionProposal(ConditionType.RUNNING, "MPIJobRunning", message, event))
        return found


def ssh_secret_name(job: MPIJobV2) -> str:
    return f"{job.name}-ssh"
