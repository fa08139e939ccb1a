"""ApiSession, the operator's HTTP client, against a real aiohttp server on loopback."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import pytest
import pytest_asyncio
from aiohttp import web
from lightkube.config.client_adapter import BearerAuth, BearerTokenFileAuth

from kubetrain.kube.runtime.http import (
    ApiSession,
    Credentials,
    NotLeadingError,
    RequestCounter,
    TokenBucket,
    proxy_for,
)

from .fakes import FakeClock, settle

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Server:
    url: str = ""
    seen: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)
    """(method, path with query, headers, body) of every request."""
    answer: Handler | None = None

    def session(self, auth: httpx2.Auth | None = None, counter: RequestCounter | None = None) -> ApiSession:
        return ApiSession(
            self.url,
            tls=ssl.create_default_context(),
            credentials=Credentials(auth, self.url),
            bucket=TokenBucket(qps=0, burst=0),
            counter=counter or RequestCounter(),
            timeout=5,
        )


@pytest_asyncio.fixture(name="server")
async def server_fixture() -> AsyncIterator[Server]:
    server = Server()

    async def handle(request: web.Request) -> web.StreamResponse:
        server.seen.append((request.method, request.path_qs, dict(request.headers), await request.read()))
        if server.answer is not None:
            return await server.answer(request)
        return web.json_response({"kind": "Status", "code": 200})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    server.url = f"http://127.0.0.1:{port}"
    try:
        yield server
    finally:
        await runner.cleanup()


async def test_a_json_body_is_sent_as_json_to_the_path_under_the_server(server: Server) -> None:
    session = server.session()
    response = await session.post("/api/v1/namespaces/a/pods", json={"kind": "Pod"})
    await session.aclose()
    method, path, headers, body = server.seen[0]
    assert (method, path, headers["Content-Type"], json.loads(body)) == (
        "POST",
        "/api/v1/namespaces/a/pods",
        "application/json",
        {"kind": "Pod"},
    )
    assert (response.status_code, response.json()) == (200, {"kind": "Status", "code": 200})


async def test_query_parameters_are_encoded(server: Server) -> None:
    session = server.session()
    await session.get("/api/v1/pods", params={"labelSelector": "a=b,c", "limit": 5})
    await session.aclose()
    assert server.seen[0][1] == "/api/v1/pods?labelSelector=a%3Db,c&limit=5"


async def test_a_patch_sends_the_given_bytes_and_content_type(server: Server) -> None:
    session = server.session()
    merge = {"Content-Type": "application/merge-patch+json"}
    await session.patch("/api/v1/namespaces/a/pods/p/status", content='{"status":{}}', headers=merge)
    await session.aclose()
    _, _, headers, body = server.seen[0]
    assert (headers["Content-Type"], body) == ("application/merge-patch+json", b'{"status":{}}')


async def test_every_request_carries_the_users_bearer_token(server: Server) -> None:
    session = server.session(auth=BearerAuth("s3cret"))
    await session.get("/api")
    await session.delete("/api/v1/namespaces/a/pods/p")
    await session.aclose()
    assert [headers["Authorization"] for _, _, headers, _ in server.seen] == ["Bearer s3cret"] * 2


async def test_a_401_rereads_a_rotated_token_file_and_retries_once(server: Server, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("old")

    async def answer(request: web.Request) -> web.StreamResponse:
        if request.headers["Authorization"] == "Bearer old":
            token_file.write_text("new")  # the kubelet rotated it meanwhile
            return web.json_response({"reason": "Unauthorized"}, status=401)
        return web.json_response({})

    server.answer = answer
    counter = RequestCounter()
    session = server.session(auth=BearerTokenFileAuth(str(token_file)), counter=counter)
    response = await session.get("/api")
    await session.aclose()
    assert response.status_code == 200
    assert [headers["Authorization"] for _, _, headers, _ in server.seen] == ["Bearer old", "Bearer new"]
    assert counter.total == 1


async def test_a_401_with_unchanged_credentials_is_answered_as_it_is(server: Server) -> None:
    async def answer(_: web.Request) -> web.StreamResponse:
        return web.json_response({"reason": "Unauthorized", "message": "no"}, status=401)

    server.answer = answer
    session = server.session(auth=BearerAuth("wrong"))
    response = await session.get("/api")
    await session.aclose()
    assert (response.status_code, response.reason_phrase, len(server.seen)) == (401, "Unauthorized", 1)


async def test_every_request_is_counted_by_method(server: Server) -> None:
    counter = RequestCounter()
    session = server.session(counter=counter)
    await session.get("/api/v1/pods")
    await session.get("/api/v1/pods")
    await session.post("/api/v1/namespaces/ns/pods", json={})
    async with session.stream("GET", "/api/v1/pods", params={"watch": "true"}) as streamed:
        await streamed.aread()
    await session.aclose()
    assert dict(counter.by_method) == {"GET": 3, "POST": 1}


async def test_a_stream_yields_whole_lines_however_the_bytes_arrive(server: Server) -> None:
    long_line = json.dumps({"type": "ADDED", "object": {"data": "x" * 300_000}})

    async def answer(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        payload = f'{{"type":"BOOKMARK"}}\n{long_line}\n{{"type":"DELETED"}}'.encode()
        for start in range(0, len(payload), 7_000):  # lines cut across chunks
            await response.write(payload[start : start + 7_000])
        await response.write_eof()
        return response

    server.answer = answer
    session = server.session()
    async with session.stream("GET", "/api/v1/pods", timeout=None) as streamed:
        lines = [line async for line in streamed.aiter_lines()]
    await session.aclose()
    assert [json.loads(line)["type"] for line in lines] == ["BOOKMARK", "ADDED", "DELETED"]
    assert lines[1] == long_line


async def test_a_429_is_retried_after_the_servers_retry_after_until_it_is_accepted(server: Server) -> None:
    answers = iter([429, 429, 201])

    async def throttle_twice(request: web.Request) -> web.StreamResponse:
        return web.json_response({"kind": "Status"}, status=next(answers), headers={"Retry-After": "0"})

    server.answer = throttle_twice
    counter = RequestCounter()
    session = server.session(counter=counter)
    response = await session.post("/api/v1/namespaces/a/pods", json={"kind": "Pod"})
    await session.aclose()
    assert (response.status_code, len(server.seen), counter.by_method["POST"]) == (201, 3, 3)


async def test_a_session_under_its_own_bucket_shares_the_counter_but_not_the_budget(server: Server) -> None:
    counter = RequestCounter()
    objects = ApiSession(
        server.url,
        tls=ssl.create_default_context(),
        credentials=Credentials(None, server.url),
        bucket=TokenBucket(qps=0.001, burst=1),  # one request, then the next token in 1000 s
        counter=counter,
        timeout=5,
    )
    events = objects.limited_by(TokenBucket(qps=0.001, burst=1))
    await objects.post("/api/v1/namespaces/a/pods", json={"kind": "Pod"})
    posted = await asyncio.wait_for(events.post("/api/v1/namespaces/a/events", json={"kind": "Event"}), 5)
    await objects.aclose()
    assert (posted.status_code, counter.total) == (200, 2)


def api_session(url: str) -> ApiSession:
    return ApiSession(
        url,
        tls=ssl.create_default_context(),
        credentials=Credentials(None, url),
        bucket=TokenBucket(qps=0, burst=0),
        counter=RequestCounter(),
        timeout=5,
    )


async def test_requests_go_through_the_proxy_the_environment_names(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", server.url)  # the test server plays the proxy
    session = api_session("http://apiserver.invalid:6443")  # a name no resolver knows
    await session.get("/api/v1/pods")
    await session.aclose()
    assert [(path, headers["Host"]) for _, path, headers, _ in server.seen] == [
        ("/api/v1/pods", "apiserver.invalid:6443")
    ]


def test_no_proxy_exempts_the_api_server_and_the_scheme_picks_the_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("no_proxy", "https_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("HTTP_PROXY", "http://plain-proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,.cluster.local,10.96.0.0/12")
    assert [
        proxy_for("https://10.0.0.1:6443"),
        proxy_for("http://10.0.0.1:8080"),
        proxy_for("https://api.cluster.local:6443"),
        proxy_for("https://localhost:6443"),
        proxy_for("https://10.96.0.1:443"),
    ] == ["http://proxy.example:3128", "http://plain-proxy.example:3128", None, None, None]


async def test_a_fenced_session_sends_writes_only_while_the_fence_allows_them(server: Server) -> None:
    leading = True
    counter = RequestCounter()
    session = server.session(counter=counter).fenced(lambda: leading)
    await session.post("/api/v1/namespaces/a/pods", json={"kind": "Pod"})
    leading = False
    for write in (
        session.post("/api/v1/namespaces/a/pods", json={"kind": "Pod"}),
        session.put("/api/v1/namespaces/a/pods/p", json={"kind": "Pod"}),
        session.patch("/api/v1/namespaces/a/pods/p", json={}),
        session.delete("/api/v1/namespaces/a/pods/p"),
    ):
        with pytest.raises(NotLeadingError, match="does not hold the leader Lease"):
            await write
    await session.aclose()
    assert [method for method, *_ in server.seen] == ["POST"]
    assert counter.total == 1, "a refused write was never sent, so it is not counted"


async def test_a_write_is_fenced_again_as_its_bytes_go_out_and_then_sends_nothing() -> None:
    # The last check is the one that counts: a write cleared before it waited for a connection, or before
    # the process was paused past its Lease, must not reach the wire when leadership is gone by then.
    received = bytearray()

    async def record(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.extend(await reader.read())
        writer.close()

    wire = await asyncio.start_server(record, "127.0.0.1", 0)
    port = wire.sockets[0].getsockname()[1]
    answers = iter([True, False])
    counter = RequestCounter()
    session = ApiSession(
        f"http://127.0.0.1:{port}",
        tls=ssl.create_default_context(),
        credentials=Credentials(None, f"http://127.0.0.1:{port}"),
        bucket=TokenBucket(qps=0, burst=0),
        counter=counter,
        timeout=5,
    ).fenced(lambda: next(answers))
    with pytest.raises(NotLeadingError, match="POST /api/v1/namespaces/a/pods not sent"):
        await session.post("/api/v1/namespaces/a/pods", json={"kind": "Pod"})
    await session.aclose()
    await settle()
    wire.close()
    await wire.wait_closed()
    assert bytes(received) == b"", "not even the request line or headers went out"
    assert counter.total == 0


async def test_a_fenced_delete_carries_empty_delete_options_for_its_check(server: Server) -> None:
    session = server.session().fenced(lambda: True)
    await session.delete("/api/v1/namespaces/a/pods/p")
    await session.aclose()
    method, _, headers, body = server.seen[0]
    assert (method, headers["Content-Type"], body) == ("DELETE", "application/json", b"{}")


async def test_a_fenced_session_still_reads(server: Server) -> None:
    session = server.session().fenced(lambda: False)
    response = await session.get("/api/v1/pods")
    async with session.stream("GET", "/api/v1/pods", params={"watch": "true"}) as streamed:
        await streamed.aread()
    await session.aclose()
    assert response.status_code == 200
    assert [method for method, *_ in server.seen] == ["GET", "GET"]


async def test_the_fence_is_asked_after_the_rate_limiters_wait(server: Server) -> None:
    # The token bucket can hold a write for seconds in a burst; leadership lost meanwhile must stop it.
    clock = FakeClock()
    leading = True
    session = ApiSession(
        server.url,
        tls=ssl.create_default_context(),
        credentials=Credentials(None, server.url),
        bucket=TokenBucket(qps=1, burst=1, clock=clock),
        counter=RequestCounter(),
        timeout=5,
    ).fenced(lambda: leading)
    await session.post("/api/v1/namespaces/a/pods", json={})
    waiting = asyncio.ensure_future(session.post("/api/v1/namespaces/a/pods", json={}))
    await settle()
    leading = False
    await clock.advance(1.0)
    with pytest.raises(NotLeadingError):
        await waiting
    await session.aclose()
    assert len(server.seen) == 1


async def test_a_throttled_write_is_fenced_again_before_its_retry(server: Server) -> None:
    leading = True

    async def throttle_and_lose_the_lease(request: web.Request) -> web.StreamResponse:
        nonlocal leading
        leading = False
        return web.json_response({"kind": "Status"}, status=429, headers={"Retry-After": "0"})

    server.answer = throttle_and_lose_the_lease
    session = server.session().fenced(lambda: leading)
    with pytest.raises(NotLeadingError):
        await session.post("/api/v1/namespaces/a/pods", json={})
    await session.aclose()
    assert len(server.seen) == 1


async def test_every_request_carries_the_sessions_user_agent(server: Server) -> None:
    session = ApiSession(
        server.url,
        tls=ssl.create_default_context(),
        credentials=Credentials(None, server.url),
        bucket=TokenBucket(qps=0, burst=0),
        counter=RequestCounter(),
        timeout=5,
        user_agent="kubetrain-operator/1.0 (host_1234)",
    )
    await session.get("/api")
    await session.fenced(lambda: True).post("/api/v1/namespaces/a/pods", json={})
    async with session.stream("GET", "/api/v1/pods") as streamed:
        await streamed.aread()
    endpoint = session.detached(
        TokenBucket(qps=0, burst=0), RequestCounter(), user_agent="kubetrain-operator/1.0 (host_1234) x"
    )
    await endpoint.get("/api")
    await endpoint.aclose()
    await session.aclose()
    agents = [headers["User-Agent"] for _, _, headers, _ in server.seen]
    assert agents == ["kubetrain-operator/1.0 (host_1234)"] * 3 + ["kubetrain-operator/1.0 (host_1234) x"]
