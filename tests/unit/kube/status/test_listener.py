"""The endpoint's listener: TLS with a bound on open connections (each costs asyncio about 300 KB), one over
the bound closed before any TLS state is made for it, and refused requests closing theirs."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from kubetrain.kube.status.listener import BoundedListener
from kubetrain.progress.credentials import issue

TLS = issue(["127.0.0.1"])
HANDSHAKE_TIMEOUT = 0.5


async def answer(request: web.Request) -> web.Response:
    return web.Response(status=int(request.query.get("status", "200")), text="ok")


@pytest.fixture
async def listener() -> AsyncIterator[BoundedListener]:
    app = web.Application()
    app.router.add_get("/", answer)
    serving = BoundedListener(app, TLS.server_context(), limit=2, handshake_timeout=HANDSHAKE_TIMEOUT)
    await serving.start("127.0.0.1", 0)
    yield serving
    await serving.stop()


def client_context() -> ssl.SSLContext:
    return ssl.create_default_context(cadata=TLS.ca_cert)


async def open_tls(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port, ssl=client_context(), server_hostname="127.0.0.1")


async def get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, status: int = 200) -> bytes:
    writer.write(f"GET /?status={status} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    return await reader.readuntil(b"ok")


async def wait_for(predicate: object, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():  # type: ignore[operator]
        assert loop.time() < deadline
        await asyncio.sleep(0.01)


async def test_requests_are_served_over_tls(listener: BoundedListener) -> None:
    reader, writer = await open_tls(listener.port)
    assert (await get(reader, writer)).startswith(b"HTTP/1.1 200")
    writer.close()


async def test_a_connection_over_the_bound_is_closed_at_once_and_counted(listener: BoundedListener) -> None:
    held = []
    for _ in range(2):
        held.append(await open_tls(listener.port))
        await wait_for(lambda: listener.refresh_counts().open == len(held))
    reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)  # plain TCP: no TLS at all
    assert await asyncio.wait_for(reader.read(1), 5) == b"", "closed before any TLS"
    writer.close()
    assert listener.counts.refused == 1
    for _, writer in held:
        writer.close()
    await wait_for(lambda: listener.refresh_counts().open == 0)
    reader, writer = await open_tls(listener.port)
    assert (await get(reader, writer)).startswith(b"HTTP/1.1 200"), "a place freed is taken again"
    writer.close()


async def test_a_refused_request_closes_its_connection(listener: BoundedListener) -> None:
    reader, writer = await open_tls(listener.port)
    assert b"Connection: close" in await get(reader, writer, 429)
    assert await reader.read() == b""
    await wait_for(lambda: listener.refresh_counts().open == 0)


async def test_a_client_that_never_finishes_its_handshake_holds_no_place_for_long(
    listener: BoundedListener,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)  # says nothing
    await wait_for(lambda: listener.refresh_counts().open == 1)
    await wait_for(lambda: listener.refresh_counts().open == 0, timeout=HANDSHAKE_TIMEOUT + 2)
    assert await asyncio.wait_for(reader.read(1), 5) == b""
    writer.close()


async def test_an_address_in_use_is_an_os_error_at_start(listener: BoundedListener) -> None:
    other = BoundedListener(web.Application(), TLS.server_context())
    with pytest.raises(OSError):
        await other.start("127.0.0.1", listener.port)
