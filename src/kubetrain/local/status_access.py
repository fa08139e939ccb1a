"""How a run's replicas reach its status endpoint: the three variables, the files, the URL.

The light half of ``status_endpoint.py`` (no server, no TLS), so that ``kubetrain plan`` can show the
variables without importing what serves them. ``StatusAccess`` is the substrate's part: where the endpoint
listens and the name replicas reach it by (a process: loopback; a container: its job network's gateway).
``ReporterAccess`` is one replica's: the URL and the directory holding its ``ca.crt`` and ``token``.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from kubetrain.api.jobs import TrainingJob
from kubetrain.api.progress import StatusRoute, StatusTarget
from kubetrain.reporting import STATUS_SERVER_CA_CERT_ENV, STATUS_SERVER_TOKEN_ENV, STATUS_SERVER_URL_ENV

CA_FILE = "ca.crt"
TOKEN_FILE = "token"
CREDENTIALS_MOUNT = "/var/run/secrets/kubeflow/trainer"
"""Where a container finds its ``ca.crt`` and ``token``: where Kubeflow Trainer v2 mounts them in a pod."""
LOOPBACK = "127.0.0.1"
PORT_PLACEHOLDER = "<port>"
"""What ``kubetrain plan`` shows for the port a run's endpoint will listen on (chosen when it starts)."""


def status_route(job: TrainingJob) -> StatusRoute:
    """The route of the job's kind: what the run's endpoint serves."""
    return job.status_route()


def status_target(job: TrainingJob) -> StatusTarget:
    """The job's status path, as on a cluster: ``/apis/<group>/<version>/namespaces/<ns>/<plural>/<name>``."""
    return status_route(job).target(job.namespace, job.name)


def status_url(host: str, port: int | str, target: StatusTarget) -> str:
    authority = f"[{host}]" if is_ipv6(host) else host
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


def is_ipv6(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).version == 6
    except ValueError:
        return False
