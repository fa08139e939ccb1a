"""Server-Sent Events: opening a stream, sending an event, batching what arrives together, and streaming a
backend's lines (a replica's log) from the thread that reads them."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator

from aiohttp import web

from kubetrain.dashboard.sources import Change, Subscription

HEARTBEAT_SECONDS = 15.0
"""A comment line this often on a quiet stream: a page that went away is noticed, a proxy keeps it open."""
BATCH_SECONDS = 0.05
"""Changes that arrive together are sent together: one message for a burst of status writes."""
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
"""On every answer; a stream's are sent when it opens, before any middleware could add them."""


async def open_stream(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",  # proxies must pass each event on at once
            **SECURITY_HEADERS,
        }
    )
    await response.prepare(request)
    return response


async def send(response: web.StreamResponse, event: str, data: object) -> None:
    await response.write(f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode())


async def next_batch(subscription: Subscription) -> list[Change | None] | None:
    """The changes that arrived together; None after a heartbeat's time without any."""
    try:
        first = await asyncio.wait_for(subscription.queue.get(), HEARTBEAT_SECONDS)
    except TimeoutError:
        return None
    batch = [first]
    await asyncio.sleep(BATCH_SECONDS)
    while not subscription.queue.empty():
        batch.append(subscription.queue.get_nowait())
    return batch


async def stream_lines(
    request: web.Request,
    lines: Callable[[], Iterator[tuple[str, str]]],
    describe: Callable[[BaseException], str],
) -> web.StreamResponse:
    """Lines a backend iterator yields on a thread, sent as they come (``lines`` events of up to 500), then
    ``end`` with why; the thread stops at the next line once the page has gone."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, str] | BaseException | None] = asyncio.Queue(2000)
    stop = threading.Event()

    def pump() -> None:
        def put(item: tuple[str, str] | BaseException | None) -> bool:
            while not stop.is_set():
                future = asyncio.run_coroutine_threadsafe(queue.put(item), loop)
                try:
                    future.result(timeout=1.0)
                    return True
                except TimeoutError:
                    future.cancel()
                except RuntimeError:  # the loop is gone
                    return False
            return False

        try:
            for line in lines():
                if not put(line):
                    return
            put(None)
        except BaseException as error:
            put(error)

    thread = threading.Thread(target=pump, name="dashboard-logs", daemon=True)
    response = await open_stream(request)
    thread.start()
    try:
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), HEARTBEAT_SECONDS)
            except TimeoutError:
                await response.write(b": ping\n\n")
                continue
            batch = [item]
            while not queue.empty() and len(batch) < 500:
                batch.append(queue.get_nowait())
            text = [line for _, line in (b for b in batch if isinstance(b, tuple))]
            if text:
                await send(response, "lines", {"lines": text})
            ended = next((b for b in batch if not isinstance(b, tuple)), False)
            if ended is None:
                await send(response, "end", {"reason": "the replica's log ended"})
                break
            if isinstance(ended, BaseException):
                problem = describe(ended)
                await send(response, "end", {"reason": problem, "error": True})
                break
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        stop.set()
    return response
