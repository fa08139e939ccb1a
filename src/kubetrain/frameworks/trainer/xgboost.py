"""The XGBoost ML policy (Trainer's ``XGBoost`` plugin): ``DMLC_*`` env for the collective's tracker, which
runs on the first node."""

from __future__ import annotations

from kubetrain.api.errors import FieldError
from kubetrain.api.trainer import TrainJob
from kubetrain.frameworks.trainer.constants import (
    ANCESTOR_TRAINER,
    COMPLETION_INDEX_FIELD_PATH,
    DMLC_NUM_WORKER,
    DMLC_TASK_ID,
    DMLC_TRACKER_PORT,
    DMLC_TRACKER_URI,
    NODE,
    XGBOOST_RESERVED_ENV,
)
from kubetrain.frameworks.trainer.info import (
    RuntimeInfo,
    env_field,
    env_value,
    gpus_per_node,
    node_resources,
    upsert_env,
    upsert_ports,
)
from kubetrain.frameworks.trainer.plugin import Addressing, RuntimePlugin, master_host, master_port


class XGBoostPlugin(RuntimePlugin):
    name = "XGBoost"

    def validate(self, info: RuntimeInfo, trainjob: TrainJob) -> list[FieldError]:
        if info.ml_policy is None or info.ml_policy.xgboost is None or trainjob.spec.trainer is None:
            return []
        return [
            FieldError(
                f"spec.trainer.env[{index}]",
                f"Forbidden: {env.get('name')} is reserved for the XGBoost runtime",
            )
            for index, env in enumerate(trainjob.spec.trainer.env or [])
            if env.get("name") in XGBOOST_RESERVED_ENV
        ]

    def enforce_ml_policy(self, info: RuntimeInfo, trainjob: TrainJob, addressing: Addressing) -> None:
        if info.ml_policy is None or info.ml_policy.xgboost is None:
            return
        trainer_set = info.pod_set_by_ancestor(ANCESTOR_TRAINER)
        if trainer_set is None:
            return
        trainer = trainjob.spec.trainer
        if trainer is not None and trainer.num_nodes is not None:
            trainer_set.count = trainer.num_nodes
        container = info.container_by_ancestor(ANCESTOR_TRAINER, NODE) if trainer is not None else None
        if container is None:
            return
        # One worker per GPU, or one per node on CPUs (each uses every core of its node).
        workers = trainer_set.count * (gpus_per_node(node_resources(info)) or 1)
        port = master_port(addressing, trainjob.name)
        upsert_env(
            container,
            env_value(DMLC_TRACKER_URI, master_host(addressing, trainjob.name)),
            env_value(DMLC_TRACKER_PORT, str(port)),
            env_field(DMLC_TASK_ID, COMPLETION_INDEX_FIELD_PATH),
            env_value(DMLC_NUM_WORKER, str(workers)),
        )
        upsert_ports(container, {"containerPort": port})
