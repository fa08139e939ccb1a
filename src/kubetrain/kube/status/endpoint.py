"""The status endpoint of one operator replica, on an event loop and a thread of its own.

Why a thread: the endpoint's work comes from pods, not from the operator's own schedule, and a flood (a
thousand pods reporting at once, or someone hammering the port) means thousands of TLS handshakes and
requests. On the reconcilers' event loop every one of those callbacks queues ahead of reconciles; on a loop of
its own it runs in the same process under the same GIL, but the interpreter switches threads every few
milliseconds whatever the endpoint's backlog, and OpenSSL's handshake arithmetic runs with the GIL released.
It keeps its own API connections and rate limit, so its TokenReviews and status writes never wait behind the
reconcilers' requests either. Measured (``bench/status_endpoint.py``, docs/benchmarks.md): with 1,000 pods
reporting every second, other jobs' reconcile p50 / p99 went from 71 / 280 ms to 76 / 123 ms with the
endpoint on its thread, to 89 / 165 ms on the reconcilers' loop (``OWN_THREAD = False``). What it shares with
the operator are the caches, read-only: the jobs, pods and batch Jobs the authenticator checks and the writers
read.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from kubetrain.api.progress import StatusTarget, TrainerStatus
from kubetrain.kube.runtime.http import ApiSession, RequestCounter, TokenBucket
from kubetrain.kube.runtime.store import Store
from kubetrain.kube.status.authenticator import JobCaches, TokenReviewAuthenticator
from kubetrain.kube.status.history import HistoryRecorder
from kubetrain.kube.status.keeper import CredentialKeeper
from kubetrain.kube.status.listener import BoundedListener
from kubetrain.kube.status.settings import StatusServerSettings
from kubetrain.kube.status.writes import StatusWriter
from kubetrain.progress.server import EndpointCounts, Reporter, status_application

log = logging.getLogger(__name__)

OWN_THREAD = True
"""Serve on a thread of its own (see above); False serves on the operator's loop (the bench's comparison)."""
API_QPS = 50.0
API_BURST = 100
"""The endpoint's own API budget (TokenReviews, status and history writes, Secret reads): the same as the
operator's default, and separate from it."""
SHUTDOWN_FLUSH_SECONDS = 5.0
USER_AGENT_SUFFIX = "status-endpoint"
"""Appended to the operator's User-Agent on the endpoint's requests."""


class StatusEndpointError(Exception):
    """The endpoint could not start (its Secret, its port); the message says what to do."""


@dataclass
class _Reports:
    """Every accepted report goes to the status writer and to the history."""

    writer: StatusWriter
    history: HistoryRecorder

    def accept(self, target: StatusTarget, status: TrainerStatus, reporter: Reporter) -> None:
        self.writer.accept(target, status, reporter)
        self.history.accept(target, status, reporter)


class StatusEndpoint:
    def __init__(
        self,
        settings: StatusServerSettings,
        api: ApiSession,
        caches: JobCaches,
        *,
        on_bundle: Callable[[str], None],
        own_thread: bool | None = None,
    ) -> None:
        self.settings = settings
        self._api = api
        self._caches = caches
        self._on_bundle = on_bundle
        self._own_thread = OWN_THREAD if own_thread is None else own_thread
        self.counts = EndpointCounts.empty()
        self.requests = RequestCounter()
        """API requests the endpoint made."""
        self.keeper: CredentialKeeper | None = None
        self.authenticator: TokenReviewAuthenticator | None = None
        self.writer: StatusWriter | None = None
        self.history: HistoryRecorder | None = None
        self.listener: BoundedListener | None = None
        self.port: int | None = None
        self.failure: str | None = None
        """Why the endpoint stopped serving, when it did on its own."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._task: asyncio.Future[None] | None = None

    def _jobs(self, target: StatusTarget) -> Store | None:
        return self._caches.store(target)

    async def start(self) -> None:
        """Load the credentials and bind the port; ``StatusEndpointError`` when either fails."""
        main = asyncio.get_running_loop()
        ready: concurrent.futures.Future[int] = concurrent.futures.Future()

        def on_bundle(bundle: str) -> None:
            main.call_soon_threadsafe(self._on_bundle, bundle)

        if self._own_thread:
            self._thread = threading.Thread(
                target=lambda: asyncio.run(self._serve(ready, on_bundle)), name="status-endpoint", daemon=True
            )
            self._thread.start()
        else:
            self._task = asyncio.ensure_future(self._serve(ready, self._on_bundle))
        self.port = await asyncio.wrap_future(ready)

    async def stop(self) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, SHUTDOWN_FLUSH_SECONDS + 10)
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task

    async def _serve(self, ready: concurrent.futures.Future[int], on_bundle: Callable[[str], None]) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        settings = self.settings
        agent = self._api.user_agent
        http = self._api.detached(
            TokenBucket(API_QPS, API_BURST),
            self.requests,
            # Its writes are every replica's by design; the audit log tells them from the leader's by this.
            user_agent=f"{agent} {USER_AGENT_SUFFIX}" if agent else None,
        )
        keeper = self.keeper = CredentialKeeper(
            http, settings.namespace, settings.secret, settings.certificate_names(), on_bundle=on_bundle
        )
        listener: BoundedListener | None = None
        work: list[asyncio.Future[object]] = []
        try:
            try:
                await keeper.sync()
                assert keeper.context is not None
                self.authenticator = TokenReviewAuthenticator(http, self._caches)
                self.writer = StatusWriter(http, self._jobs, writes_per_second=settings.writes_per_second)
                self.history = HistoryRecorder(http, self._jobs)
                app = status_application(
                    self._caches.routes,
                    self.authenticator,
                    _Reports(self.writer, self.history),
                    counts=self.counts,
                )
                listener = BoundedListener(app, keeper.context)
                await listener.start(settings.host, settings.port)
                self.listener = listener
            except Exception as error:
                listener = None
                ready.set_exception(StatusEndpointError(_explain(settings, keeper.where, error)))
                return
            port = listener.port
            ready.set_result(port)
            log.info(
                "status endpoint: serving on %s:%s, pods are given %s", settings.host, port, settings.base_url
            )
            work = [
                asyncio.ensure_future(keeper.run()),
                asyncio.ensure_future(self.writer.run()),
                asyncio.ensure_future(self.history.run()),
            ]
            stopping: asyncio.Future[object] = asyncio.ensure_future(self._stop.wait())
            done, _ = await asyncio.wait([*work, stopping], return_when=asyncio.FIRST_COMPLETED)
            if stopping not in done:
                failed = next(iter(done))
                self.failure = f"status endpoint stopped: {failed.exception()!r}"
                log.error("%s", self.failure)
            stopping.cancel()
        finally:
            for task in work:
                task.cancel()
            await asyncio.gather(*work, return_exceptions=True)
            if listener is not None:
                await listener.stop()
            await self._flush_on_shutdown()
            await http.aclose()

    async def _flush_on_shutdown(self) -> None:
        """What was received and not yet written goes out before the process exits (bounded in time)."""
        if self.writer is None or self.history is None:
            return
        writer, history = self.writer, self.history

        async def flush() -> None:
            writer.flush_due()
            await writer.drain()
            await history.flush_due(everything=True)

        try:
            await asyncio.wait_for(flush(), SHUTDOWN_FLUSH_SECONDS)
        except TimeoutError:
            log.warning("status endpoint: gave up writing the last reports after %ss", SHUTDOWN_FLUSH_SECONDS)


def _explain(settings: StatusServerSettings, where: str, error: Exception) -> str:
    if isinstance(error, OSError):
        return (
            f"the status endpoint cannot listen on {settings.host}:{settings.port} ({error}); choose another "
            "--status-server-bind-address, or turn the endpoint off with --status-server-bind-address=0"
        )
    return (
        f"the status endpoint cannot load its credentials from {where} ({error}); check that the namespace "
        "exists and that the operator may get, create and update Secrets there (--status-server-namespace), "
        "or turn the endpoint off with --status-server-bind-address=0"
    )
