"""The plain ML policy (Trainer's ``PlainML`` plugin), for runtimes without torch, MPI or JAX: the node count
and the trainer's env, nothing framework-specific (a TensorFlow job sets its own ``TF_CONFIG``)."""

from __future__ import annotations

from kubetrain.api.trainer import TrainJob
from kubetrain.frameworks.trainer.constants import ANCESTOR_TRAINER, NODE
from kubetrain.frameworks.trainer.info import RuntimeInfo, upsert_env
from kubetrain.frameworks.trainer.plugin import Addressing, RuntimePlugin


class PlainMLPlugin(RuntimePlugin):
    name = "PlainML"

    def enforce_ml_policy(self, info: RuntimeInfo, trainjob: TrainJob, addressing: Addressing) -> None:
        policy = info.ml_policy
        if policy is not None and (policy.torch or policy.mpi or policy.jax):
            return
        trainer = trainjob.spec.trainer
        if trainer is None:
            return
        trainer_set = info.pod_set_by_ancestor(ANCESTOR_TRAINER)
        if trainer.num_nodes is not None and trainer_set is not None:
            trainer_set.count = trainer.num_nodes
        container = info.container_by_ancestor(ANCESTOR_TRAINER, NODE)
        if container is not None:
            upsert_env(container, *(trainer.env or []))
