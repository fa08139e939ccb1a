"""The MPI ML policy (Trainer's ``MPI`` plugin): an SSH key Secret mounted on the launcher and the nodes, a
hostfile ConfigMap listing every node with its slots, and Open MPI's env on the launcher."""

from __future__ import annotations

from kubetrain.api.errors import FieldError
from kubetrain.api.trainer import MPIImplementation, MPIMLPolicySource, TrainJob
from kubetrain.frameworks.ssh_keys import SSH_AUTH_TYPE
from kubetrain.frameworks.trainer.constants import (
    LAUNCHER,
    MPI_HOSTFILE_DIR,
    MPI_HOSTFILE_NAME,
    MPI_HOSTFILE_SUFFIX,
    MPI_HOSTFILE_VOLUME,
    MPI_RESERVED_ENV,
    MPI_SSH_AUTH_DEFAULT_MODE,
    MPI_SSH_AUTH_SUFFIX,
    MPI_SSH_AUTH_VOLUME,
    MPI_SSH_AUTHORIZED_KEYS,
    MPI_SSH_PRIVATE_KEY,
    MPI_SSH_PRIVATE_KEY_FILE,
    MPI_SSH_PRIVATE_KEY_MODE,
    MPI_SSH_PUBLIC_KEY,
    MPI_SSH_PUBLIC_KEY_FILE,
    MPI_SSH_PUBLIC_KEY_MODE,
    NODE,
    OMPI_DEFAULT_SLOTS,
    OMPI_HOSTFILE,
    OMPI_KEEP_FQDN,
    OMPI_RSH_ARGS,
    OMPI_RSH_ARGS_DEFAULT,
)
from kubetrain.frameworks.trainer.info import (
    Obj,
    RuntimeInfo,
    env_value,
    gpus_per_node,
    node_resources,
    upsert_env,
    upsert_mounts,
)
from kubetrain.frameworks.trainer.plugin import Addressing, Existing, RuntimePlugin


def ssh_secret_name(trainjob: str) -> str:
    return f"{trainjob}{MPI_SSH_AUTH_SUFFIX}"


def hostfile_name(trainjob: str) -> str:
    return f"{trainjob}{MPI_HOSTFILE_SUFFIX}"


def _policy(info: RuntimeInfo) -> MPIMLPolicySource | None:
    return info.ml_policy.mpi if info.ml_policy else None


class MPIPlugin(RuntimePlugin):
    name = "MPI"

    def validate(self, info: RuntimeInfo, trainjob: TrainJob) -> list[FieldError]:
        policy = _policy(info)
        trainer = trainjob.spec.trainer
        if policy is None or trainer is None:
            return []
        errors: list[FieldError] = []
        launcher_and_node = info.pod_set(LAUNCHER) is not None and info.pod_set(NODE) is not None
        if (trainer.num_nodes or 1) >= 2 and policy.run_launcher_as_node and not launcher_and_node:
            errors.append(
                FieldError(
                    "spec.trainer.numNodes",
                    "must have 1 when MPI trainingRuntime with enabled runLauncherAsNode does not have "
                    "either launcher and node",
                )
            )
        reserved = sorted({str(e.get("name")) for e in trainer.env or []} & MPI_RESERVED_ENV)
        if reserved:
            errors.append(
                FieldError(
                    "spec.trainer.env",
                    f"must not have reserved envs, invalid envs configured: [{' '.join(reserved)}]",
                )
            )
        return errors

    def enforce_ml_policy(self, info: RuntimeInfo, trainjob: TrainJob, addressing: Addressing) -> None:
        policy = _policy(info)
        if policy is None:
            return
        trainer = trainjob.spec.trainer
        node = info.pod_set(NODE)
        if trainer is not None and trainer.num_nodes is not None and node is not None:
            node.count = max(trainer.num_nodes - 1, 1) if policy.run_launcher_as_node else trainer.num_nodes
        if trainer is not None and trainer.num_proc_per_node is not None:
            policy.num_proc_per_node = trainer.num_proc_per_node
        elif (policy.num_proc_per_node or 1) == 1 and (gpus := gpus_per_node(node_resources(info))) > 1:
            policy.num_proc_per_node = gpus
        slots = policy.num_proc_per_node or 1
        for pod_set in info.pod_sets:
            if pod_set.name not in (NODE, LAUNCHER):
                continue
            pod_set.upsert_volumes(_ssh_volume(trainjob.name))
            if pod_set.name == LAUNCHER:
                pod_set.upsert_volumes(_hostfile_volume(trainjob.name))
            for container in pod_set.containers:
                if container.get("name") != NODE:
                    continue
                upsert_mounts(
                    container,
                    {"name": MPI_SSH_AUTH_VOLUME, "mountPath": policy.ssh_auth_mount_path or "/root/.ssh"},
                )
                if pod_set.name == LAUNCHER:
                    upsert_mounts(container, {"name": MPI_HOSTFILE_VOLUME, "mountPath": MPI_HOSTFILE_DIR})
                    upsert_env(
                        container,
                        env_value(OMPI_HOSTFILE, f"{MPI_HOSTFILE_DIR}/{MPI_HOSTFILE_NAME}"),
                        env_value(OMPI_KEEP_FQDN, "true"),
                        env_value(OMPI_DEFAULT_SLOTS, str(slots)),
                        env_value(OMPI_RSH_ARGS, OMPI_RSH_ARGS_DEFAULT),
                    )

    def build(self, info: RuntimeInfo, trainjob: TrainJob, existing: Existing) -> list[Obj]:
        policy = _policy(info)
        if policy is None:
            return []
        objects: list[Obj] = []
        if not existing.ssh_secret:
            # Without data: the substrate fills in a fresh ECDSA P-521 pair as it creates it.
            objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": ssh_secret_name(trainjob.name)},
                    "type": SSH_AUTH_TYPE,
                    "immutable": True,
                }
            )
        return [*objects, hostfile(info, trainjob.name, policy)]


def hostfile(info: RuntimeInfo, trainjob: str, policy: MPIMLPolicySource) -> Obj:
    slots = policy.num_proc_per_node or 1
    lines = []
    if (policy.mpi_implementation or MPIImplementation.OPEN_MPI) == MPIImplementation.OPEN_MPI:
        for pod_set in info.pod_sets:
            if pod_set.name == NODE or (policy.run_launcher_as_node and pod_set.name == LAUNCHER):
                lines += [f"{endpoint} slots={slots}\n" for endpoint in pod_set.endpoints]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": hostfile_name(trainjob)},
        "data": {MPI_HOSTFILE_NAME: "".join(lines)},
    }


def _ssh_volume(trainjob: str) -> Obj:
    return {
        "name": MPI_SSH_AUTH_VOLUME,
        "secret": {
            "secretName": ssh_secret_name(trainjob),
            "defaultMode": MPI_SSH_AUTH_DEFAULT_MODE,
            "items": [
                {
                    "key": MPI_SSH_PRIVATE_KEY,
                    "path": MPI_SSH_PRIVATE_KEY_FILE,
                    "mode": MPI_SSH_PRIVATE_KEY_MODE,
                },
                {"key": MPI_SSH_PUBLIC_KEY, "path": MPI_SSH_PUBLIC_KEY_FILE, "mode": MPI_SSH_PUBLIC_KEY_MODE},
                {"key": MPI_SSH_PUBLIC_KEY, "path": MPI_SSH_AUTHORIZED_KEYS, "mode": MPI_SSH_PUBLIC_KEY_MODE},
            ],
        },
    }


def _hostfile_volume(trainjob: str) -> Obj:
    return {
        "name": MPI_HOSTFILE_VOLUME,
        "configMap": {
            "name": hostfile_name(trainjob),
            "items": [{"key": MPI_HOSTFILE_NAME, "path": MPI_HOSTFILE_NAME, "mode": 0o444}],
        },
    }
