"""Helpers for the runtime's cluster tests: a connected client, and waiting on real-time conditions."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest_asyncio
from lightkube import AsyncClient, KubeConfig

from kubetrain.envtest.pytest_plugin import EnvtestCluster
from kubetrain.kube.runtime.client import connect
from kubetrain.kube.runtime.http import ApiSession, RequestCounter
from waiting import eventually_async


async def eventually(condition: Callable[[], bool], *, what: str = "condition") -> None:
    """Wait until ``condition()`` holds, sleeping without blocking the loop that makes it hold."""

    async def holds() -> bool:
        return condition()

    await eventually_async(holds, what)


@dataclass
class ClusterClient:
    """The runtime's client for the envtest cluster, and lightkube's typed one to make what it watches."""

    http: ApiSession
    requests: RequestCounter
    api: AsyncClient


@pytest_asyncio.fixture(name="kube")
async def kube_client_fixture(envtest: EnvtestCluster) -> AsyncIterator[ClusterClient]:
    """Per test: each test has its own event loop."""
    client = connect(envtest.kubeconfig)
    typed = AsyncClient(KubeConfig.from_file(envtest.kubeconfig))
    try:
        yield ClusterClient(client.http, client.requests, typed)
    finally:
        await client.aclose()
        await typed.close()


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
