"""Lease election against a real API server: one leader, fast hand-over on release, takeover on death."""

from __future__ import annotations

import asyncio

import pytest
from runtime_cluster_support import ClusterClient, eventually, kube_client_fixture, stop  # noqa: F401  (fixture "kube")

from kubetrain.kube.runtime.leader import ApiLeaseLock, LeaderElector

pytestmark = pytest.mark.cluster

LEASE = "kubetrain-operator-test"


def elector(kube: ClusterClient, namespace: str, identity: str) -> LeaderElector:
    return LeaderElector(ApiLeaseLock(kube.http, namespace, LEASE), identity)


async def test_of_two_candidates_only_one_leads(kube: ClusterClient, namespace: str) -> None:
    first, second = elector(kube, namespace, "one"), elector(kube, namespace, "two")
    tasks = [asyncio.ensure_future(candidate.run()) for candidate in (first, second)]
    try:
        await eventually(lambda: first.is_leader or second.is_leader, what="an election")
        await asyncio.sleep(5)  # a few renewals
        assert [first.is_leader, second.is_leader].count(True) == 1
        lease = await ApiLeaseLock(kube.http, namespace, LEASE).get()
        leader = first if first.is_leader else second
        assert lease is not None and lease.holder == leader.identity
        assert lease.lease_duration_seconds == 15
    finally:
        for task in tasks:
            await stop(task)


async def test_a_released_lease_is_taken_over_well_within_the_lease_duration(
    kube: ClusterClient, namespace: str
) -> None:
    first = elector(kube, namespace, "one")
    first_task = asyncio.ensure_future(first.run())
    await eventually(lambda: first.is_leader, what="the first election")
    second = elector(kube, namespace, "two")
    second_task = asyncio.ensure_future(second.run())
    try:
        await asyncio.sleep(3)
        assert not second.is_leader
        await stop(first_task)
        assert await first.release()
        took = await eventually(lambda: second.is_leader, within=15, what="the hand-over")
        assert took < 5  # the next retry (2 s, jittered), not the 15 s lease
        lease = await ApiLeaseLock(kube.http, namespace, LEASE).get()
        assert lease is not None and lease.holder == "two" and lease.transitions == 1
    finally:
        await stop(second_task)


@pytest.mark.slow
async def test_a_killed_leader_is_replaced_after_the_lease_expires(
    kube: ClusterClient, namespace: str
) -> None:
    first = elector(kube, namespace, "one")
    first_task = asyncio.ensure_future(first.run())
    await eventually(lambda: first.is_leader, what="the first election")
    second = elector(kube, namespace, "two")
    second_task = asyncio.ensure_future(second.run())
    try:
        await asyncio.sleep(3)
        await stop(first_task)  # killed: no release, the Lease still names it
        took = await eventually(lambda: second.is_leader, within=30, what="the takeover")
        assert took >= 12  # waited out (most of) the 15 s lease it last saw renewed
    finally:
        await stop(second_task)
