"""The list/watch source and the request rate limit (against a mock transport)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx2
import msgspec
import pytest
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.core_v1 import Pod

from kubetrain.kube.runtime.client import ApiListWatch, ApiStatusError, collection_path
from kubetrain.kube.runtime.http import TokenBucket
from kubetrain.kube.runtime.reflector import ResourceExpiredError
from kubetrain.kube.runtime.wire import KeptFields

from .fakes import FakeClock, settle

PodGroup = create_namespaced_resource("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups")


def mock_client(handler: Callable[[httpx2.Request], httpx2.Response]) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(base_url="https://cluster.test", transport=httpx2.MockTransport(handler))


def test_a_core_kind_lives_under_api_v1() -> None:
    assert collection_path(Pod, "team") == "/api/v1/namespaces/team/pods"


def test_without_a_namespace_the_path_covers_all_namespaces() -> None:
    assert collection_path(Pod) == "/api/v1/pods"


def test_a_custom_kind_lives_under_its_group() -> None:
    path = collection_path(PodGroup, "team")
    assert path == "/apis/scheduling.volcano.sh/v1beta1/namespaces/team/podgroups"


async def test_list_sends_the_page_size_continue_token_and_selectors() -> None:
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        body = {
            "metadata": {"resourceVersion": "42", "continue": "next"},
            "items": [{"metadata": {"name": "a"}}],
        }
        return httpx2.Response(200, json=body)

    source = ApiListWatch(mock_client(handler), Pod, namespace="team", label_selector="app=x")
    page = await source.list_page(limit=50, continue_token="abc")
    assert dict(seen[0].url.params) == {"labelSelector": "app=x", "limit": "50", "continue": "abc"}
    assert (page.resource_version, page.continue_token) == ("42", "next")
    assert page.items == [{"metadata": {"name": "a"}, "kind": "Pod", "apiVersion": "v1"}]


async def test_watch_asks_for_bookmarks_and_a_server_timeout_from_a_version() -> None:
    seen: list[httpx2.Request] = []
    lines = [
        {"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "43"}}},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "50"}}},
    ]

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, content="\n".join(json.dumps(line) for line in lines).encode())

    source = ApiListWatch(mock_client(handler), Pod, label_selector="app=x")
    events = [event async for event in source.watch(resource_version="42", timeout_seconds=300)]
    params = dict(seen[0].url.params)
    assert params == {
        "labelSelector": "app=x",
        "watch": "true",
        "allowWatchBookmarks": "true",
        "resourceVersion": "42",
        "timeoutSeconds": "300",
    }
    assert seen[0].url.path == "/api/v1/pods"
    assert [(event.type, event.object["metadata"]["resourceVersion"]) for event in events] == [
        ("ADDED", "43"),
        ("BOOKMARK", "50"),
    ]


async def test_a_list_holding_what_orjson_refuses_still_lists() -> None:
    # A lone surrogate escape in a tenant's annotation: one such object must not keep the cache from syncing.
    item = b'{"metadata": {"name": "a", "annotations": {"x": "\\udc00"}}}'
    body = b'{"metadata": {"resourceVersion": "7"}, "items": [' + item + b"]}"
    source = ApiListWatch(mock_client(lambda _: httpx2.Response(200, content=body)), Pod)
    page = await source.list_page(limit=10, continue_token=None)
    assert page.items[0]["metadata"]["annotations"] == {"x": "\udc00"}


def status(code: int, reason: str, message: str) -> httpx2.Response:
    return httpx2.Response(code, json={"kind": "Status", "code": code, "reason": reason, "message": message})


async def test_a_410_answer_to_a_watch_is_resource_expired() -> None:
    source = ApiListWatch(mock_client(lambda _: status(410, "Expired", "too old resource version")), Pod)
    with pytest.raises(ResourceExpiredError, match="too old"):
        await anext(aiter(source.watch(resource_version="1", timeout_seconds=300)))


async def test_an_error_answer_to_a_list_carries_the_server_message() -> None:
    source = ApiListWatch(mock_client(lambda _: status(403, "Forbidden", "pods is forbidden")), Pod)
    with pytest.raises(ApiStatusError, match="403 Forbidden: pods is forbidden") as caught:
        await source.list_page(limit=10, continue_token=None)
    assert caught.value.code == 403


async def test_the_bucket_lets_a_burst_through_then_paces_at_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=3, clock=clock)
    granted: list[float] = []

    async def request() -> None:
        await bucket.acquire()
        granted.append(clock.now - 1000)

    tasks = [asyncio.ensure_future(request()) for _ in range(5)]
    await settle()
    assert granted == [0, 0, 0]
    await clock.advance(0.1)
    assert len(granted) == 4
    await clock.advance(0.1)
    assert len(granted) == 5
    await asyncio.gather(*tasks)


async def test_a_zero_qps_bucket_never_waits() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=0, burst=0, clock=clock)
    for _ in range(100):
        await bucket.acquire()
    assert clock.now == 1000


def test_a_rate_limit_needs_a_burst_of_at_least_one() -> None:
    with pytest.raises(ValueError, match="kube-api-burst"):
        TokenBucket(qps=5, burst=0)


async def test_a_write_into_a_namespace_being_deleted_is_recognised_by_its_cause() -> None:
    def terminating(_: httpx2.Request) -> httpx2.Response:
        body = {
            "kind": "Status",
            "code": 403,
            "reason": "Forbidden",
            "message": "unable to create new content in namespace t because it is being terminated",
            "details": {"causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace"}]},
        }
        return httpx2.Response(403, json=body)

    source = ApiListWatch(mock_client(terminating), Pod)
    with pytest.raises(ApiStatusError) as caught:
        await source.list_page(limit=10, continue_token=None)
    assert caught.value.namespace_terminating


async def test_a_plain_forbidden_answer_is_not_a_terminating_namespace() -> None:
    source = ApiListWatch(mock_client(lambda _: status(403, "Forbidden", "pods is forbidden")), Pod)
    with pytest.raises(ApiStatusError) as caught:
        await source.list_page(limit=10, continue_token=None)
    assert not caught.value.namespace_terminating


class Named(msgspec.Struct):
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


def as_named(obj: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": obj["metadata"]["name"]}, "kind": obj["kind"], "general": True}


NAMED = KeptFields(Named, lambda item: {"metadata": {"name": item.metadata["name"]}}, as_named)


class Strict(msgspec.Struct, forbid_unknown_fields=True):
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


async def test_with_kept_fields_a_list_holds_what_is_kept_with_kind_and_api_version() -> None:
    body = {"metadata": {"resourceVersion": "7"}, "items": [{"metadata": {"name": "a", "uid": "u"}}]}
    source = ApiListWatch(mock_client(lambda _: httpx2.Response(200, json=body)), Pod, kept=NAMED)
    page = await source.list_page(limit=10, continue_token=None)
    assert page.items == [{"metadata": {"name": "a"}, "kind": "Pod", "apiVersion": "v1"}]


async def test_with_kept_fields_a_page_the_schema_refuses_is_kept_through_the_fallback() -> None:
    body = {"metadata": {"resourceVersion": "7"}, "items": [{"metadata": {"name": "a"}, "spec": 5}]}
    named = KeptFields(Strict, lambda item: {"metadata": item.metadata}, as_named)
    source = ApiListWatch(mock_client(lambda _: httpx2.Response(200, json=body)), Pod, kept=named)
    page = await source.list_page(limit=10, continue_token=None)
    assert page.items == [{"metadata": {"name": "a"}, "kind": "Pod", "general": True}]


async def test_with_kept_fields_watch_events_carry_what_is_kept() -> None:
    lines = [
        {"type": "ADDED", "object": {"kind": "Pod", "metadata": {"name": "a", "resourceVersion": "43"}}},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "50"}}},
    ]
    content = "\n".join(json.dumps(line) for line in lines).encode()
    source = ApiListWatch(mock_client(lambda _: httpx2.Response(200, content=content)), Pod, kept=NAMED)
    events = [event async for event in source.watch(resource_version="42", timeout_seconds=300)]
    assert [(e.type, e.object) for e in events] == [
        ("ADDED", {"metadata": {"name": "a"}}),
        ("BOOKMARK", {"metadata": {"resourceVersion": "50"}}),
    ]


def paged(
    pages: dict[str | None, tuple[list[str], str | None]], seen: list[str | None]
) -> httpx2.AsyncClient:
    """An API serving a list in pages: continue token -> (names, next token); records each token asked for."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        token = request.url.params.get("continue")
        seen.append(token)
        if token == "gone":
            return status(410, "Expired", "the continue token expired")
        names, following = pages[token]
        metadata: dict[str, Any] = {"resourceVersion": "7"}
        if following:
            metadata["continue"] = following
        body = {"kind": "PodList", "metadata": metadata, "items": [{"metadata": {"name": n}} for n in names]}
        return httpx2.Response(200, json=body)

    return mock_client(handler)


async def test_the_next_page_is_asked_for_before_this_one_is_returned() -> None:
    seen: list[str | None] = []
    source = ApiListWatch(paged({None: (["a"], "p2"), "p2": (["b"], None)}, seen), Pod)
    first = await source.list_page(limit=1, continue_token=None)
    await asyncio.sleep(0)  # the read-ahead's request is sent
    assert seen == [None, "p2"]
    second = await source.list_page(limit=1, continue_token=first.continue_token)
    assert [item["metadata"]["name"] for item in [*first.items, *second.items]] == ["a", "b"]
    assert seen == [None, "p2"], "the page read ahead is the one used, not asked for again"


async def test_a_page_other_than_the_one_read_ahead_is_asked_for_afresh() -> None:
    seen: list[str | None] = []
    source = ApiListWatch(paged({None: (["a"], "p2"), "p2": (["b"], None)}, seen), Pod)
    await source.list_page(limit=1, continue_token=None)
    again = await source.list_page(limit=1, continue_token=None)  # a new list, as after a 410
    assert [item["metadata"]["name"] for item in again.items] == ["a"]
    assert seen.count(None) == 2


async def test_a_read_ahead_page_that_failed_fails_when_it_is_asked_for() -> None:
    seen: list[str | None] = []
    source = ApiListWatch(paged({None: (["a"], "gone")}, seen), Pod)
    first = await source.list_page(limit=1, continue_token=None)
    with pytest.raises(ResourceExpiredError):
        await source.list_page(limit=1, continue_token=first.continue_token)


async def test_a_watch_drops_a_read_ahead_left_by_a_list_given_up() -> None:
    seen: list[str | None] = []
    pages = {None: (["a"], "p2"), "p2": (["b"], None)}

    def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.params.get("watch") == "true":
            return httpx2.Response(200, content=b"")
        token = request.url.params.get("continue")
        seen.append(token)
        names, following = pages[token]
        metadata = {"resourceVersion": "7", **({"continue": following} if following else {})}
        return httpx2.Response(
            200, json={"metadata": metadata, "items": [{"metadata": {"name": n}} for n in names]}
        )

    source = ApiListWatch(mock_client(handler), Pod)
    await source.list_page(limit=1, continue_token=None)
    await asyncio.sleep(0)  # the read-ahead's request is sent and answered
    assert [event async for event in source.watch(resource_version="7", timeout_seconds=60)] == []
    await source.list_page(limit=1, continue_token="p2")
    assert seen == [None, "p2", "p2"], "the page read ahead before the watch was not kept for later"
