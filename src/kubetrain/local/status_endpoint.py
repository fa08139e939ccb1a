"""A local run's status endpoint: where its replicas report progress and metrics, as they would on a cluster.

Per run, the runner serves the ``kubetrain.progress`` application over TLS with credentials made for this run
(a CA that is never written down and a serving certificate for the names replicas reach it by), and gives
every replica the same three variables the operator injects (``kubetrain.reporting``): the URL of the job's
status path, the CA certificate and a token of its own, written beside the CA under the run's directory::

    <run>/progress/<type>-<i>/ca.crt     the run's CA certificate (0644)
    <run>/progress/<type>-<i>/token      the replica's random token (0600; the directory is 0700)

A token names its replica: another token is refused (401), and a replica's token is good only for its own
job's status path (403). The server stops with the run. Where the endpoint listens and by which name replicas
reach it is the substrate's part (``StatusAccess``): a process on loopback, a container at its job
network's gateway.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import secrets
import shutil
import socket
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from kubetrain.api.jobs import TrainingJob
from kubetrain.api.progress import StatusTarget
from kubetrain.progress import credentials
from kubetrain.progress.server import RefusedError, Reporter, ReportSink, status_application
from kubetrain.reporting import STATUS_SERVER_CA_CERT_ENV, STATUS_SERVER_TOKEN_ENV, STATUS_SERVER_URL_ENV

CA_FILE = "ca.crt"
TOKEN_FILE = "token"
CREDENTIALS_MOUNT = "/var/run/secrets/kubeflow/trainer"
"""Where a container finds its ``ca.crt`` and ``token``: where Kubeflow Trainer v2 mounts them in a pod."""
LOOPBACK = "127.0.0.1"
PORT_PLACEHOLDER = "<port>"
"""What ``kubetrain plan`` shows for the port a run's endpoint will listen on (chosen when it starts)."""

_IP_FREEBIND = 15
"""Linux's ``IP_FREEBIND`` (``socket`` names it from Python 3.12 on): bind an address no interface has yet. A
job network's bridge appears only when its first container starts, after the endpoint must listen (its port
goes into the containers' env)."""


def status_target(job: TrainingJob) -> StatusTarget:
    """The job's status path, as on a cluster: ``/apis/<group>/<version>/namespaces/<ns>/<plural>/<name>``."""
    return StatusTarget(job.API_VERSION, job.namespace, job.PLURAL, job.name)


def status_url(host: str, port: int | str, target: StatusTarget) -> str:
    authority = f"[{host}]" if _is_ipv6(host) else host
    return f"https://{authority}:{port}{target.path}"


def reporting_env(url: str, ca_file: str, token_file: str) -> dict[str, str]:
    """The three variables a replica reports with."""
    return {
        STATUS_SERVER_URL_ENV: url,
        STATUS_SERVER_CA_CERT_ENV: ca_file,
        STATUS_SERVER_TOKEN_ENV: token_file,
    }


@dataclass(frozen=True)
class StatusAccess:
    """How a substrate's replicas reach the run's endpoint."""

    bind_host: str
    """The address the endpoint listens on."""
    url_host: str
    """The host name (or address) replicas put in the URL."""
    names: tuple[str, ...]
    """What the serving certificate covers: ``url_host`` and any other name replicas may use."""


PROCESS_ACCESS = StatusAccess(LOOPBACK, LOOPBACK, (LOOPBACK, "localhost"))
"""Processes on this host reach a loopback endpoint."""


@dataclass(frozen=True)
class ReporterAccess:
    """What one replica reports with: the URL, and the directory holding its ``ca.crt`` and ``token``."""

    url: str
    directory: Path

    @property
    def ca_file(self) -> Path:
        return self.directory / CA_FILE

    @property
    def token_file(self) -> Path:
        return self.directory / TOKEN_FILE

    def host_env(self) -> dict[str, str]:
        """The variables for a process on this host: the files where they are."""
        return reporting_env(self.url, str(self.ca_file), str(self.token_file))

    def container_env(self) -> dict[str, str]:
        """The variables for a container that has ``directory`` mounted at ``CREDENTIALS_MOUNT``."""
        return reporting_env(self.url, f"{CREDENTIALS_MOUNT}/{CA_FILE}", f"{CREDENTIALS_MOUNT}/{TOKEN_FILE}")


class RunTokens:
    """The endpoint's ``Authenticator`` for one run: each replica's token and the one path it may use."""

    def __init__(self, target: StatusTarget, tokens: Mapping[str, str]) -> None:
        self.target = target
        self._replicas = {_digest(token): replica for replica, token in tokens.items()}

    async def authenticate(self, token: str, target: StatusTarget) -> Reporter:
        replica = self._replicas.get(_digest(token))
        if replica is None:
            raise RefusedError(
                401,
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
        self.target = status_target(job)
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
        app = status_application(RunTokens(self.target, tokens), self.sink)
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
    family = socket.AF_INET6 if _is_ipv6(host) else socket.AF_INET
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


def _is_ipv6(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).version == 6
    except ValueError:
        return False
