"""The endpoint's CA in one ConfigMap per namespace with jobs: published before a job's pods, kept current
when the CA changes, put back when deleted, and not rewritten while it is right."""

from __future__ import annotations

import asyncio

from kubetrain.kube.status.ca_bundle import RECHECK_PERIOD, CaPublisher

from .fakes import ObjectApi

PATH = "/api/v1/namespaces/team/configmaps/kubetrain-status-ca"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_a_namespace_gets_the_bundle_before_its_first_pods() -> None:
    api = ObjectApi()
    publisher = CaPublisher(api.client())
    publisher.set_bundle("CA-1")
    await publisher.ensure("team")
    config_map = api.objects[PATH]
    assert config_map["data"] == {"ca.crt": "CA-1"}
    assert config_map["metadata"]["labels"]["app.kubernetes.io/component"] == "status-endpoint"


async def test_nothing_is_published_before_the_credentials_are_loaded() -> None:
    api = ObjectApi()
    await CaPublisher(api.client()).ensure("team")
    assert api.requests == []


async def test_a_namespace_already_published_costs_nothing_until_the_recheck_period() -> None:
    api, clock = ObjectApi(), Clock()
    publisher = CaPublisher(api.client(), clock=clock)
    publisher.set_bundle("CA-1")
    await publisher.ensure("team")
    api.requests.clear()
    for _ in range(10):
        await publisher.ensure("team")
    assert api.requests == []
    clock.now += RECHECK_PERIOD
    await publisher.ensure("team")
    assert [m for m, _, _ in api.requests] == ["GET"], "checked, found right, not written"


async def test_a_deleted_config_map_is_back_after_the_recheck_period() -> None:
    api, clock = ObjectApi(), Clock()
    publisher = CaPublisher(api.client(), clock=clock)
    publisher.set_bundle("CA-1")
    await publisher.ensure("team")
    del api.objects[PATH]
    clock.now += RECHECK_PERIOD
    await publisher.ensure("team")
    assert api.objects[PATH]["data"] == {"ca.crt": "CA-1"}


async def test_a_new_bundle_replaces_the_old_under_its_resource_version() -> None:
    api = ObjectApi()
    publisher = CaPublisher(api.client())
    publisher.set_bundle("CA-1")
    await publisher.ensure("team")
    version = api.objects[PATH]["metadata"]["resourceVersion"]
    publisher.set_bundle("CA-1CA-2")
    await publisher.ensure("team")
    [(_, _, body)] = api.calls("PUT")
    assert body["metadata"]["resourceVersion"] == version
    assert api.objects[PATH]["data"] == {"ca.crt": "CA-1CA-2"}


async def test_the_leader_publishes_to_every_namespace_with_jobs_and_again_on_a_change() -> None:
    api = ObjectApi()
    publisher = CaPublisher(api.client())
    publisher.set_bundle("CA-1")
    following = asyncio.ensure_future(publisher.follow(lambda: ["a", "b", "a"]))
    await asyncio.sleep(0.05)
    publisher.set_bundle("CA-2")
    await asyncio.sleep(0.05)
    following.cancel()
    for namespace in ("a", "b"):
        stored = api.objects[f"/api/v1/namespaces/{namespace}/configmaps/kubetrain-status-ca"]
        assert stored["data"] == {"ca.crt": "CA-2"}
    assert publisher.writes == 4


async def test_many_workers_creating_pods_in_one_namespace_publish_once() -> None:
    api = ObjectApi()
    publisher = CaPublisher(api.client())
    publisher.set_bundle("CA-1")
    await asyncio.gather(*(publisher.ensure("team") for _ in range(10)))
    assert len(api.calls("POST")) == 1 and len(api.calls("GET")) == 1


async def test_namespaces_without_jobs_any_more_are_forgotten() -> None:
    api = ObjectApi()
    publisher = CaPublisher(api.client())
    publisher.set_bundle("CA-1")
    with_jobs = ["a", "b"]
    following = asyncio.ensure_future(publisher.follow(lambda: list(with_jobs)))
    await asyncio.sleep(0.05)
    with_jobs.remove("a")
    publisher.set_bundle("CA-2")
    await asyncio.sleep(0.05)
    following.cancel()
    assert set(publisher._published) == {"b"}


async def test_a_config_map_of_that_name_that_is_not_the_operators_is_never_written_over() -> None:
    api = ObjectApi()
    theirs = {"metadata": {"name": "kubetrain-status-ca", "namespace": "team"}, "data": {"ca.crt": "MINE"}}
    api.put_object(PATH, theirs)
    publisher = CaPublisher(api.client())
    publisher.set_bundle("CA-1")
    await publisher.ensure("team")
    assert api.objects[PATH]["data"] == {"ca.crt": "MINE"}
    assert api.calls("PUT") == []
