"""Every replica gets its own free loopback port."""

from __future__ import annotations

import socket

from kubetrain.local.ports import allocate_addressing, free_ports


def test_free_ports_are_distinct() -> None:
    ports = free_ports(16)
    assert len(set(ports)) == 16


def test_a_free_port_can_be_bound_on_loopback() -> None:
    (port,) = free_ports(1)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))


def test_addressing_gives_each_replica_its_own_port() -> None:
    keys = [("Master", 0), ("Worker", 0), ("Worker", 1)]
    addressing = allocate_addressing(keys)
    assert set(addressing.ports) == set(keys)
    assert len(set(addressing.ports.values())) == 3


def test_a_replica_named_twice_gets_one_port() -> None:
    addressing = allocate_addressing([("Worker", 0), ("Worker", 0)])
    assert list(addressing.ports) == [("Worker", 0)]
