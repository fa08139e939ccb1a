"""Helpers for the runtime's cluster tests: a connected client, and waiting on real-time conditions."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest_asyncio
from lightkube import AsyncClient, KubeConfig

from kubetrain.envtest.pytest_plugin import EnvtestCluster
from kubetrain.kube.runtime.client import connect
from kubetrain.kube.runtime.http import ApiSession, RequestCounter


async def eventually(
    condition: Callable[[], bool], *, within: float = 20.0, what: str = "condition"
) -> float:
    """Wait until ``condition()`` holds; returns the seconds it took; fails after ``within`` seconds."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > within:
            raise AssertionError(f"{what} did not happen within {within:g}s")
        await asyncio.sleep(0.05)
    return time.monotonic() - started


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
