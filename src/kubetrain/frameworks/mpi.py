"""MPIJob kubeflow.org/v1: the launcher reaches workers through ``kubectl exec`` (§1.3, §2.7, §4.4, §5.2).

No services: the hostfile names worker pods, and ``kubexec.sh`` runs ``kubectl exec`` into them.
Locally every rank is a child of the launcher's ``mpirun``, so only the launcher is a process and
its hostfile is ``localhost``.
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
from kubetrain.api.jobs import MPIJob
from kubetrain.api.validation import (
    container_names_errors,
    containers_errors,
    derived_name_errors,
    forbidden,
    job_name_errors,
    managed_by_errors,
    non_negative_errors,
    replica_keys_errors,
    required,
)
from kubetrain.frameworks.addressing import Addressing, replica_name
from kubetrain.frameworks.base import (
    Announcement,
    ConditionProposal,
    EnvVar,
    InitSettings,
    PodDecoration,
    StatusContext,
    StatusEvent,
)
from kubetrain.frameworks.labels import APP_LABEL, REPLICA_INDEX_LABEL
from kubetrain.frameworks.mpi_common import (
    CONFIG_MOUNT_PATH,
    DISCOVER_HOSTS,
    EVICTED,
    HOSTFILE,
    LAUNCHER,
    LOCALHOST,
    WORKER,
    MPIFrameworkBase,
    config_mount,
    config_volume,
    container_env_names,
    evicted_workers_message,
    launcher_name,
    observed,
    requests_gpus,
    slots_per_worker,
    worker_count,
)
from kubetrain.frameworks.standard import V1_MANAGED_BY, counts, env, proposal, restart_only_on_exit_code

KUBEXEC = "kubexec.sh"
KUBECTL_MOUNT_PATH = "/opt/kube"
KUBECTL_VOLUME = "mpi-job-kubectl"
FAILED_REASON = "MPIJobMPIJobFailed"
"""Upstream's generic failure path prefixes the kind to an already prefixed reason; kept verbatim."""


class MPIFramework(MPIFrameworkBase[MPIJob]):
    model: ClassVar[type[MPIJob]] = MPIJob
    scheme_name: ClassVar[str] = "mpijob"
    controller_name: ClassVar[str] = "mpijob-controller"
    companions_while_suspended: ClassVar[bool] = False
    counts_end_with: ClassVar[str | None] = LAUNCHER
    replaces_failed_replicas: ClassVar[frozenset[RestartPolicy]] = frozenset({RestartPolicy.EXIT_CODE})
    """Upstream leaves a failed pod as it is and fails the job (its generic rules) unless the policy is
    ``ExitCode``. Under ``ExitCode`` it marks the job Restarting and still leaves the pod, so the job stays
    Restarting for good; kubetrain does what ``ExitCode`` says (docs/migration.md's allow-list)."""
    config_file_modes: ClassVar[Mapping[str, int]] = {KUBEXEC: 0o555, HOSTFILE: 0o444, DISCOVER_HOSTS: 0o555}

    # --- defaulting ---------------------------------------------------------------------------

    def set_defaults(self, job: MPIJob) -> MPIJob:
        """Launcher 1 replica, Worker 0; both ``Never``; no port; cleanPodPolicy merged (runPolicy wins)."""
        specs = dict(job.replica_specs)
        for replica_type, replicas in ((LAUNCHER, 1), (WORKER, 0)):
            if replica_type in specs:
                spec = with_default_replicas(specs[replica_type], replicas)
                specs[replica_type] = with_default_restart_policy(spec, self.default_restart_policy)
        run_policy = job.run_policy
        if run_policy.clean_pod_policy is None and job.spec.clean_pod_policy is not None:
            run_policy = run_policy.model_copy(update={"clean_pod_policy": job.spec.clean_pod_policy})
        run_policy = with_default_clean_pod_policy(run_policy, CleanPodPolicy.NONE)
        spec_update: dict[str, Any] = {job.spec.REPLICA_SPECS_FIELD: specs, "run_policy": run_policy}
        if job.spec.clean_pod_policy is None:
            spec_update["clean_pod_policy"] = run_policy.clean_pod_policy
        return job.model_copy(update={"spec": job.spec.model_copy(update=spec_update)})

    # --- validation ---------------------------------------------------------------------------

    def validate(self, job: MPIJob) -> list[FieldError]:
        """The reconciler's checks (upstream has no MPIJob v1 webhook), plus name and managedBy."""
        path = "spec.mpiReplicaSpecs"
        errors = job_name_errors(job.name)
        errors += managed_by_errors(job.run_policy, V1_MANAGED_BY)
        errors += non_negative_errors("spec.slotsPerWorker", job.spec.slots_per_worker)
        if not job.replica_specs:
            errors.append(required(path, "must have Launcher and Worker replica specs"))
        errors += replica_keys_errors(path, job.replica_specs, self.replica_types)
        for replica_type, spec in job.replica_specs.items():
            errors += containers_errors(f"{path}.{replica_type}", spec, None)
            errors += container_names_errors(f"{path}.{replica_type}", spec)
        launcher = job.replica_specs.get(LAUNCHER)
        if launcher is None:
            errors.append(required(f"{path}.{LAUNCHER}", "must be present"))
        elif launcher.replicas != 1:
            errors.append(forbidden(f"{path}.{LAUNCHER}.replicas", "must be 1"))
        derived = [launcher_name(job)]
        if worker_count(job) > 0:
            derived.append(replica_name(job.name, WORKER, worker_count(job) - 1))
        return errors + derived_name_errors(job.name, derived)

    # --- roles, names, processes --------------------------------------------------------------

    # --- env ----------------------------------------------------------------------------------

    def replica_env(self, job: MPIJob, replica_type: str, index: int, addressing: Addressing) -> list[EnvVar]:
        """Launcher container[0] only; locally without the kubectl-exec agent and GPU blanking."""
        if replica_type != LAUNCHER:
            return []
        found = []
        if not addressing.colocated:
            found.append(env("OMPI_MCA_plm_rsh_agent", f"{CONFIG_MOUNT_PATH}/{KUBEXEC}"))
        found.append(env("OMPI_MCA_orte_default_hostfile", f"{CONFIG_MOUNT_PATH}/{HOSTFILE}"))
        if addressing.colocated:
            return found
        launcher = job.replica_specs.get(LAUNCHER)
        user_set = container_env_names(launcher)
        if "I_MPI_HYDRA_BOOTSTRAP" not in user_set:
            found.append(env("I_MPI_HYDRA_BOOTSTRAP", "rsh"))
        if "I_MPI_HYDRA_BOOTSTRAP_EXEC" not in user_set:
            found.append(env("I_MPI_HYDRA_BOOTSTRAP_EXEC", f"{CONFIG_MOUNT_PATH}/{KUBEXEC}"))
        if not requests_gpus(launcher):
            # The launcher only orchestrates; keep it off the GPUs a container runtime might expose.
            found += [env("NVIDIA_VISIBLE_DEVICES", ""), env("NVIDIA_DRIVER_CAPABILITIES", "")]
        return found

    def init_containers(
        self,
        job: MPIJob,
        replica_type: str,
        index: int,
        addressing: Addressing,
        settings: InitSettings,
    ) -> list[dict[str, Any]]:
        """``kubectl-delivery`` copies kubectl into the launcher (its volumes: ``pod_decoration``)."""
        if addressing.colocated or replica_type != LAUNCHER:
            return []
        resources = {"cpu": "100m", "memory": "512Mi", "ephemeral-storage": "5Gi"}
        return [
            {
                "name": "kubectl-delivery",
                "image": settings.mpi_kubectl_delivery_image,
                "imagePullPolicy": "IfNotPresent",
                "env": [
                    {"name": "TARGET_DIR", "value": KUBECTL_MOUNT_PATH},
                    {"name": "NAMESPACE", "value": job.namespace},
                ],
                "volumeMounts": [
                    {"name": KUBECTL_VOLUME, "mountPath": KUBECTL_MOUNT_PATH},
                    config_mount(),
                ],
                "resources": {"limits": dict(resources), "requests": dict(resources)},
            }
        ]

    # --- config files -------------------------------------------------------------------------

    def config_files(
        self, job: MPIJob, addressing: Addressing, running_hosts: Sequence[str]
    ) -> dict[str, str]:
        """``<job>-config``: kubexec.sh, hostfile, discover_hosts.sh (byte-for-byte as upstream)."""
        slots = slots_per_worker(job.spec.slots_per_worker)
        if addressing.colocated:
            total = slots * worker_count(job)
            hostfile = f"{LOCALHOST} slots={total}\n" if total else ""
            return {HOSTFILE: hostfile, DISCOVER_HOSTS: f"#!/bin/sh\necho {LOCALHOST}:{total}"}
        gpu_launcher = requests_gpus(job.replica_specs.get(LAUNCHER))
        hosts = [addressing.host(job, WORKER, i) for i in range(worker_count(job))]
        hostfile = f"{launcher_name(job)} slots={slots}\n" if gpu_launcher else ""
        hostfile += "".join(f"{host} slots={slots}\n" for host in hosts)
        discover = "#!/bin/sh"
        if gpu_launcher:
            discover += f"\necho {launcher_name(job)}:{slots}\n"
        discover += "".join(f"\necho {host}:{slots}" for host in sorted(running_hosts))
        return {KUBEXEC: self.kubexec(job), HOSTFILE: hostfile, DISCOVER_HOSTS: discover}

    def kubexec(self, job: MPIJob) -> str:
        container = f" --container {job.spec.main_container}" if job.spec.main_container else ""
        return (
            "#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n"
            f'{KUBECTL_MOUNT_PATH}/kubectl exec ${{POD_NAME}}{container} -- /bin/sh -c "$*"'
        )

    # --- Kubernetes objects ---------------------------------------------------------------------

    def launcher_service_account(self, job: MPIJob) -> str:
        """The launcher template's service account if it names one, else ``<job>-launcher``."""
        launcher = job.replica_specs.get(LAUNCHER)
        spec = (launcher.template.get("spec") or {}) if launcher is not None else {}
        return str(spec.get("serviceAccountName") or launcher_name(job))

    def pod_decoration(self, job: MPIJob, replica_type: str, index: int) -> PodDecoration:
        """Launcher: kubectl and all of ``/etc/mpi``; workers: only ``kubexec.sh``, and a command
        that keeps them alive for ``kubectl exec`` when they have none."""
        if replica_type == LAUNCHER:
            files = (KUBEXEC, HOSTFILE, DISCOVER_HOSTS)
            return PodDecoration(
                volumes=(
                    {"name": KUBECTL_VOLUME, "emptyDir": {}},
                    config_volume(job, self.config_file_modes, files),
                ),
                main_volume_mounts=(
                    {"name": KUBECTL_VOLUME, "mountPath": KUBECTL_MOUNT_PATH},
                    config_mount(),
                ),
                service_account_name=self.launcher_service_account(job),
            )
        return PodDecoration(
            volumes=(config_volume(job, self.config_file_modes, (KUBEXEC,)),),
            main_volume_mounts=(config_mount(),),
            default_command=("sleep",),
            default_args=("365d",),
        )

    def replica_labels(self, job: MPIJob, replica_type: str, index: int) -> dict[str, str]:
        """Upstream labels the launcher pod without a replica index (it is the only one)."""
        labels = super().replica_labels(job, replica_type, index)
        if replica_type == LAUNCHER:
            del labels[REPLICA_INDEX_LABEL]
        return labels

    def replica_index_of(self, job: MPIJob, labels: Mapping[str, str]) -> int | None:
        if self.replica_type_of(labels) == LAUNCHER and REPLICA_INDEX_LABEL not in labels:
            return 0
        return super().replica_index_of(job, labels)

    def child_event(
        self, job: MPIJob, replica_type: str, kind: str, name: str, action: str
    ) -> tuple[str, str] | None:
        """Upstream's MPIJob v1 controller creates its pods itself, in its own words."""
        if action == "Create" and replica_type == LAUNCHER:
            return "MPIJobRunning", f"launcher pod created success: {name}"
        if action == "Create" and replica_type == WORKER:
            return "SuccessfulCreatePod", f"Created worker pod: {name}"
        return super().child_event(job, replica_type, kind, name, action)

    def companion_objects(self, job: MPIJob) -> list[dict[str, Any]]:
        """The launcher's identity: a ServiceAccount allowed to exec into exactly this job's workers."""
        name = launcher_name(job)
        account = self.launcher_service_account(job)
        labels = {APP_LABEL: job.name}
        workers = [replica_name(job.name, WORKER, i) for i in range(worker_count(job))]
        return [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "labels": labels}},
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": name, "labels": labels},
                "rules": [
                    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                    {
                        "apiGroups": [""],
                        "resources": ["pods/exec"],
                        "resourceNames": workers,
                        "verbs": ["create"],
                    },
                ],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": name, "labels": labels},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": job.namespace}],
            },
        ]

    # --- status -------------------------------------------------------------------------------

    def status_rules(self, context: StatusContext) -> list[ConditionProposal | StatusEvent]:
        """The launcher pod's phase, worker evictions, then the generic replica rules.

        Upstream records the launcher's outcome as events (``mpijobsSucceeded``, the pod's reason on a
        failure, ``MPIJobRunning`` once the launcher and every worker run), but the conditions it sets with
        them are overwritten by its generic rules' status before the write: the conditions users read are
        the generic rules' (``MPIJob <job> is successfully completed.``). Evictions are kept as conditions
        on purpose (upstream loses them the same way), so an evicted job says so."""
        job = context.job
        full_name = f"{job.namespace}/{job.name}"
        found: list[ConditionProposal | StatusEvent] = []
        launchers = observed(context.replicas, LAUNCHER)
        launcher = launchers[0] if launchers else None
        if launcher is not None and launcher.phase == "Succeeded":
            # Upstream's event reason joins the plural there (a slip kept, as events are what tools read).
            found.append(
                StatusEvent("Normal", "mpijobsSucceeded", f"MPIJob {full_name} successfully completed.")
            )
        elif launcher is not None and launcher.phase == "Failed":
            message = f"MPIJob {full_name} has failed"
            found.append(StatusEvent("Warning", launcher.reason or "MPIJobFailed", message))
            if launcher.reason == EVICTED:
                found.append(ConditionProposal(ConditionType.FAILED, "MPIJobEvicted", message))
        workers = observed(context.replicas, WORKER)
        evicted = evicted_workers_message(workers)
        if evicted is not None:
            found.append(
                ConditionProposal(ConditionType.FAILED, "MPIJobEvicted", evicted, Announcement("Warning"))
            )
        if (
            launcher is not None
            and launcher.phase == "Running"
            and all(w.phase == "Running" for w in workers)
        ):
            found.append(StatusEvent("Normal", f"{self.kind}Running", f"MPIJob {full_name} is running"))
        for replica_type in (t for t in self.replica_types if t in job.replica_specs):
            counted = counts(context, replica_type)
            if replica_type == LAUNCHER:
                if counted.running > 0:
                    found.append(proposal(self.kind, ConditionType.RUNNING, f"MPIJob {job.name} is running."))
                if counted.expected == 0:
                    message = f"MPIJob {job.name} is successfully completed."
                    return [*found, proposal(self.kind, ConditionType.SUCCEEDED, message)]
            found += restart_only_on_exit_code(self.kind, context, replica_type, counted, FAILED_REASON)
        return found
