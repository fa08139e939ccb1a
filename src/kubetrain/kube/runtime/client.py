"""Connecting to the API server: lightkube's AsyncClient for typed calls, plus a raw client for wire JSON.

Both share one transport, so they share one connection pool, one client-side rate limit (``--kube-api-qps`` /
``--kube-api-burst``, a token bucket like client-go's) and one request counter (for metrics and benchmarks).
The raw client serves the reflector and the lease lock: they need watch bookmarks, 410 handling and exact
control of the JSON, which lightkube's watch does not give (ecosystem.md §1.2).
"""

from __future__ import annotations

import collections
import json
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from lightkube import AsyncClient, KubeConfig
from lightkube.config.client_adapter import user_auth, verify_cluster
from lightkube.core.resource import Resource, api_info

from kubetrain.kube.runtime.clock import Clock, LoopClock
from kubetrain.kube.runtime.reflector import ListPage, ResourceExpiredError, WatchEvent

DEFAULT_QPS = 20.0
DEFAULT_BURST = 30
REQUEST_TIMEOUT_SECONDS = 10.0


class ApiStatusError(Exception):
    """The API server answered with an error status."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(f"{code} {reason}: {message}" if message else f"{code} {reason}")
        self.code = code
        self.reason = reason


def raise_for_status(response: httpx2.Response, body: bytes) -> None:
    """Turn an error response into ResourceExpiredError (410) or ApiStatusError, with the server's message."""
    if response.status_code < 400:
        return
    try:
        status = json.loads(body)
    except ValueError:
        status = {}
    message = str(status.get("message") or body[:200].decode(errors="replace"))
    if response.status_code == 410:
        raise ResourceExpiredError(message)
    raise ApiStatusError(response.status_code, str(status.get("reason") or response.reason_phrase), message)


class TokenBucket:
    """Allows ``burst`` requests at once and ``qps`` per second after that; qps <= 0 means unlimited."""

    def __init__(self, qps: float, burst: int, *, clock: Clock | None = None) -> None:
        if qps > 0 and burst < 1:
            raise ValueError("--kube-api-burst must be at least 1 when --kube-api-qps is set")
        self._qps = qps
        self._burst = float(max(burst, 1))
        self._clock = clock or LoopClock()
        self._tokens = self._burst
        self._updated = self._clock.monotonic()

    async def acquire(self) -> None:
        if self._qps <= 0:
            return
        now = self._clock.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._updated) * self._qps)
        self._updated = now
        # Take the token now (possibly going negative) so concurrent callers queue up in order.
        self._tokens -= 1
        if self._tokens < 0:
            await self._clock.sleep(-self._tokens / self._qps)


@dataclass
class RequestCounter:
    """API requests sent, by HTTP method (a watch counts once, when it is opened)."""

    by_method: collections.Counter[str] = field(default_factory=collections.Counter)

    @property
    def total(self) -> int:
        return sum(self.by_method.values())


class ThrottledTransport(httpx2.AsyncBaseTransport):
    def __init__(
        self, inner: httpx2.AsyncBaseTransport, bucket: TokenBucket, counter: RequestCounter
    ) -> None:
        self._inner = inner
        self._bucket = bucket
        self._counter = counter
        self._closed = False

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        await self._bucket.acquire()
        self._counter.by_method[request.method] += 1
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        # Both clients close the shared transport; the pool must be closed once.
        if not self._closed:
            self._closed = True
            await self._inner.aclose()


@dataclass
class KubeClient:
    api: AsyncClient
    """lightkube, for typed create/patch/delete."""
    http: httpx2.AsyncClient
    """Raw requests (base URL and credentials set), for wire JSON."""
    requests: RequestCounter
    default_namespace: str

    async def aclose(self) -> None:
        await self.api.close()
        await self.http.aclose()


def connect(
    kubeconfig: Path | None = None,
    *,
    context: str | None = None,
    qps: float = DEFAULT_QPS,
    burst: int = DEFAULT_BURST,
    timeout: float = REQUEST_TIMEOUT_SECONDS,
) -> KubeClient:
    """A client for the cluster in ``kubeconfig`` (its current context, or ``context``); without a path, the
    in-cluster service account, else ``$KUBECONFIG``, else ``~/.kube/config``."""
    loaded = KubeConfig.from_file(kubeconfig) if kubeconfig is not None else KubeConfig.from_env()
    config = loaded.get(context_name=context)
    if config is None:
        raise ValueError(f"kubeconfig {kubeconfig}: no context {context!r} (or no current-context)")
    assert config.user is not None
    tls = verify_cluster(config.cluster, config.user, config.abs_file)
    counter = RequestCounter()
    transport = ThrottledTransport(httpx2.AsyncHTTPTransport(verify=tls), TokenBucket(qps, burst), counter)
    limits = httpx2.Timeout(timeout)
    api = AsyncClient(config, timeout=limits, transport=transport)
    http = httpx2.AsyncClient(
        base_url=config.cluster.server, auth=user_auth(config.user), timeout=limits, transport=transport
    )
    return KubeClient(api=api, http=http, requests=counter, default_namespace=config.namespace)


def collection_path(resource: type[Resource], namespace: str | None = None) -> str:
    """The URL path of a kind's collection, e.g. ``/api/v1/namespaces/ns/pods``; all namespaces when None."""
    info = api_info(resource)
    group_version = info.resource.api_version
    base = f"/api/{group_version}" if not info.resource.group else f"/apis/{group_version}"
    return f"{base}/namespaces/{namespace}/{info.plural}" if namespace else f"{base}/{info.plural}"


class ApiListWatch:
    """List and watch one kind as raw JSON, narrowed to a namespace (None: all) and selectors."""

    def __init__(
        self,
        http: httpx2.AsyncClient,
        resource: type[Resource],
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> None:
        self._http = http
        info = api_info(resource)
        self._kind = str(info.resource.kind)
        self._api_version = str(info.resource.api_version)
        self.path = collection_path(resource, namespace)
        self._selectors = {
            key: value
            for key, value in (("labelSelector", label_selector), ("fieldSelector", field_selector))
            if value
        }

    async def list_page(self, *, limit: int, continue_token: str | None) -> ListPage:
        params: dict[str, str | int] = {**self._selectors, "limit": limit}
        if continue_token:
            params["continue"] = continue_token
        response = await self._http.get(self.path, params=params)
        raise_for_status(response, response.content)
        body = response.json()
        for item in body.get("items") or []:
            # List items come without kind/apiVersion; give them what watch events carry.
            item.setdefault("kind", self._kind)
            item.setdefault("apiVersion", self._api_version)
        metadata = body.get("metadata") or {}
        version = str(metadata.get("resourceVersion", ""))
        return ListPage(body.get("items") or [], version, metadata.get("continue"))

    async def watch(self, *, resource_version: str, timeout_seconds: int) -> AsyncGenerator[WatchEvent, None]:
        params: dict[str, str | int] = {
            **self._selectors,
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": timeout_seconds,
        }
        # No read timeout: the server ends the stream at timeoutSeconds, and the reflector's inactivity
        # watchdog catches a stream that silently died.
        timeout = httpx2.Timeout(REQUEST_TIMEOUT_SECONDS, read=None)
        async with self._http.stream("GET", self.path, params=params, timeout=timeout) as response:
            if response.status_code >= 400:
                raise_for_status(response, await response.aread())
            async for line in response.aiter_lines():
                if line.strip():
                    event: dict[str, Any] = json.loads(line)
                    yield WatchEvent(str(event.get("type")), event.get("object") or {})
