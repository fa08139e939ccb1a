"""A distinct free loopback port for every replica.

Upstream gives every replica of a kind the same container port (2222 for every TF replica),
which only works because each pod has its own network namespace. On one host each replica needs
its own port, so the runner asks the kernel for free ones and hands them to the frameworks
through ``LocalAddressing``.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from contextlib import ExitStack

from kubetrain.frameworks.addressing import LOOPBACK, LocalAddressing

ReplicaKey = tuple[str, int]


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """``count`` distinct ports that were free a moment ago.

    Every socket stays bound until all are chosen, so the kernel cannot hand out one port twice.
    """
    with ExitStack() as stack:
        ports: list[int] = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def allocate_addressing(replicas: Iterable[ReplicaKey]) -> LocalAddressing:
    """A ``LocalAddressing`` with one free port per ``(replica type, index)``."""
    keys = list(dict.fromkeys(replicas))
    return LocalAddressing(ports=dict(zip(keys, free_ports(len(keys)), strict=True)))
