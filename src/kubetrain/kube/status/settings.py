"""The status endpoint's settings: where it listens, where pods reach it, and where its credentials live."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from kubetrain.kube.status.injection import CA_CONFIG_MAP, StatusInjection

DEFAULT_PORT = 8443
DEFAULT_SERVICE = "training-operator-status"
"""The headless Service of the kustomize base: its DNS name resolves to every ready operator pod."""
DEFAULT_SECRET = "training-operator-status-tls"
DEFAULT_CLUSTER_DOMAIN = "cluster.local"
DEFAULT_WRITES_PER_SECOND = 50.0
"""Status writes a second for all jobs together: each job's is at most one a second anyway (``writes``)."""


class StatusUrlError(ValueError):
    """``--status-server-url`` is not a URL pods can be sent to."""


def parse_base_url(url: str) -> str:
    """``https://host[:port]`` as given, without a trailing slash; ``StatusUrlError`` saying what is wrong."""
    parts = urlsplit(url.strip())
    example = "e.g. https://10.0.0.5:8443 or https://kubetrain-status.example.com"
    if parts.scheme != "https":
        raise StatusUrlError(f"{url!r} must start with https:// (reports carry a token): {example}")
    if not parts.hostname:
        raise StatusUrlError(f"{url!r} has no host: {example}")
    try:
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as error:
        raise StatusUrlError(f"{url!r}: {error}: {example}") from None
    if parts.path.strip("/") or parts.query or parts.fragment or parts.username:
        raise StatusUrlError(
            f"{url!r} must be only the scheme, host and port: pods add the job's status path themselves"
        )
    return f"https://{parts.netloc}"


@dataclass(frozen=True)
class StatusServerSettings:
    host: str
    port: int
    base_url: str
    """What pods are given (``https://host[:port]``)."""
    namespace: str
    """The operator's namespace: the Secret's and the Service's."""
    service: str = DEFAULT_SERVICE
    secret: str = DEFAULT_SECRET
    cluster_domain: str | None = None
    writes_per_second: float = DEFAULT_WRITES_PER_SECOND

    @property
    def injection(self) -> StatusInjection:
        return StatusInjection(base_url=self.base_url, ca_config_map=CA_CONFIG_MAP)

    @property
    def url_host(self) -> str:
        return urlsplit(self.base_url).hostname or ""

    def certificate_names(self) -> list[str]:
        """What the serving certificate must cover: the Service's DNS names and the URL's host."""
        service = f"{self.service}.{self.namespace}"
        domain = self.cluster_domain or DEFAULT_CLUSTER_DOMAIN
        names = [f"{service}.svc", self.service, service, f"{service}.svc.{domain}"]
        host = self.url_host
        if host and host not in names:
            names.insert(0, _normalised(host))
        return names


def _normalised(host: str) -> str:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host.lower()


def default_base_url(service: str, namespace: str, port: int) -> str:
    """In-cluster: the Service's DNS name, which every pod's resolver expands and every replica answers."""
    return f"https://{service}.{namespace}.svc:{port}"
