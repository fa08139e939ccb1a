"""Lease election against a real API server: one leader, a released Lease taken before it would have expired,
a dead leader's Lease taken only once it has. The order is read from the Lease's own timestamps; how fast a
hand-over is, is bench/operator_latency.py's to measure."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from runtime_cluster_support import ClusterClient, eventually, kube_client_fixture, stop  # noqa: F401  (fixture "kube")

from kubetrain.kube.runtime.leader import ApiLeaseLock, ElectionSettings, LeaderElector, LeaseRecord

pytestmark = pytest.mark.cluster

LEASE = "kubetrain-operator-test"
LONG_LEASE = ElectionSettings(lease_duration=300.0)
"""Longer than any wait here (PATIENCE): a Lease taken before it expired was taken because it was released."""


def elector(
    kube: ClusterClient, namespace: str, identity: str, settings: ElectionSettings | None = None
) -> LeaderElector:
    return LeaderElector(ApiLeaseLock(kube.http, namespace, LEASE), identity, settings=settings)


async def read_lease(kube: ClusterClient, namespace: str) -> LeaseRecord:
    found = await ApiLeaseLock(kube.http, namespace, LEASE).get()
    assert found is not None, f"no Lease {namespace}/{LEASE}"
    return found


def expiry(record: LeaseRecord) -> timedelta:
    """How long after its ``renewTime`` a Lease that is not renewed again may be taken."""
    return timedelta(seconds=record.lease_duration_seconds)


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


async def test_a_released_lease_is_taken_at_the_next_retry_not_at_its_expiry(
    kube: ClusterClient, namespace: str
) -> None:
    first = elector(kube, namespace, "one", LONG_LEASE)
    first_task = asyncio.ensure_future(first.run())
    await eventually(lambda: first.is_leader, what="the first election")
    second = elector(kube, namespace, "two", LONG_LEASE)
    second_task = asyncio.ensure_future(second.run())
    try:
        await asyncio.sleep(3)  # a few of the standby's retries, all refused: the Lease is live for 300 s
        assert not second.is_leader
        await stop(first_task)
        last_held = await read_lease(kube, namespace)
        assert last_held.holder == "one" and last_held.renew_time is not None
        assert await first.release()
        await eventually(lambda: second.is_leader, what="the hand-over")
        taken = await read_lease(kube, namespace)
        assert taken.holder == "two" and taken.transitions == last_held.transitions + 1
        assert taken.acquire_time is not None
        assert taken.acquire_time < last_held.renew_time + expiry(last_held), "taken before it expired"
    finally:
        await stop(second_task)


@pytest.mark.slow
async def test_a_killed_leader_is_replaced_only_once_its_lease_has_expired(
    kube: ClusterClient, namespace: str
) -> None:
    first = elector(kube, namespace, "one")
    first_task = asyncio.ensure_future(first.run())
    await eventually(lambda: first.is_leader, what="the first election")
    second = elector(kube, namespace, "two")
    second_task = asyncio.ensure_future(second.run())
    try:
        await asyncio.sleep(3)
        # Read before the kill: a renewal after the read only moves the expiry later.
        last_renewed = await read_lease(kube, namespace)
        assert last_renewed.holder == "one" and last_renewed.renew_time is not None
        await stop(first_task)  # killed: no release, the Lease still names it
        await eventually(lambda: second.is_leader, what="the takeover")
        # Not the Lease's acquireTime: the candidate reads its clock before the GET after which it decides
        # the Lease expired; seeing it lead is after that decision.
        led_by = datetime.now(UTC)
        assert (await read_lease(kube, namespace)).holder == "two"
        assert led_by >= last_renewed.renew_time + expiry(last_renewed), "taken before it expired"
    finally:
        await stop(second_task)
