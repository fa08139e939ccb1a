"""A minimal HTTP endpoint for ``/metrics``, ``/healthz`` and ``/readyz`` on the operator's event loop.

Plain asyncio streams: the operator needs three GET routes, not a web framework.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)

Route = Callable[[], tuple[int, str, bytes]]


def parse_bind_address(address: str) -> tuple[str, int] | None:
    """``:8080``, ``127.0.0.1:8080`` or ``0`` (disabled, as upstream) → (host, port) or None."""
    if address in ("", "0"):
        return None
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        raise ValueError(
            f"bind address {address!r}: expected [host]:port, e.g. :8080 or 127.0.0.1:8080, or 0"
        )
    return host or "0.0.0.0", int(port)


def metrics_route(registry: CollectorRegistry, before: Callable[[], None] = lambda: None) -> Route:
    def serve() -> tuple[int, str, bytes]:
        before()
        return 200, CONTENT_TYPE_LATEST, generate_latest(registry)

    return serve


def check_route(check: Callable[[], str | None]) -> Route:
    """200 ``ok`` when ``check()`` returns None, else 500 with its complaint."""

    def serve() -> tuple[int, str, bytes]:
        problem = check()
        if problem is None:
            return 200, "text/plain", b"ok"
        return 500, "text/plain", problem.encode()

    return serve


async def serve_http(host: str, port: int, routes: dict[str, Route]) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = await reader.readline()
            while (await reader.readline()).strip():
                pass  # headers are not needed
            parts = request_line.decode(errors="replace").split()
            path = parts[1].split("?", 1)[0] if len(parts) > 1 else "/"
            route = routes.get(path)
            if route is None:
                status, content_type, body = 404, "text/plain", b"not found"
            else:
                status, content_type, body = route()
            reason = {200: "OK", 404: "Not Found", 500: "Internal Server Error"}.get(status, "")
            head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
            head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            writer.write(head.encode() + body)
            await writer.drain()
        except Exception as error:
            log.debug("health endpoint: %s", error)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    return await asyncio.start_server(handle, host, port)
