"""A job's report history in the ConfigMap it owns: written every few seconds per reporting job, merged with
what another replica (or this one before a restart) stored, never over a ConfigMap that is not the job's."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx2
import pytest

from kubetrain.api.progress import Metric, ProgressHistory, StatusTarget, TrainerStatus
from kubetrain.kube.runtime.store import ChangeType, Store
from kubetrain.kube.status import history as module
from kubetrain.kube.status.authenticator import PodReporter
from kubetrain.kube.status.history import FIRST_FLUSH, FLUSH_PERIOD, IDLE_AFTER, HistoryRecorder
from kubetrain.kube.status.history_config_map import read_history

from .fakes import ObjectApi

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
TARGET = StatusTarget("kubeflow.org/v1", "team", "pytorchjobs", "bert")
CONFIG_MAPS = "/api/v1/namespaces/team/configmaps"
HISTORY = f"{CONFIG_MAPS}/bert-progress-history"
JOB: dict[str, Any] = {
    "kind": "PyTorchJob",
    "metadata": {"name": "bert", "namespace": "team", "uid": "uid-bert"},
    "status": {},
}
REPORTER = PodReporter("bert-worker-0", "team", "pod-uid", "uid-bert")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def report(second: int, loss: float) -> TrainerStatus:
    return TrainerStatus(
        progress_percentage=second,
        metrics=[Metric(name="loss", value=str(loss))],
        last_updated_time=T0 + timedelta(seconds=second),
    )


def stored_losses(api: ObjectApi) -> list[float]:
    history = read_history(api.objects[HISTORY], "uid-bert")
    return [point.metrics["loss"] for point in history.points]


def recorder(api: ObjectApi, clock: Clock, job: dict[str, Any] = JOB) -> HistoryRecorder:
    jobs = Store()
    jobs.apply(ChangeType.ADDED, job)
    return HistoryRecorder(api.client(), lambda target: jobs, clock=clock)


async def test_a_jobs_first_reports_are_written_within_seconds_to_a_config_map_it_owns() -> None:
    api, clock = ObjectApi(), Clock()
    history = recorder(api, clock)
    history.accept(TARGET, report(0, 2.5), REPORTER)
    await history.flush_due()
    assert HISTORY not in api.objects
    clock.now += FIRST_FLUSH
    await history.flush_due()
    config_map = api.objects[HISTORY]
    assert config_map["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": "bert",
            "uid": "uid-bert",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert config_map["metadata"]["labels"]["training.kubeflow.org/job-name"] == "bert"
    assert stored_losses(api) == [2.5]


async def test_later_reports_are_merged_in_every_period_under_the_resource_version() -> None:
    api, clock = ObjectApi(), Clock()
    history = recorder(api, clock)
    history.accept(TARGET, report(0, 2.5), REPORTER)
    clock.now += FIRST_FLUSH
    await history.flush_due()
    for second in range(1, 30):
        history.accept(TARGET, report(second, 2.5 - second / 20), REPORTER)
        clock.now += 1
        await history.flush_due()
    puts = api.calls("PUT", HISTORY)
    assert 1 <= len(puts) <= 29 / FLUSH_PERIOD + 1
    assert all(body["metadata"]["resourceVersion"] for _, _, body in puts)
    clock.now += FLUSH_PERIOD
    await history.flush_due()
    assert stored_losses(api)[0] == 2.5 and stored_losses(api)[-1] == pytest.approx(2.5 - 29 / 20)


async def test_a_write_another_replica_made_meanwhile_is_read_and_merged_not_overwritten() -> None:
    api, clock = ObjectApi(), Clock()
    mine = recorder(api, clock)
    mine.accept(TARGET, report(0, 3.0), REPORTER)
    clock.now += FIRST_FLUSH
    await mine.flush_due()
    theirs = ProgressHistory()
    theirs.add(report(0, 3.0))
    theirs.add(report(1, 2.0))
    stored = api.objects[HISTORY]
    api.put_object(HISTORY, {**stored, "data": {"history.json": json.dumps(theirs.to_json())}})
    mine.accept(TARGET, report(2, 1.0), REPORTER)
    clock.now += FLUSH_PERIOD
    await mine.flush_due()
    assert mine.counts.conflicts == 1
    assert stored_losses(api) == [3.0, 2.0, 1.0]


async def test_after_a_restart_the_stored_history_is_read_before_it_is_added_to() -> None:
    api, clock = ObjectApi(), Clock()
    before = recorder(api, clock)
    before.accept(TARGET, report(0, 3.0), REPORTER)
    clock.now += FIRST_FLUSH
    await before.flush_due()
    after = recorder(api, clock)  # a new operator process
    after.accept(TARGET, report(5, 1.5), REPORTER)
    clock.now += FIRST_FLUSH
    await after.flush_due()
    assert stored_losses(api) == [3.0, 1.5]


async def test_a_config_map_of_that_name_the_job_does_not_own_is_never_written() -> None:
    api, clock = ObjectApi(), Clock()
    users = {"metadata": {"name": "bert-progress-history", "namespace": "team"}, "data": {"mine": "yes"}}
    api.put_object(HISTORY, users)
    history = recorder(api, clock)
    history.accept(TARGET, report(0, 3.0), REPORTER)
    clock.now += FIRST_FLUSH
    await history.flush_due()
    assert api.calls("PUT") == [] and api.calls("POST") == []
    assert api.objects[HISTORY]["data"] == {"mine": "yes"}


async def test_a_job_that_is_gone_is_forgotten_without_a_write() -> None:
    api, clock = ObjectApi(), Clock()
    history = recorder(api, clock, {**JOB, "metadata": {**JOB["metadata"], "uid": "someone-else"}})
    history.accept(TARGET, report(0, 3.0), REPORTER)
    clock.now += FIRST_FLUSH
    await history.flush_due()
    assert api.requests == [] and len(history) == 0


async def test_a_silent_job_is_forgotten_once_its_points_are_written() -> None:
    api, clock = ObjectApi(), Clock()
    history = recorder(api, clock)
    history.accept(TARGET, report(0, 3.0), REPORTER)
    clock.now += FIRST_FLUSH
    await history.flush_due()
    clock.now += IDLE_AFTER
    await history.flush_due()
    assert len(history) == 0


async def test_at_most_max_jobs_are_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(module, "MAX_JOBS", 3)
    history = recorder(ObjectApi(), Clock())
    for i in range(10):
        history.accept(
            StatusTarget("kubeflow.org/v1", "team", "pytorchjobs", f"j{i}"), report(0, 1.0), REPORTER
        )
    assert len(history) == 3


def test_a_history_owned_by_another_job_reads_as_empty() -> None:
    theirs = ProgressHistory()
    theirs.add(report(0, 1.0))
    config_map = {
        "metadata": {"ownerReferences": [{"uid": "old-uid"}]},
        "data": {"history.json": json.dumps(theirs.to_json())},
    }
    assert read_history(config_map, "uid-bert").points == []
    assert len(read_history(config_map, "old-uid").points) == 1


async def test_a_failed_write_keeps_the_points_for_the_next_period() -> None:
    api, clock = ObjectApi(), Clock()
    history = recorder(api, clock)
    api.answers[("GET", HISTORY)] = lambda request: httpx2.Response(500, json={"message": "etcd timeout"})
    history.accept(TARGET, report(0, 3.0), REPORTER)
    clock.now += FIRST_FLUSH
    await history.flush_due()
    assert history.counts.failed == 1
    del api.answers[("GET", HISTORY)]
    clock.now += FLUSH_PERIOD
    await history.flush_due()
    assert stored_losses(api) == [3.0]
