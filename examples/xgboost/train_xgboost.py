"""Distributed XGBoost over its collective (rabit) API, on synthetic data, on CPU.

An XGBoostJob injects MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK. Rank 0 (the Master) hosts
the ``RabitTracker`` on MASTER_PORT; every rank joins it, checks the collective with an allreduce
of the ranks, and trains one booster on its own shard of the data: histograms are allreduced, so
all ranks end with the same model. The Master reports each boosting round's progress and logloss to the
job's status endpoint from an XGBoost callback (``kubetrain.reporting``; nothing without the endpoint).
"""

from __future__ import annotations

import os
import socket
import sys
import time

import numpy as np
import xgboost
from xgboost import collective
from xgboost.callback import TrainingCallback
from xgboost.tracker import RabitTracker

from kubetrain.reporting import ProgressReporter

ROUNDS = 20
NAME_WAIT_SECONDS = 120.0


def wait_until_resolvable(host: str) -> None:
    """On Kubernetes the master's name (its headless service record) exists only once its pod is Ready, which
    can be after a worker starts; XGBoost's tracker client looks the name up once and gives up."""
    deadline = time.monotonic() + NAME_WAIT_SECONDS
    while time.monotonic() < deadline:
        try:
            socket.getaddrinfo(host, None)
            return
        except socket.gaierror:
            time.sleep(0.5)


class ReportProgress(TrainingCallback):
    """After each boosting round: the rounds done of ``rounds``, and the round's training logloss."""

    def __init__(self, rounds: int) -> None:
        super().__init__()
        self.rounds = rounds
        self.reporter = ProgressReporter()

    def after_iteration(
        self, model: xgboost.Booster, epoch: int, evals_log: TrainingCallback.EvalsLog
    ) -> bool:
        self.reporter.report_step(epoch + 1, self.rounds, {"logloss": evals_log["train"]["logloss"][-1]})
        return False  # never stops training

    def after_training(self, model: xgboost.Booster) -> xgboost.Booster:
        self.reporter.close()  # the last round's report goes now
        return model


def shard(rank: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(100 + rank)
    weights = np.random.default_rng(7).normal(size=8)
    x = rng.normal(size=(2000, 8))
    y = (x @ weights + 0.3 * rng.normal(size=2000) > 0).astype(np.float64)
    return x, y


def main() -> int:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    address, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    tracker = None
    if rank == 0:
        tracker = RabitTracker(n_workers=world, host_ip=address, port=port, sortby="task")
        tracker.start()
    else:
        wait_until_resolvable(address)

    with collective.CommunicatorContext(
        dmlc_tracker_uri=address, dmlc_tracker_port=port, dmlc_task_id=str(rank), dmlc_retry=30
    ):
        ranks = collective.allreduce(np.array([float(collective.get_rank())]), collective.Op.SUM)
        expected = world * (world - 1) / 2
        joined = f"rank {collective.get_rank()} of {collective.get_world_size()}"
        print(f"{joined}: allreduce of ranks = {ranks[0]:g}")
        if ranks[0] != expected:
            print(f"allreduce gave {ranks[0]}, expected {expected}")
            return 1

        x, y = shard(rank)
        train = xgboost.DMatrix(x, label=y)
        history: dict[str, dict[str, list[float]]] = {}
        booster = xgboost.train(
            {"objective": "binary:logistic", "eval_metric": "logloss", "max_depth": 3, "nthread": 1},
            train,
            num_boost_round=ROUNDS,
            evals=[(train, "train")],
            evals_result=history,
            verbose_eval=False,
            callbacks=[ReportProgress(ROUNDS)] if rank == 0 else None,
        )
        losses = history["train"]["logloss"]
        trees = booster.num_boosted_rounds()
        print(f"rank {rank} logloss first {losses[0]:.4f} last {losses[-1]:.4f} trees {trees}")

    if tracker is not None:
        tracker.wait_for()
    return 0


if __name__ == "__main__":
    sys.exit(main())
