"""The torch ML policy (Trainer's ``Torch`` plugin): torchrun's ``PET_*`` env on every trainer node, or
torchtune's recipe and rendezvous on its command."""

from __future__ import annotations

from kubetrain.api.errors import FieldError
from kubetrain.api.trainer import TrainJob
from kubetrain.frameworks.trainer import torchtune
from kubetrain.frameworks.trainer.constants import (
    ANCESTOR_TRAINER,
    COMPLETION_INDEX_FIELD_PATH,
    NODE,
    PET_MASTER_ADDR,
    PET_MASTER_PORT,
    PET_NNODES,
    PET_NODE_RANK,
    PET_NPROC_PER_NODE,
    TORCH_RESERVED_ENV,
    TORCHTUNE_ENTRYPOINT,
)
from kubetrain.frameworks.trainer.info import (
    Obj,
    RuntimeInfo,
    cpus_per_node,
    env_field,
    env_value,
    gpus_per_node,
    node_resources,
    upsert_env,
    upsert_ports,
)
from kubetrain.frameworks.trainer.plugin import Addressing, RuntimePlugin, master_host, master_port


class TorchPlugin(RuntimePlugin):
    name = "Torch"

    def validate(self, info: RuntimeInfo, trainjob: TrainJob) -> list[FieldError]:
        policy = info.ml_policy.torch if info.ml_policy else None
        if policy is None:
            return []
        errors: list[FieldError] = []
        for target in (policy.env_injection.targets or []) if policy.env_injection else []:
            for name in target.container_names:
                pod_set = info.pod_set(target.job_name)
                if pod_set is None or pod_set.any_container(name) is None:
                    errors.append(
                        FieldError(
                            "spec.runtimeRef",
                            f"envInjection target podSet {target.job_name!r} container {name!r} not found in "
                            "runtime template",
                        )
                    )
        trainer = trainjob.spec.trainer
        if trainer is not None:
            reserved = sorted({str(e.get("name")) for e in trainer.env or []} & TORCH_RESERVED_ENV)
            if reserved:
                errors.append(
                    FieldError(
                        "spec.trainer.env",
                        f"must not have reserved envs, invalid envs configured: [{' '.join(reserved)}]",
                    )
                )
            if tuple(trainer.command or ()) == TORCHTUNE_ENTRYPOINT:
                errors += torchtune.validate(info, trainjob)
        return errors

    def enforce_ml_policy(self, info: RuntimeInfo, trainjob: TrainJob, addressing: Addressing) -> None:
        policy = info.ml_policy.torch if info.ml_policy else None
        if policy is None:
            return
        trainer = trainjob.spec.trainer
        trainer_set = info.pod_set_by_ancestor(ANCESTOR_TRAINER)
        if trainer_set is not None and trainer is not None and trainer.num_nodes is not None:
            trainer_set.count = trainer.num_nodes
        resources = node_resources(info)
        gpus = gpus_per_node(resources)
        procs: str | int = "auto"
        if trainer is not None and trainer.num_proc_per_node is not None:
            procs = trainer.num_proc_per_node
        elif gpus == 0:
            procs = max(1, cpus_per_node(resources))

        container = info.container_by_ancestor(ANCESTOR_TRAINER, NODE) if trainer is not None else None
        if container is not None and trainer is not None:
            upsert_env(container, *(trainer.env or []))
        nodes = trainer_set.count if trainer_set is not None else 1
        pet = [
            env_value(PET_NNODES, str(nodes)),
            env_value(PET_NPROC_PER_NODE, str(procs)),
            env_field(PET_NODE_RANK, COMPLETION_INDEX_FIELD_PATH),
        ]
        master = [
            env_value(PET_MASTER_ADDR, master_host(addressing, trainjob.name)),
            env_value(PET_MASTER_PORT, str(master_port(addressing, trainjob.name))),
        ]
        if container is not None and trainer is not None:
            upsert_env(container, *pet)
            if tuple(trainer.command or ()) != TORCHTUNE_ENTRYPOINT:
                upsert_env(container, *master)
            else:
                info.trainer_command = [
                    *(info.trainer_command or []),
                    *torchtune.command(info, trainjob, nodes, procs, gpus, addressing),
                ]
            upsert_ports(container, {"containerPort": master_port(addressing, trainjob.name)})
        for target in (policy.env_injection.targets or []) if policy.env_injection else []:
            for name in target.container_names:
                pod_set = info.pod_set(target.job_name)
                injected: Obj | None = pod_set.any_container(name) if pod_set is not None else None
                if injected is not None:
                    upsert_env(injected, *pet)
                    upsert_env(injected, *master)
