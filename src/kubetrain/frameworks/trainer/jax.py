"""The JAX ML policy (Trainer's ``Jax`` plugin): ``JAX_*`` env for ``jax.distributed.initialize()``."""

from __future__ import annotations

from kubetrain.api.trainer import TrainJob
from kubetrain.frameworks.trainer.constants import ANCESTOR_TRAINER, COMPLETION_INDEX_FIELD_PATH, NODE
from kubetrain.frameworks.trainer.info import RuntimeInfo, env_field, env_value, upsert_env, upsert_ports
from kubetrain.frameworks.trainer.plugin import Addressing, RuntimePlugin, master_host, master_port


class JAXPlugin(RuntimePlugin):
    name = "JAX"

    def enforce_ml_policy(self, info: RuntimeInfo, trainjob: TrainJob, addressing: Addressing) -> None:
        if info.ml_policy is None or info.ml_policy.jax is None:
            return
        trainer = trainjob.spec.trainer
        trainer_set = info.pod_set_by_ancestor(ANCESTOR_TRAINER)
        if trainer_set is not None and trainer is not None and trainer.num_nodes is not None:
            trainer_set.count = trainer.num_nodes
        container = info.container_by_ancestor(ANCESTOR_TRAINER, NODE) if trainer is not None else None
        if container is None:
            return
        nodes = trainer_set.count if trainer_set is not None else 1
        host, port = master_host(addressing, trainjob.name), master_port(addressing, trainjob.name)
        upsert_env(
            container,
            env_value("JAX_NUM_PROCESSES", str(nodes)),
            env_field("JAX_PROCESS_ID", COMPLETION_INDEX_FIELD_PATH),
            env_value("JAX_COORDINATOR_ADDRESS", f"{host}:{port}"),
        )
        upsert_ports(container, {"containerPort": port})
