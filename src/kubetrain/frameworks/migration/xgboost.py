"""XGBoostJob → TrainJob on the xgboost policy.

v1 gave every process ``MASTER_ADDR`` and ``MASTER_PORT`` (the Master, which runs the tracker), ``RANK`` and
``WORLD_SIZE``; Trainer's policy gives the same facts as ``DMLC_TRACKER_URI``, ``DMLC_TRACKER_PORT``,
``DMLC_TASK_ID`` and ``DMLC_NUM_WORKER`` (node 0 is the former Master). The program runs under ``sh``, which
exports v1's names from Trainer's, so it finds the tracker where it looked before.
"""

from __future__ import annotations

from typing import ClassVar

from kubetrain.api.jobs import XGBoostJob
from kubetrain.frameworks.migration.common import Obj, exporting, with_env
from kubetrain.frameworks.migration.result import Note
from kubetrain.frameworks.migration.single import Program
from kubetrain.frameworks.trainer.constants import (
    DMLC_NUM_WORKER,
    DMLC_TASK_ID,
    DMLC_TRACKER_PORT,
    DMLC_TRACKER_URI,
    XGBOOST_RESERVED_ENV,
)
from kubetrain.frameworks.trainer.info import gpus_per_node

V1_ENV = {
    "MASTER_ADDR": f'"${DMLC_TRACKER_URI}"',
    "MASTER_PORT": f'"${DMLC_TRACKER_PORT}"',
    "RANK": f'"${DMLC_TASK_ID}"',
    "WORLD_SIZE": f'"${DMLC_NUM_WORKER}"',
}
UNBUFFERED = {"name": "PYTHONUNBUFFERED", "value": "1"}


class XGBoostRendezvous:
    policy: ClassVar[str] = "xgboost"
    builtin_runtime: ClassVar[str] = "xgboost-distributed"
    framework_label: ClassVar[str] = "xgboost"
    rank_order: ClassVar[tuple[str, ...]] = ("Master", "Worker")
    reserved_env: ClassVar[frozenset[str]] = XGBOOST_RESERVED_ENV

    def program(self, job: XGBoostJob, container: Obj, nodes: int, path: str) -> Program:
        command = [str(c) for c in container.get("command") or []]
        args = [str(a) for a in container.get("args") or []]
        env = with_env(list(container.get("env") or []), UNBUFFERED)
        notes: list[Note] = []
        if nodes > 1:
            notes.append(
                Note(
                    path,
                    "WORKER_ADDRS and WORKER_PORT are not set (they served LightGBM): Trainer's xgboost "
                    "policy names only the tracker",
                )
            )
        if gpus_per_node(container.get("resources") or {}) > 1:
            notes.append(
                Note(
                    f"{path}.resources",
                    "asks for several GPUs: Trainer counts one XGBoost worker per GPU, so WORLD_SIZE "
                    "(DMLC_NUM_WORKER) is nodes x GPUs, where v1 counted pods",
                )
            )
        if not command:
            notes.append(
                Note(
                    f"{path}.command",
                    "unset, so the image's entrypoint runs and migrate cannot give it v1's MASTER_ADDR, "
                    "MASTER_PORT, RANK and WORLD_SIZE: it must read Trainer's DMLC_* env",
                )
            )
            return Program(None, args or None, env, None, tuple(notes))
        notes.append(
            Note(
                f"{path}.command",
                "runs under sh, which exports v1's MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE from "
                "Trainer's DMLC_* env (the image needs sh)",
            )
        )
        return Program(exporting(V1_ENV, command), args or None, env, None, tuple(notes))
