"""How replica *r* reaches replica *s*: service DNS on Kubernetes, loopback ports locally.

Frameworks build every address (MASTER_ADDR, TF_CONFIG hosts, WORKER_ADDRS, hostfiles) through an
``Addressing`` so one piece of code serves both substrates.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field

from kubetrain.api.jobs import TrainingJob

LOOPBACK = "127.0.0.1"


def replica_name(job_name: str, replica_type: str, index: int) -> str:
    """``<job>-<lowercase type>-<index>``: the pod name and its headless service name."""
    return f"{job_name}-{replica_type.lower()}-{index}".replace("/", "-")


class Addressing(ABC):
    colocated: bool
    """True when every replica shares one host (the local substrate)."""

    @abstractmethod
    def host(self, job: TrainingJob, replica_type: str, index: int) -> str:
        """The short host name other replicas use (``<job>-master-0`` / ``127.0.0.1``)."""

    @abstractmethod
    def fqdn(self, job: TrainingJob, replica_type: str, index: int) -> str:
        """The fully qualified service name (``<job>-ps-0.<ns>.svc``, used by TF_CONFIG)."""

    @abstractmethod
    def subdomain_fqdn(self, job: TrainingJob, hostname: str) -> str:
        """A pod reached by hostname under the job's subdomain (MPI v2beta1 hostfiles)."""

    @abstractmethod
    def port(self, job: TrainingJob, replica_type: str, index: int, container_port: int) -> int:
        """The port replica ``(type, index)`` listens on, given its container's declared port."""


@dataclass(frozen=True)
class ClusterAddressing(Addressing):
    cluster_domain: str | None = None
    """Appended to service FQDNs (upstream ``CUSTOM_CLUSTER_DOMAIN`` / ``--cluster-domain``)."""
    colocated: bool = field(default=False, init=False)

    def _suffix(self) -> str:
        return f".{self.cluster_domain}" if self.cluster_domain else ""

    def host(self, job: TrainingJob, replica_type: str, index: int) -> str:
        return replica_name(job.name, replica_type, index)

    def fqdn(self, job: TrainingJob, replica_type: str, index: int) -> str:
        return f"{self.host(job, replica_type, index)}.{job.namespace}.svc{self._suffix()}"

    def subdomain_fqdn(self, job: TrainingJob, hostname: str) -> str:
        return f"{hostname}.{job.name}.{job.namespace}.svc{self._suffix()}"

    def port(self, job: TrainingJob, replica_type: str, index: int, container_port: int) -> int:
        return container_port


@dataclass(frozen=True)
class LocalAddressing(Addressing):
    ports: Mapping[tuple[str, int], int]
    """The free port allocated to each ``(replica type, index)``."""
    colocated: bool = field(default=True, init=False)

    def host(self, job: TrainingJob, replica_type: str, index: int) -> str:
        return LOOPBACK

    def fqdn(self, job: TrainingJob, replica_type: str, index: int) -> str:
        return LOOPBACK

    def subdomain_fqdn(self, job: TrainingJob, hostname: str) -> str:
        return LOOPBACK

    def port(self, job: TrainingJob, replica_type: str, index: int, container_port: int) -> int:
        return self.ports.get((replica_type, index), container_port)
