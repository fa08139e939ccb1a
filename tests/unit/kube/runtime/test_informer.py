"""Informers: a kind's cache filled through the API, and waiting for every cache before reconciling."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest
from lightkube.resources.core_v1 import Pod, Service

from kubetrain.kube.runtime.informer import Informer, wait_for_sync


def serving(pods: list[dict[str, Any]]) -> httpx2.AsyncClient:
    """An API that lists ``pods`` and answers every watch with a stream that stays open and quiet."""

    async def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.params.get("watch") == "true":
            await asyncio.Event().wait()
        return httpx2.Response(200, json={"metadata": {"resourceVersion": "7"}, "items": pods})

    return httpx2.AsyncClient(base_url="https://cluster.test", transport=httpx2.MockTransport(handler))


async def test_an_informer_fills_its_store_from_the_list() -> None:
    pod = {"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "5"}}
    informer = Informer(serving([pod]), Pod, namespace="ns")
    task = asyncio.ensure_future(informer.run())
    try:
        await wait_for_sync([informer], timeout=5)
        assert informer.store.keys() == ["ns/a"]
        assert informer.store.resource_version == "7"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_waiting_for_caches_that_never_sync_names_them() -> None:
    pods = Informer(serving([]), Pod)
    services = Informer(serving([]), Service)
    pods.has_synced.set()
    with pytest.raises(TimeoutError, match=r"not synced after 0.01s: Service; check .* RBAC"):
        await wait_for_sync([pods, services], timeout=0.01)
