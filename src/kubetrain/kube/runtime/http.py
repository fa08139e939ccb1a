"""HTTP to the API server over aiohttp: every request the operator makes goes through ``ApiSession``.

Why not httpx, which lightkube uses: against envtest, 2,000 POSTs with 16 in flight cost httpx 1.0 to 1.4 ms
of client CPU per request and aiohttp 0.29 ms (``docs/benchmarks.md``). The operator makes about 18
requests per job, and under a 500-job burst httpx was two thirds of its CPU (py-spy), on the same two
cores the API server needs. kopf, the operator framework ecosystem.md has us imitate, made the same
choice (its own thin aiohttp client). lightkube still reads the kubeconfig and supplies TLS and credentials.

Callers see only the small ``HttpApi`` protocol, which httpx's ``AsyncClient`` satisfies too, so unit tests
serve it from httpx's ``MockTransport``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ipaddress
import json as jsonlib
import ssl
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
import httpx2
from aiohttp.abc import AbstractStreamWriter

from kubetrain.kube.runtime import wire
from kubetrain.kube.runtime.clock import Clock, LoopClock

QueryParams = Mapping[str, str | int]

MAX_THROTTLED_RETRIES = 10
"""How often a request answered 429 Too Many Requests is retried (client-go's default ``maxRetries``)."""
MAX_RETRY_AFTER_SECONDS = 10.0
DEFAULT_RETRY_AFTER_SECONDS = 1.0


WriteFence = Callable[[], bool]
"""Asked right before each write is sent; False refuses it (``NotLeadingError``). The leader's
``LeaderElector.holds_lease``."""

READ_METHODS = frozenset({"GET", "HEAD"})


class NotLeadingError(Exception):
    """A write was refused before it was sent: this replica does not hold the leader Lease now (it lost it, or
    was paused past its renew deadline). Only the leader acts; the write is the new leader's to make."""


def _retry_after(value: str | None) -> float:
    """Seconds from a Retry-After header (APF sends whole seconds), bounded; 1 s when absent or unreadable."""
    try:
        seconds = float(value) if value is not None else DEFAULT_RETRY_AFTER_SECONDS
    except ValueError:
        seconds = DEFAULT_RETRY_AFTER_SECONDS
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_SECONDS)


class HttpResponse(Protocol):
    @property
    def status_code(self) -> int: ...
    @property
    def reason_phrase(self) -> str: ...
    @property
    def content(self) -> bytes: ...
    def json(self) -> Any: ...


class StreamResponse(Protocol):
    @property
    def status_code(self) -> int: ...
    @property
    def reason_phrase(self) -> str: ...
    def aiter_lines(self) -> AsyncIterator[str]: ...
    async def aread(self) -> bytes: ...


class HttpApi(Protocol):
    """Requests to the API server by path (``/api/v1/...``), JSON bodies."""

    async def get(self, url: str, *, params: QueryParams | None = None) -> HttpResponse: ...
    async def post(self, url: str, *, json: Any = None) -> HttpResponse: ...
    async def put(self, url: str, *, json: Any = None) -> HttpResponse: ...
    async def patch(
        self,
        url: str,
        *,
        content: bytes | str | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> HttpResponse: ...
    async def delete(self, url: str) -> HttpResponse: ...
    async def request(self, method: str, url: str, *, json: Any = None) -> HttpResponse: ...
    def stream(
        self, method: str, url: str, *, params: QueryParams | None = None, timeout: float | None = None
    ) -> AbstractAsyncContextManager[StreamResponse]:
        """A response read as it arrives; ``timeout`` bounds the silence between reads (None: no bound)."""
        ...


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


@dataclass(frozen=True)
class ApiResponse:
    status_code: int
    reason_phrase: str
    content: bytes

    def json(self) -> Any:
        return wire.decode(self.content)


class _StreamedResponse:
    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status_code = response.status
        self.reason_phrase = response.reason or ""

    async def aread(self) -> bytes:
        return await self._response.read()

    async def aiter_lines(self) -> AsyncIterator[str]:
        # Split by hand: aiohttp's own readline refuses lines over its buffer size, and one watch event
        # (a job with large pod templates) can be longer than that.
        pending = bytearray()
        async for chunk in self._response.content.iter_any():
            pending.extend(chunk)
            end = pending.rfind(b"\n")
            if end < 0:
                continue
            complete = bytes(pending[:end])
            del pending[: end + 1]
            for line in complete.split(b"\n"):
                yield line.decode()
        if pending:
            yield pending.decode()


class Credentials:
    """The Authorization header that lightkube's auth for the kubeconfig user produces: worked out once, and
    again after a 401 (a rotated service-account token file, an expired exec-plugin token)."""

    def __init__(self, auth: httpx2.Auth | None, server: str) -> None:
        self.auth = auth
        self._server = server
        self._headers: dict[str, str] | None = None

    async def headers(self) -> dict[str, str]:
        if self._headers is None:
            self._headers = {}
            if self.auth is not None:
                flow = self.auth.async_auth_flow(httpx2.Request("GET", self._server))
                self._headers = _authorization(await flow.__anext__())
                await flow.aclose()
        return self._headers

    async def refresh(self) -> bool:
        """After a 401: whether the auth came up with different credentials, worth one more try."""
        if self.auth is None:
            return False
        flow = self.auth.async_auth_flow(httpx2.Request("GET", self._server))
        await flow.__anext__()
        try:
            retried = await flow.asend(httpx2.Response(401))
        except StopAsyncIteration:
            return False
        finally:
            await flow.aclose()
        refreshed = _authorization(retried)
        changed = refreshed != self._headers
        self._headers = refreshed
        return changed


def proxy_for(server: str) -> str | None:
    """The proxy to reach ``server`` through, from ``HTTPS_PROXY``/``HTTP_PROXY`` and ``NO_PROXY`` (either
    case), or None.

    Read once per connection pool, as client-go's ``ProxyFromEnvironment`` reads them once per process:
    aiohttp's ``trust_env`` re-read the environment, and ``~/.netrc`` in a worker thread, on every request,
    a sixth of the operator's CPU under a job burst (py-spy). The API server's address never changes, so
    neither does the answer.
    """
    parts = urllib.parse.urlsplit(server)
    proxies = urllib.request.getproxies_environment()
    if _bypassed(parts.hostname or "", proxies.get("no", "")):
        return None
    return proxies.get(parts.scheme)


def _bypassed(host: str, no_proxy: str) -> bool:
    """Whether ``NO_PROXY`` exempts ``host``, as Go's httpproxy reads it: ``*``, a domain with or without a
    leading dot (itself and its subdomains), an IP address or a CIDR block; ports are ignored."""
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for entry in (item.strip().lower() for item in no_proxy.split(",")):
        if entry == "*":
            return True
        if address is not None and "/" in entry:
            with contextlib.suppress(ValueError):
                if address in ipaddress.ip_network(entry, strict=False):
                    return True
            continue
        name = entry.rsplit(":", 1)[0] if entry.count(":") == 1 else entry
        name = name.lstrip(".")
        if name and (host.lower() == name or host.lower().endswith("." + name)):
            return True
    return False


def _authorization(request: httpx2.Request) -> dict[str, str]:
    value = request.headers.get("Authorization")
    return {"Authorization": value} if value else {}


class _Pool:
    """One aiohttp session (created on first use, inside the running loop), shared by the ApiSessions made
    from one another with ``limited_by``."""

    def __init__(self, server: str, tls: ssl.SSLContext, timeout: float) -> None:
        self.tls = tls
        self._server = server
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        self.proxy: str | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self.proxy = proxy_for(self._server)  # HTTPS_PROXY / NO_PROXY, as kubectl honours them
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self.tls),
                timeout=aiohttp.ClientTimeout(total=self._timeout),
                raise_for_status=False,
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class _FencedBody(aiohttp.BytesPayload):
    """A write's body that asks the fence as aiohttp writes it to the socket: the request's headers are held
    back to go out with the body, so a refusal here sends nothing, and nothing awaits between the answer
    and the bytes reaching the kernel. Asking any earlier leaves a window: a request cleared before it waits
    for a free connection, or before a paused process (SIGSTOP, a stalled VM) resumes, went out after the
    Lease had passed to another replica (the fault suite's paused leader saw two such creates)."""

    def __init__(self, value: bytes, fence: WriteFence, refusal: str, content_type: str) -> None:
        super().__init__(value, content_type=content_type)
        self._fence = fence
        self._refusal = refusal

    async def write_with_length(self, writer: AbstractStreamWriter, content_length: int | None) -> None:
        if not self._fence():
            # aiohttp closes the connection and raises ClientConnectionError with this as its cause.
            raise NotLeadingError(self._refusal)
        await super().write_with_length(writer, content_length)

    async def write(self, writer: AbstractStreamWriter) -> None:
        await self.write_with_length(writer, None)


class ApiSession:
    """``HttpApi`` over one aiohttp session (created on first use, inside the running loop), with the
    client-side rate limit and the request counter every request passes, and optionally a write fence."""

    def __init__(
        self,
        server: str,
        *,
        tls: ssl.SSLContext,
        credentials: Credentials,
        bucket: TokenBucket,
        counter: RequestCounter,
        timeout: float,
        user_agent: str | None = None,
    ) -> None:
        self._server = server.rstrip("/")
        self._credentials = credentials
        self._bucket = bucket
        self._counter = counter
        self._timeout = timeout
        self._pool = _Pool(self._server, tls, timeout)
        self.user_agent = user_agent
        """Sent with every request (aiohttp's own when None): the API server's audit log records it."""
        self._fence: WriteFence | None = None

    def _sharing_pool(self, bucket: TokenBucket) -> ApiSession:
        other = ApiSession(
            self._server,
            tls=self._pool.tls,
            credentials=self._credentials,
            bucket=bucket,
            counter=self._counter,
            timeout=self._timeout,
            user_agent=self.user_agent,
        )
        other._pool = self._pool
        other._fence = self._fence
        return other

    def limited_by(self, bucket: TokenBucket) -> ApiSession:
        """The same connections, credentials and counter under another rate limit: what client-go gets from
        a second clientset on one rest config (the event recorder's), without a second connection pool.
        Closing this session closes the one it was made from."""
        return self._sharing_pool(bucket)

    def fenced(self, fence: WriteFence) -> ApiSession:
        """The same session (connections, rate limit, counter) whose writes are each sent only if ``fence()``
        says so at that moment, else refused with ``NotLeadingError``; reads are never fenced.

        The fence is asked as the write's bytes go to the socket, after every wait (the rate limiter's, which
        can be seconds in a burst; a free connection's; a process paused past its Lease): nothing awaits
        between the answer and the write, so what a refused write leaves is a few microseconds of CPU."""
        other = self._sharing_pool(self._bucket)
        other._fence = fence
        return other

    def detached(
        self, bucket: TokenBucket, counter: RequestCounter, *, user_agent: str | None = None
    ) -> ApiSession:
        """The same server and credentials with connections, a rate limit and a counter of its own, and no
        fence: for work on another event loop (an aiohttp session belongs to the loop it was made on), such
        as the status endpoint's thread. ``user_agent`` replaces this session's."""
        return ApiSession(
            self._server,
            tls=self._pool.tls,
            credentials=Credentials(self._credentials.auth, self._server),
            bucket=bucket,
            counter=counter,
            timeout=self._timeout,
            user_agent=user_agent or self.user_agent,
        )

    def _connected(self) -> aiohttp.ClientSession:
        return self._pool.session()

    async def aclose(self) -> None:
        await self._pool.aclose()

    async def get(self, url: str, *, params: QueryParams | None = None) -> HttpResponse:
        return await self._send("GET", url, params=params)

    async def post(self, url: str, *, json: Any = None) -> HttpResponse:
        return await self._send("POST", url, body=json)

    async def put(self, url: str, *, json: Any = None) -> HttpResponse:
        return await self._send("PUT", url, body=json)

    async def patch(
        self,
        url: str,
        *,
        content: bytes | str | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> HttpResponse:
        if content is not None:
            raw = content.encode() if isinstance(content, str) else content
            return await self._send("PATCH", url, raw=raw, headers=headers)
        return await self._send("PATCH", url, body=json, headers=headers)

    async def delete(self, url: str) -> HttpResponse:
        return await self._send("DELETE", url)

    async def request(self, method: str, url: str, *, json: Any = None) -> HttpResponse:
        return await self._send(method, url, body=json)

    async def _send(
        self,
        method: str,
        url: str,
        *,
        params: QueryParams | None = None,
        body: Any = None,
        raw: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> ApiResponse:
        if body is not None:
            raw = jsonlib.dumps(body).encode()
            headers = {"Content-Type": "application/json", **(headers or {})}
        fence = None if method in READ_METHODS else self._fence
        if fence is not None and raw is None:
            # An empty DeleteOptions (the API server's default for a DELETE without a body), so that the
            # fence can be asked as the bytes are written: see _FencedBody.
            raw = b"{}"
            headers = {"Content-Type": "application/json", **(headers or {})}
        await self._bucket.acquire()
        session = self._connected()
        retried = False
        throttled = 0
        counted = False
        while True:
            sent = {**self._identified(headers), **await self._credentials.headers()}
            refusal = f"{method} {url} not sent: this replica does not hold the leader Lease"
            # For each attempt, after every wait: a write cleared before the rate limiter's or a 429's wait is
            # not cleared after it. Asked here too so that a refused write takes no connection.
            if fence is not None and not fence():
                raise NotLeadingError(refusal)
            if not counted:
                self._counter.by_method[method] += 1
                counted = True
            data: bytes | aiohttp.Payload | None = raw
            if fence is not None and raw is not None:
                data = _FencedBody(raw, fence, refusal, sent.get("Content-Type", "application/json"))
            try:
                async with session.request(
                    method, self._server + url, params=params, data=data, headers=sent, proxy=self._pool.proxy
                ) as response:
                    content = await response.read()
                    answer = ApiResponse(response.status, response.reason or "", content)
                    retry_after = _retry_after(response.headers.get("Retry-After"))
            except aiohttp.ClientConnectionError as error:
                if isinstance(error.__cause__, NotLeadingError):
                    self._counter.by_method[method] -= 1
                    raise error.__cause__ from None
                raise
            if answer.status_code == 429 and throttled < MAX_THROTTLED_RETRIES:
                # API Priority and Fairness rejected it (its queues for this flow are full): wait as the
                # server asks and try again, as client-go does, rather than fail the reconcile.
                throttled += 1
                await asyncio.sleep(retry_after)
                await self._bucket.acquire()
                counted = False
                continue
            if answer.status_code != 401 or retried or not await self._credentials.refresh():
                return answer
            retried = True

    def _identified(self, headers: Mapping[str, str] | None) -> dict[str, str]:
        if self.user_agent is None:
            return dict(headers or {})
        return {"User-Agent": self.user_agent, **(headers or {})}

    @asynccontextmanager
    async def stream(
        self, method: str, url: str, *, params: QueryParams | None = None, timeout: float | None = None
    ) -> AsyncIterator[StreamResponse]:
        await self._bucket.acquire()
        self._counter.by_method[method] += 1
        limits = aiohttp.ClientTimeout(total=None, sock_connect=self._timeout, sock_read=timeout)
        headers = {**self._identified(None), **await self._credentials.headers()}
        session = self._connected()
        async with session.request(
            method, self._server + url, params=params, headers=headers, timeout=limits, proxy=self._pool.proxy
        ) as response:
            yield _StreamedResponse(response)
