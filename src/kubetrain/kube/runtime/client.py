"""Connecting to the API server, reading its errors, and listing and watching one kind as wire JSON.

lightkube reads the kubeconfig (or the in-cluster service account) and supplies TLS and credentials; the
requests themselves go through ``ApiSession`` (``http.py``), with client-side rate limits
(``--kube-api-qps`` / ``--kube-api-burst``, token buckets like client-go's: one for the objects, one of the
same size for Events) and one request counter (for metrics and benchmarks). Wire JSON rather than typed
objects: the reflector and the lease lock need watch bookmarks, 410 handling and exact control of the JSON,
which lightkube's watch does not give (ecosystem.md §1.2).
"""

from __future__ import annotations

import json
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
with Retry-After (which ``ApiSession`` honours) before it can crowd out another client; and the operator
never has more than ``act.MAX_IN_FLIGHT`` (32) writes in flight, which bounds the seats it can take. A limit
of 50 (kube-scheduler's) made a 1,000-worker job's 2,002 creations take 38 s where the API server took them
in 11 s unlimited and 14 s at 200 (``bench/big_job.py``, docs/benchmarks.md): the limit, not the server,
was the bottleneck. 200 requests/s is about what one API server on this project's 2-core machine takes
from one client anyway, so it costs a big job little, while a reconcile loop gone wrong is still held to a
rate that cannot flood etcd or the audit log. 0 turns the limit off."""
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


class ApiListWatch:
    """List and watch one kind as raw JSON, narrowed to a namespace (None: all) and selectors."""

    def __init__(
        self,
        http: HttpApi,
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
        body = wire.decode(response.content)
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
        async with self._http.stream("GET", self.path, params=params, timeout=None) as response:
            if response.status_code >= 400:
                raise_for_status(response, await response.aread())
            async for line in response.aiter_lines():
                if line.strip():
                    event: dict[str, Any] = wire.decode(line)
                    yield WatchEvent(str(event.get("type")), event.get("object") or {})
