"""A local run's status endpoint: where its replicas report progress and metrics, as they would on a cluster.

Per run, the runner serves the ``kubetrain.progress`` application over TLS with credentials made for this run
(a CA that is never written down and a serving certificate for the names replicas reach it by), and gives
every replica the same three variables the operator injects (``kubetrain.reporting``): the URL of the job's
status path, the CA certificate and a token of its own, written beside the CA under the run's directory::

    <run>/progress/<type>-<i>/ca.crt     the run's CA certificate (0644)
    <run>/progress/<type>-<i>/token      the replica's random token (0600; the directory is 0700)

A token names its replica: another token is refused, and a replica's token is good only for its own job's
status path (both 403, as Trainer v2.3 answers a token it does not take); the endpoint serves the run's kind
alone (404 for any other path). The server stops with the run. Where the endpoint listens and by which
name replicas reach it is the substrate's part (``status_access.StatusAccess``): a process on loopback, a
container at its job network's gateway.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import socket
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from aiohttp import web

from kubetrain.api.jobs import TrainingJob
from kubetrain.api.progress import StatusRoutes, StatusTarget
from kubetrain.local.status_access import (
    CA_FILE,
    TOKEN_FILE,
    ReporterAccess,
    StatusAccess,
    is_ipv6,
    status_route,
    status_url,
)
from kubetrain.progress import credentials
from kubetrain.progress.server import RefusedError, Reporter, ReportSink, status_application
from kubetrain.reporting import STATUS_SERVER_TOKEN_ENV

_IP_FREEBIND = 15
"""Linux's ``IP_FREEBIND`` (``socket`` names it from Python 3.12 on): bind an address no interface has yet. A
job network's bridge appears only when its first container starts, after the endpoint must listen (its port
goes into the containers' env)."""


class RunTokens:
    """The endpoint's ``Authenticator`` for one run: each replica's token and the one path it may use."""

    def __init__(self, target: StatusTarget, tokens: Mapping[str, str]) -> None:
        self.target = target
        self._replicas = {_digest(token): replica for replica, token in tokens.items()}

    async def authenticate(self, token: str, target: StatusTarget) -> Reporter:
        replica = self._replicas.get(_digest(token))
        if replica is None:
            raise RefusedError(
                403,
                f"the token is not one this run of {self.target.key} issued: send the one in the file "
                f"{STATUS_SERVER_TOKEN_ENV} names",
            )
        if target != self.target:
            raise RefusedError(
                403, f"the token of {replica} may only report for {self.target.path}, not for {target.path}"
            )
        return Reporter(replica)


def _digest(token: str) -> str:
    # Looked up by hash: the table holds no token, and a lookup's time says nothing about one.
    return hashlib.sha256(token.encode()).hexdigest()


class RunStatusEndpoint:
    """The status endpoint of one run, from ``start`` to ``stop``; reports go to ``sink``."""

    def __init__(self, job: TrainingJob, replicas: Iterable[str], directory: Path, sink: ReportSink) -> None:
        self.route = status_route(job)
        self.target = self.route.target(job.namespace, job.name)
        self.replicas = list(replicas)
        self.directory = directory
        self.sink = sink
        self.url = ""
        self._runner: web.AppRunner | None = None

    def access(self, replica: str) -> ReporterAccess:
        return ReporterAccess(self.url, self.directory / replica)

    async def start(self, access: StatusAccess) -> None:
        """Make the run's credentials, write each replica's files and listen; ``url`` is then set."""
        tls = credentials.issue(list(access.names))
        tokens = {replica: secrets.token_urlsafe(32) for replica in self.replicas}
        self._write_files(tls.ca_cert, tokens)
        app = status_application(StatusRoutes([self.route]), RunTokens(self.target, tokens), self.sink)
        listening = _listening_socket(access.bind_host)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            await web.SockSite(runner, listening, ssl_context=tls.server_context()).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.url = status_url(access.url_host, listening.getsockname()[1], self.target)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _write_files(self, ca_cert: str, tokens: Mapping[str, str]) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory.mkdir(mode=0o700, parents=True)
        for replica, token in tokens.items():
            folder = self.directory / replica
            folder.mkdir(mode=0o700)
            (folder / CA_FILE).write_text(ca_cert, encoding="ascii")
            # Created 0600, so the token is never readable by others, even for a moment.
            descriptor = os.open(folder / TOKEN_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w", encoding="ascii") as handle:
                handle.write(token)


def _listening_socket(host: str) -> socket.socket:
    family = socket.AF_INET6 if is_ipv6(host) else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    try:
        if sys.platform == "linux":
            listening.setsockopt(socket.IPPROTO_IP, _IP_FREEBIND, 1)  # IPv6 sockets honour it too
        listening.bind((host, 0))
        listening.listen(128)
        listening.setblocking(False)
    except BaseException:
        listening.close()
        raise
    return listening
