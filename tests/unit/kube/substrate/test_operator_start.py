"""The operator's start-up: the collector while its caches fill."""

from __future__ import annotations

import asyncio
import gc
import ssl
from collections.abc import Iterator

import pytest
from lightkube.resources.core_v1 import Pod

from kubetrain.kube.operator import Operator, OperatorSettings
from kubetrain.kube.runtime.client import KubeClient
from kubetrain.kube.runtime.http import ApiSession, Credentials, RequestCounter, TokenBucket
from kubetrain.kube.runtime.informer import Informer

SERVER = "https://cluster.test"


@pytest.fixture
def restored_collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    gc.enable()
    gc.unfreeze()
    yield
    gc.enable()
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def operator(gc_young_threshold: int) -> tuple[Operator, Informer]:
    """An operator with one informer that never lists (the test says when it has synced)."""
    session = ApiSession(
        SERVER,
        tls=ssl.create_default_context(),
        credentials=Credentials(None, SERVER),
        bucket=TokenBucket(0, 1),
        counter=RequestCounter(),
        timeout=1.0,
    )
    client = KubeClient(http=session, events=session, requests=RequestCounter(), default_namespace="ns")
    built = Operator(client, OperatorSettings(frameworks=[], gc_young_threshold=gc_young_threshold))
    informer = Informer(session, Pod, namespace="ns")
    built.informers.append(informer)
    return built, informer


@pytest.mark.usefixtures("restored_collector")
async def test_the_collector_stays_paused_until_the_synced_caches_are_frozen() -> None:
    started, informer = operator(gc_young_threshold=10_000)
    syncing = asyncio.ensure_future(started._sync_caches())
    await asyncio.sleep(0)
    assert not gc.isenabled()
    informer.has_synced.set()
    await syncing
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0


@pytest.mark.usefixtures("restored_collector")
async def test_an_operator_that_does_not_own_the_collector_leaves_it_alone_while_caches_fill() -> None:
    started, informer = operator(gc_young_threshold=0)
    syncing = asyncio.ensure_future(started._sync_caches())
    await asyncio.sleep(0)
    assert gc.isenabled()
    informer.has_synced.set()
    await syncing
    assert gc.get_freeze_count() == 0
