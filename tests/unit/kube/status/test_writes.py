"""Reports into status.trainerStatus, coalesced: at most one write a second per job, all jobs within a
budget, a patch that only adds trainerStatus and never lands on a job re-created under the same name."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from kubetrain.api.progress import StatusTarget, TrainerStatus
from kubetrain.kube.runtime.store import ChangeType, Store
from kubetrain.kube.status.authenticator import PodReporter
from kubetrain.kube.status.writes import StatusWriter

from .fakes import ObjectApi, status

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def target(name: str = "bert") -> StatusTarget:
    return StatusTarget("kubeflow.org/v1", "team", "pytorchjobs", name)


def reporter(job_uid: str = "uid-bert") -> PodReporter:
    return PodReporter("bert-worker-0", "team", "pod-uid", job_uid)


def report(percent: int, at: datetime = T0) -> TrainerStatus:
    return TrainerStatus(progress_percentage=percent, last_updated_time=at)


def job(
    name: str = "bert", uid: str = "uid-bert", job_status: dict[str, Any] | None = None
) -> dict[str, Any]:
    metadata = {"name": name, "namespace": "team", "uid": uid}
    return {
        "kind": "PyTorchJob",
        "metadata": metadata,
        "status": {"conditions": []} if job_status is None else job_status,
    }


class Setup:
    def __init__(self, *jobs: dict[str, Any], writes_per_second: float = 50.0) -> None:
        self.api, self.clock, self.store = ObjectApi(), Clock(), Store()
        for each in jobs or (job(),):
            self.store.apply(ChangeType.ADDED, each)
            path = target(each["metadata"]["name"]).path.removesuffix("/status")
            self.api.put_object(path, each)
        self.writer = StatusWriter(
            self.api.client(), lambda t: self.store, writes_per_second=writes_per_second, clock=self.clock
        )

    async def flush(self) -> int:
        started = self.writer.flush_due()
        await self.writer.drain()
        return started

    def patches(self) -> list[Any]:
        return [body for _, _, body in self.api.calls("PATCH")]


async def test_a_report_is_a_json_patch_of_trainer_status_after_a_test_of_the_jobs_uid() -> None:
    setup = Setup()
    setup.writer.accept(target(), report(40), reporter())
    await setup.flush()
    [(method, path, body)] = setup.api.requests
    assert (method, path) == ("PATCH", "/apis/kubeflow.org/v1/namespaces/team/pytorchjobs/bert/status")
    assert body == [
        {"op": "test", "path": "/metadata/uid", "value": "uid-bert"},
        {
            "op": "add",
            "path": "/status/trainerStatus",
            "value": {"progressPercentage": 40, "lastUpdatedTime": "2026-11-25T12:00:00Z"},
        },
    ]
    stored = setup.api.objects[path.removesuffix("/status")]
    assert stored["status"] == {"conditions": [], "trainerStatus": body[1]["value"]}, "nothing else touched"


async def test_reports_faster_than_one_a_second_are_coalesced_to_the_latest_once_a_second() -> None:
    setup = Setup()
    for percent in range(10):
        setup.writer.accept(target(), report(percent), reporter())
    await setup.flush()
    for percent in range(10, 20):
        setup.clock.now += 0.05
        setup.writer.accept(target(), report(percent), reporter())
        await setup.flush()
    assert [p[1]["value"]["progressPercentage"] for p in setup.patches()] == [9]
    setup.clock.now = 101.0
    await setup.flush()
    assert [p[1]["value"]["progressPercentage"] for p in setup.patches()] == [9, 19]
    assert setup.writer.counts.coalesced == 18


async def test_a_thousand_pods_reporting_every_second_cost_one_write_a_second() -> None:
    setup = Setup()
    for second in range(10):
        for _ in range(1000):
            setup.writer.accept(target(), report(second, T0 + timedelta(seconds=second)), reporter())
        await setup.flush()
        setup.clock.now += 1.0
    assert len(setup.patches()) == 10
    assert setup.writer.counts.coalesced == 10 * 999


async def test_all_jobs_together_stay_within_the_budget_and_are_written_oldest_first() -> None:
    names = [f"job-{i}" for i in range(30)]
    setup = Setup(*(job(n, f"uid-{n}") for n in names), writes_per_second=10)
    for name in names:
        setup.writer.accept(target(name), report(1), reporter(f"uid-{name}"))
    per_tick = []
    for _ in range(40):
        per_tick.append(await setup.flush())
        setup.clock.now += 0.1
    assert max(per_tick) <= 10, "the burst is the budget"
    assert sum(per_tick[:10]) <= 20, "at most a burst and then 10 a second"
    written = [path.split("/")[-2] for _, path, _ in setup.api.calls("PATCH")]
    assert written == names


async def test_a_job_re_created_under_its_name_gets_no_write_from_the_old_ones_pods() -> None:
    setup = Setup(job(uid="the-new-uid"))
    setup.writer.accept(target(), report(50), reporter("the-old-uid"))
    await setup.flush()
    assert setup.patches() == []
    assert setup.writer.counts.by_result == {"job_gone": 1}


async def test_a_failed_uid_test_on_the_server_is_not_retried() -> None:
    setup = Setup()
    path = target().path.removesuffix("/status")
    setup.api.put_object(path, job(uid="recreated-meanwhile"))  # the cache has not seen it yet
    setup.writer.accept(target(), report(50), reporter())
    await setup.flush()
    setup.clock.now += 5
    await setup.flush()
    assert len(setup.patches()) == 1
    assert setup.writer.counts.by_result == {"job_gone": 1}
    assert setup.api.objects[path]["status"] == {"conditions": []}


async def test_a_report_older_than_the_one_the_job_holds_is_skipped() -> None:
    held = {"trainerStatus": {"progressPercentage": 60, "lastUpdatedTime": "2026-11-25T12:00:05Z"}}
    setup = Setup(job(job_status=held))
    setup.writer.accept(target(), report(50, T0), reporter())
    await setup.flush()
    assert setup.patches() == []
    assert setup.writer.counts.by_result == {"older": 1}


async def test_a_failed_write_is_tried_again_with_the_latest_report() -> None:
    setup = Setup()
    path = target().path
    setup.api.answers[("PATCH", path)] = lambda request: status(500, "InternalError", "etcd timeout")
    setup.writer.accept(target(), report(10), reporter())
    await setup.flush()
    del setup.api.answers[("PATCH", path)]
    setup.writer.accept(target(), report(11), reporter())
    setup.clock.now += 1
    await setup.flush()
    assert [p[1]["value"]["progressPercentage"] for p in setup.patches()] == [10, 11]
    assert setup.writer.counts.failed == 1 and setup.writer.counts.written == 1


async def test_a_job_not_yet_reconciled_keeps_its_report_until_it_has_a_status() -> None:
    setup = Setup(job(job_status={}))
    setup.store.apply(
        ChangeType.MODIFIED,
        {**job(), "status": None, "metadata": {**job()["metadata"], "resourceVersion": "9"}},
    )
    setup.writer.accept(target(), report(10), reporter())
    await setup.flush()
    assert setup.patches() == [] and len(setup.writer) == 1
    setup.store.apply(
        ChangeType.MODIFIED, {**job(), "metadata": {**job()["metadata"], "resourceVersion": "10"}}
    )
    setup.clock.now += 1
    await setup.flush()
    assert len(setup.patches()) == 1 and len(setup.writer) == 0


async def test_what_is_remembered_per_job_is_bounded_by_the_jobs_written_within_a_second() -> None:
    names = [f"job-{i}" for i in range(50)]
    setup = Setup(*(job(n, f"uid-{n}") for n in names))
    for name in names:
        setup.writer.accept(target(name), report(1), reporter(f"uid-{name}"))
    await setup.flush()
    setup.clock.now += 2
    await setup.flush()
    assert len(setup.writer) == 0
    assert setup.writer._written_at == {}
