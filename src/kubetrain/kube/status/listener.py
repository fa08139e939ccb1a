"""The endpoint's TLS listener, with a bound on open connections so that no number of clients can grow the
operator's memory without bound.

Each TLS connection costs asyncio about 300 KB while it is open (a 256 KiB read buffer per SSL protocol,
Python 3.11 to 3.13), so a thousand pods holding a connection each would cost 300 MB. Connections are
accepted here, not by ``loop.create_server``, so that one over ``MAX_CONNECTIONS`` is closed before any TLS
state is made for it (the client sees the connection closed and tries again later, as it would after a
429), and the TLS handshake of each is bounded in time. Refused requests (4xx, 5xx) close their connection
too: a client being refused frees its place instead of holding it, and a handshake per refused request is
the price a misbehaving reporter pays, not the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Handler

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 128
"""Open connections at once: about 40 MB of TLS buffers at most. A thousand pods reporting every second on a
fresh connection each (urllib's way) need a few dozen open at a time while the operator keeps up; when it
does not, the bound sheds the excess instead of queueing it in memory (``bench/status_endpoint.py``: the
operator's RSS rose by 85 MB under such a flood at 128, by 340 MB without a bound)."""
HANDSHAKE_TIMEOUT = 10.0
KEEPALIVE_TIMEOUT = 5.0
"""Seconds an idle kept-alive connection stays open (aiohttp's default is 75)."""


@dataclass
class ConnectionCounts:
    open: int = 0
    """Connections open now (in their handshake, or handed to aiohttp)."""
    accepted: int = 0
    refused: int = 0
    """Connections closed at once because ``MAX_CONNECTIONS`` were open."""


@web.middleware
async def _close_refused(request: web.Request, handler: Handler) -> web.StreamResponse:
    response = await handler(request)
    if response.status >= 400:
        response.force_close()
    return response


class BoundedListener:
    """Serve an aiohttp application over TLS on ``host:port`` with at most ``limit`` connections open."""

    def __init__(
        self,
        app: web.Application,
        context: ssl.SSLContext,
        *,
        limit: int = MAX_CONNECTIONS,
        handshake_timeout: float = HANDSHAKE_TIMEOUT,
    ) -> None:
        app.middlewares.append(_close_refused)
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, keepalive_timeout=KEEPALIVE_TIMEOUT
        )
        self._context = context
        self._limit = limit
        self._handshake_timeout = handshake_timeout
        self._socket: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._starting: set[asyncio.Task[None]] = set()
        self._handshaking = 0
        self._transports: set[asyncio.BaseTransport] = set()
        self.counts = ConnectionCounts()

    def refresh_counts(self) -> ConnectionCounts:
        """The counts, ``open`` as of now."""
        self.counts.open = self._open()
        return self.counts

    @property
    def port(self) -> int:
        assert self._socket is not None
        return int(self._socket.getsockname()[1])

    async def start(self, host: str, port: int) -> None:
        """Bind and listen (``OSError`` when the address is taken), then accept in the background."""
        await self._runner.setup()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((host, port))
            listener.listen(self._limit)
            listener.setblocking(False)
        except OSError:
            listener.close()
            await self._runner.cleanup()
            raise
        self._socket = listener
        self._accepting = asyncio.ensure_future(self._accept())

    async def stop(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._accepting
        for task in list(self._starting):
            task.cancel()
        await asyncio.gather(*self._starting, return_exceptions=True)
        if self._socket is not None:
            self._socket.close()
        await self._runner.cleanup()

    def _open(self) -> int:
        """Connections in their handshake, and those handed to aiohttp that it has not closed."""
        self._transports = {t for t in self._transports if not t.is_closing()}
        return self._handshaking + len(self._transports)

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._socket is not None
        while True:
            try:
                connection, _ = await loop.sock_accept(self._socket)
            except OSError as error:  # out of file descriptors, a reset before accept: keep serving
                log.warning("status endpoint: accept failed: %s", error)
                await asyncio.sleep(0.1)
                continue
            if self._open() >= self._limit:
                self.counts.refused += 1
                connection.close()
                continue
            self.counts.accepted += 1
            self._handshaking += 1
            task = asyncio.ensure_future(self._handshake(connection))
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    async def _handshake(self, connection: socket.socket) -> None:
        """Hand the connection to aiohttp over TLS; it is counted open until aiohttp closes it."""
        loop = asyncio.get_running_loop()
        handler = self._runner.server
        assert handler is not None
        transport: asyncio.BaseTransport | None = None
        try:
            transport, _ = await asyncio.wait_for(
                loop.connect_accepted_socket(
                    handler, connection, ssl=self._context, ssl_handshake_timeout=self._handshake_timeout
                ),
                self._handshake_timeout + 1,
            )
        except (OSError, ssl.SSLError, TimeoutError):
            connection.close()
        finally:
            # In one step with the line below: never counted twice, never not at all.
            self._handshaking -= 1
            if transport is not None:
                self._transports.add(transport)
