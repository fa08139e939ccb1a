"""MPIJob v1 companions (launcher ServiceAccount, Role, RoleBinding): made at once, posted again once per
recheck period so a deleted one comes back, and not posted on every reconcile in between."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx2

from builders import job
from kubetrain.api.common import ConditionStatus, ConditionType, JobStatus
from kubetrain.engine.admission import admit
from kubetrain.engine.conditions import update_conditions
from kubetrain.engine.types import Decision
from kubetrain.frameworks.registry import framework_for
from kubetrain.kube.act import Actor, Target
from kubetrain.kube.events import EventRecorder
from kubetrain.kube.metrics import OperatorMetrics
from kubetrain.kube.render import RenderSettings
from kubetrain.kube.runtime.expectations import Expectations

from .fakes import FakeApi

MPIJOB = admit(job("MPIJob", {"Launcher": 1, "Worker": 1}, name="j"))
STORED = {
    **MPIJOB.to_wire(),
    "metadata": {"name": "j", "namespace": "default", "uid": "u1", "resourceVersion": "7"},
}
COMPANIONS = {
    "/api/v1/namespaces/default/serviceaccounts",
    "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
    "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
}
PERIOD = 300.0
NOW = datetime(2026, 1, 1, tzinfo=UTC)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def actor(api: FakeApi, clock: FakeClock) -> Actor:
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(api.handle), base_url="https://api")
    return Actor(
        http,
        Expectations(),
        EventRecorder(http),
        OperatorMetrics(),
        RenderSettings(),
        companion_recheck_period=PERIOD,
        clock=clock,
    )


async def reconcile(acting: Actor) -> None:
    target = Target("default/j", STORED, MPIJOB, framework_for(MPIJOB))
    await acting.carry_out(target, Decision(status=MPIJOB.status))


def companion_posts(api: FakeApi) -> list[str]:
    return [path for method, path, _ in api.requests if method == "POST" and path in COMPANIONS]


async def test_the_first_reconcile_posts_the_launcher_service_account_role_and_role_binding() -> None:
    api = FakeApi()
    await reconcile(actor(api, FakeClock()))
    assert sorted(companion_posts(api)) == sorted(COMPANIONS)


async def test_reconciles_within_the_recheck_period_post_no_companion_again() -> None:
    api, clock = FakeApi(), FakeClock()
    acting = actor(api, clock)
    await reconcile(acting)
    api.requests.clear()
    clock.now += PERIOD - 1
    await reconcile(acting)
    assert companion_posts(api) == []


async def test_after_the_recheck_period_the_companions_are_posted_again_so_deleted_ones_return() -> None:
    api, clock = FakeApi(), FakeClock()
    acting = actor(api, clock)
    await reconcile(acting)
    api.requests.clear()
    clock.now += PERIOD
    await reconcile(acting)
    assert sorted(companion_posts(api)) == sorted(COMPANIONS)


async def test_existing_companions_answered_409_count_as_made() -> None:
    api, clock = FakeApi(409), FakeClock()
    acting = actor(api, clock)
    await reconcile(acting)
    api.requests.clear()
    api.status_code = 201
    await reconcile(acting)
    assert companion_posts(api) == []


async def test_a_failed_companion_post_is_retried_on_the_next_reconcile() -> None:
    api, clock = FakeApi(500), FakeClock()
    acting = actor(api, clock)
    await reconcile(acting)
    api.requests.clear()
    api.status_code = 201
    await reconcile(acting)
    assert sorted(companion_posts(api)) == sorted(COMPANIONS)


async def test_a_forgotten_job_is_new_again_so_its_record_does_not_outlive_it() -> None:
    api, clock = FakeApi(), FakeClock()
    acting = actor(api, clock)
    await reconcile(acting)
    api.requests.clear()
    acting.forget("u1")
    await reconcile(acting)
    assert sorted(companion_posts(api)) == sorted(COMPANIONS)


def failed(status: JobStatus) -> JobStatus:
    return update_conditions(
        status, ConditionType.FAILED, ConditionStatus.TRUE, "MPIJobMPIJobFailed", "x", NOW
    )


def config_writes(api: FakeApi) -> list[Any]:
    return [
        body
        for method, path, body in api.requests
        if method == "PUT" and path.endswith("/configmaps/j-config")
    ]


async def test_the_reconcile_that_fails_the_job_still_drops_a_failed_worker_from_discover_hosts() -> None:
    """Upstream rewrites discover_hosts.sh before its status rules fail the job."""
    api = FakeApi()
    target = Target("default/j", STORED, MPIJOB, framework_for(MPIJOB), running_hosts=())
    await actor(api, FakeClock()).carry_out(target, Decision(status=failed(MPIJOB.status)))
    assert [body["data"]["discover_hosts.sh"] for body in config_writes(api)] == ["#!/bin/sh"]


async def test_a_job_finished_before_the_reconcile_gets_no_companion_or_config_write() -> None:
    api = FakeApi()
    finished = MPIJOB.with_status(failed(MPIJOB.status))
    target = Target("default/j", STORED, finished, framework_for(finished))
    await actor(api, FakeClock()).carry_out(target, Decision(status=finished.status))
    assert not companion_posts(api)
    assert not config_writes(api)
