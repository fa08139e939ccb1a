"""Client CPU per API request: the operator's aiohttp ``ApiSession`` against an httpx ``AsyncClient``.

Both POST the same small ConfigMaps to the running envtest, 16 in flight, with the same TLS context and
token, and the client process's CPU time (user + system) is divided by the requests. Runs alternate, so load
from elsewhere on the machine hits both alike. This is why ``kubetrain.kube.runtime.http`` uses aiohttp.

Usage (an envtest must be running: ``kubetrain envtest start``)::

    .venv/bin/python bench/http_client_cpu.py --requests 2000 --runs 3 --markdown
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import secrets
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2
from lightkube import KubeConfig
from lightkube.config.client_adapter import user_auth, verify_cluster
from operator_throughput import envtest_kubeconfig

from kubetrain.kube.runtime.client import connect, raise_for_status

CONCURRENCY = 16
Post = Callable[[str, dict[str, Any]], Awaitable[None]]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def config_map(name: str, namespace: str) -> dict[str, Any]:
    metadata = {"name": name, "namespace": namespace}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"payload": "x" * 500}}


async def timed(post: Post, namespace: str, requests: int) -> tuple[float, float]:
    """(requests/s, client CPU ms per request) for ``requests`` POSTs, CONCURRENCY in flight."""
    namespace_object = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    await post("/api/v1/namespaces", namespace_object)
    gate = asyncio.Semaphore(CONCURRENCY)
    path = f"/api/v1/namespaces/{namespace}/configmaps"

    async def one(index: int) -> None:
        async with gate:
            await post(path, config_map(f"cm-{index}", namespace))

    cpu, started = cpu_seconds(), time.monotonic()
    await asyncio.gather(*(one(index) for index in range(requests)))
    elapsed, spent = time.monotonic() - started, cpu_seconds() - cpu
    return requests / elapsed, spent * 1000 / requests


async def with_api_session(kubeconfig: Path, namespace: str, requests: int) -> tuple[float, float]:
    client = connect(kubeconfig, qps=0, burst=1, timeout=60)

    async def post(path: str, body: dict[str, Any]) -> None:
        response = await client.http.post(path, json=body)
        raise_for_status(response, response.content)

    try:
        return await timed(post, namespace, requests)
    finally:
        await client.http.delete(f"/api/v1/namespaces/{namespace}")
        await client.aclose()


async def with_httpx(kubeconfig: Path, namespace: str, requests: int) -> tuple[float, float]:
    config = KubeConfig.from_file(kubeconfig).get()
    assert config is not None and config.user is not None
    client = httpx2.AsyncClient(
        base_url=config.cluster.server,
        verify=verify_cluster(config.cluster, config.user, config.abs_file),
        auth=user_auth(config.user),
        timeout=60,
    )

    async def post(path: str, body: dict[str, Any]) -> None:
        response = await client.post(path, json=body)
        raise_for_status(response, response.content)

    try:
        return await timed(post, namespace, requests)
    finally:
        await client.delete(f"/api/v1/namespaces/{namespace}")
        await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--kubeconfig", type=Path, help="default: the running envtest's admin kubeconfig")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    kubeconfig = envtest_kubeconfig(args.kubeconfig)
    clients = {"aiohttp (ApiSession)": with_api_session, "httpx2 AsyncClient": with_httpx}
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in clients}
    for run in range(args.runs):
        for name, measure in clients.items():
            namespace = f"bench-http-{secrets.token_hex(3)}"
            rate, cpu = asyncio.run(measure(kubeconfig, namespace, args.requests))
            results[name].append((rate, cpu))
            print(f"run {run + 1}: {name}: {rate:.0f} requests/s, {cpu:.2f} ms CPU/request", file=sys.stderr)
    if args.markdown:
        print("| client | requests/s (median) | client CPU per request (median) |")
        print("|---|---|---|")
        for name, runs in results.items():
            rate = statistics.median(r for r, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            print(f"| {name} | {rate:.0f} | {cpu:.2f} ms |")


if __name__ == "__main__":
    main()
