"""Connecting to the API server, reading its errors, and listing and watching one kind as wire JSON.

lightkube reads the kubeconfig (or the in-cluster service account) and supplies TLS and credentials; the
requests themselves go through ``ApiSession`` (``http.py``), with client-side rate limits
(``--kube-api-qps`` / ``--kube-api-burst``, token buckets like client-go's: one for the objects, one of the
same size for Events) and one request counter (for metrics and benchmarks). Wire JSON rather than typed
objects: the reflector and the lease lock need watch bookmarks, 410 handling and exact control of the JSON,
which lightkube's watch does not give (ecosystem.md §1.2).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lightkube import KubeConfig
from lightkube.config.client_adapter import user_auth, verify_cluster
from lightkube.core.resource import Resource, api_info

from kubetrain.kube.runtime import wire
from kubetrain.kube.runtime.http import (
    ApiSession,
    Credentials,
    HttpApi,
    HttpResponse,
    RequestCounter,
    StreamResponse,
    TokenBucket,
)
from kubetrain.kube.runtime.reflector import ListPage, ResourceExpiredError, WatchEvent

DEFAULT_QPS = 200.0
DEFAULT_BURST = 400
"""A safety net, not a throttle: API Priority and Fairness (on by default since Kubernetes 1.20, GA in 1.29)
is what shares the API server between clients. It puts the operator's ServiceAccount in the
``service-accounts`` FlowSchema (priority level ``workload-low``), queues its requests there and answers 429
with Retry-After (which ``ApiSession`` honours) before it can crowd out another client. APF bounds the
requests in progress, not their rate: the client-side limit is what holds a reconcile loop gone wrong to a
rate fixed in advance on a control plane with seats to spare. 200 a second is about what one API server on
this project's 2-core machine takes from one client anyway (a 1,000-worker job's 2,002 creations: 14 s at 200,
11 s unlimited, 38 s at kube-scheduler's 50), and 10 to 40 times the peers' own limits (the training-operator
v1.9.0: 20 a second per kind; the mpi-operator v0.6.0: 5). docs/operations.md "The client-side request
limit" has the peers' settings and the reasoning. 0 turns the limit off."""
REQUEST_TIMEOUT_SECONDS = 10.0


NAMESPACE_TERMINATING = "NamespaceTerminating"
"""The cause of a 403 for a write into a namespace being deleted (metav1.StatusCause)."""


class ApiStatusError(Exception):
    """The API server answered with an error status."""

    def __init__(self, code: int, reason: str, message: str, causes: tuple[str, ...] = ()) -> None:
        super().__init__(f"{code} {reason}: {message}" if message else f"{code} {reason}")
        self.code = code
        self.reason = reason
        self.message = message
        """The server's own words (what client-go's ``StatusError.Error()`` says), without the code."""
        self.causes = causes

    @property
    def namespace_terminating(self) -> bool:
        """A write refused because its namespace is being deleted: nothing to retry or report, as client-go's
        event recorder and controllers treat it; the job goes with its namespace."""
        return NAMESPACE_TERMINATING in self.causes


def raise_for_status(response: HttpResponse | StreamResponse, body: bytes) -> None:
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
    details = status.get("details")
    causes = details.get("causes") if isinstance(details, dict) else None
    cause_reasons = tuple(
        str(cause.get("reason")) for cause in causes or () if isinstance(cause, dict) and cause.get("reason")
    )
    reason = str(status.get("reason") or response.reason_phrase)
    raise ApiStatusError(response.status_code, reason, message, cause_reasons)


@dataclass
class KubeClient:
    http: ApiSession
    """Requests by path with wire JSON, rate-limited and counted."""
    events: ApiSession
    """For posting Events: the same connections and counter under a rate limit of their own, as client-go's
    event recorder posts through a clientset of its own. A burst of events then never takes the tokens that
    the pod, service and status writes of a reconcile wait for."""
    requests: RequestCounter
    default_namespace: str

    async def aclose(self) -> None:
        await self.http.aclose()


def connect(
    kubeconfig: Path | None = None,
    *,
    context: str | None = None,
    qps: float = DEFAULT_QPS,
    burst: int = DEFAULT_BURST,
    timeout: float = REQUEST_TIMEOUT_SECONDS,
    user_agent: str | None = None,
) -> KubeClient:
    """A client for the cluster in ``kubeconfig`` (its current context, or ``context``); without a path, the
    in-cluster service account, else ``$KUBECONFIG``, else ``~/.kube/config``. ``user_agent`` goes with
    every request (aiohttp's own when None)."""
    loaded = KubeConfig.from_file(kubeconfig) if kubeconfig is not None else KubeConfig.from_env()
    config = loaded.get(context_name=context)
    if config is None:
        raise ValueError(f"kubeconfig {kubeconfig}: no context {context!r} (or no current-context)")
    assert config.user is not None
    counter = RequestCounter()
    http = ApiSession(
        config.cluster.server,
        tls=verify_cluster(config.cluster, config.user, config.abs_file),
        credentials=Credentials(user_auth(config.user), config.cluster.server),
        bucket=TokenBucket(qps, burst),
        counter=counter,
        timeout=timeout,
        user_agent=user_agent,
    )
    events = http.limited_by(TokenBucket(qps, burst))
    return KubeClient(http=http, events=events, requests=counter, default_namespace=config.namespace)


def collection_path(resource: type[Resource], namespace: str | None = None) -> str:
    """The URL path of a kind's collection, e.g. ``/api/v1/namespaces/ns/pods``; all namespaces when None."""
    info = api_info(resource)
    group_version = info.resource.api_version
    base = f"/api/{group_version}" if not info.resource.group else f"/apis/{group_version}"
    return f"{base}/namespaces/{namespace}/{info.plural}" if namespace else f"{base}/{info.plural}"


_LIST_HEAD_BYTES = 4096
_CONTINUE_TOKEN = re.compile(rb'"continue":\s*"([^"\\]+)"')


def _discard(request: asyncio.Future[HttpResponse]) -> None:
    """A read-ahead no one will await: cancelled, or its failure taken so that it is not reported."""
    if not request.done():
        request.cancel()
    elif not request.cancelled():
        request.exception()


class ApiListWatch:
    """List and watch one kind as raw JSON, narrowed to a namespace (None: all) and selectors; with ``kept``,
    each object decoded straight to what the cache keeps of it (``wire.KeptFields``)."""

    def __init__(
        self,
        http: HttpApi,
        resource: type[Resource],
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        kept: wire.KeptFields[Any] | None = None,
    ) -> None:
        self._http = http
        self._kept = kept
        self._ahead: tuple[str, asyncio.Future[HttpResponse]] | None = None
        """The next page of the list under way, asked for before this one was decoded: its token, request."""
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
        response = await self._page_response(limit, continue_token)
        raise_for_status(response, response.content)
        self._read_ahead(response.content, limit)
        page = self._kept.list_page(response.content) if self._kept is not None else None
        if page is None:
            body = wire.decode(response.content)
            metadata = body.get("metadata") or {}
            items: list[dict[str, Any]] = body.get("items") or []
            version, continue_token = str(metadata.get("resourceVersion", "")), metadata.get("continue")
        else:
            items, version, continue_token = page
        for item in items:
            # List items come without kind/apiVersion; give them what watch events carry.
            item.setdefault("kind", self._kind)
            item.setdefault("apiVersion", self._api_version)
        if page is None and self._kept is not None:
            items = [self._kept.fallback(item) for item in items]
        return ListPage(items, version, continue_token)

    async def _get_page(self, limit: int, continue_token: str | None) -> HttpResponse:
        params: dict[str, str | int] = {**self._selectors, "limit": limit}
        if continue_token:
            params["continue"] = continue_token
        return await self._http.get(self.path, params=params)

    async def _page_response(self, limit: int, continue_token: str | None) -> HttpResponse:
        """The page after ``continue_token``: the one asked for ahead when it is that one, else asked now."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            token, request = ahead
            if continue_token and token == continue_token:
                return await request
            _discard(request)
        return await self._get_page(limit, continue_token)

    def _read_ahead(self, content: bytes, limit: int) -> None:
        """Ask for the next page now, while this one is decoded and cached.

        A page of 500 pods is a few tens of milliseconds of the API server's work (reading its watch cache,
        encoding, compressing) on its own cores, and as long again of decoding here; asked for only once a
        page was decoded, the two took turns, each page waiting for the server (py-spy: a tenth of the
        start-up with 2,000 finished jobs was the event loop idle). The continue token is in the list's
        metadata, which the API server writes before its items: read from the first bytes, it needs no
        decoding. A token not found there (or not the one the page decodes to) only means no read-ahead."""
        head = content[:_LIST_HEAD_BYTES]
        items_at = head.find(b'"items"')
        match = _CONTINUE_TOKEN.search(head, 0, items_at) if items_at > 0 else None
        if match is not None:
            token = match.group(1).decode()
            self._ahead = (token, asyncio.ensure_future(self._get_page(limit, token)))

    async def watch(self, *, resource_version: str, timeout_seconds: int) -> AsyncGenerator[WatchEvent, None]:
        params: dict[str, str | int] = {
            **self._selectors,
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": timeout_seconds,
        }
        if self._ahead is not None:  # a list ended or was given up: its read-ahead is of no use
            _discard(self._ahead[1])
            self._ahead = None
        # No read timeout: the server ends the stream at timeoutSeconds, and the reflector's inactivity
        # watchdog catches a stream that silently died.
        async with self._http.stream("GET", self.path, params=params, timeout=None) as response:
            if response.status_code >= 400:
                raise_for_status(response, await response.aread())
            async for line in response.aiter_lines():
                if not line.strip():
                    continue
                if self._kept is not None:
                    yield WatchEvent(*self._kept.event(line))
                    continue
                event: dict[str, Any] = wire.decode(line)
                yield WatchEvent(str(event.get("type")), event.get("object") or {})
