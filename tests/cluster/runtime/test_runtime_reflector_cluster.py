"""Reflector and informer against a real API server: events, selectors, paging, re-lists, owner index."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path

import pytest
from lightkube.core.resource import Resource
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.meta_v1 import ObjectMeta, OwnerReference
from lightkube.resources.core_v1 import ConfigMap
from runtime_cluster_support import ClusterClient, eventually, kube_client_fixture, stop  # noqa: F401  (fixture "kube")

from kubetrain.envtest.crds import install_crds
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.kube.runtime.client import ApiListWatch
from kubetrain.kube.runtime.informer import Informer, wait_for_sync
from kubetrain.kube.runtime.reflector import Reflector, ReflectorSettings, ResourceExpiredError, WatchEvent
from kubetrain.kube.runtime.store import ObjectChange, Store
from waiting import PATIENCE

pytestmark = pytest.mark.cluster

SELECTED = {"kubetrain.test/watched": "yes"}


def config_map(name: str, namespace: str, labels: dict[str, str] | None = None, **data: str) -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name=name, namespace=namespace, labels=labels), data=data)


def start(reflector: Reflector) -> asyncio.Task[None]:
    return asyncio.ensure_future(reflector.run())


def data_of(store: Store, key: str) -> object:
    return (store.get(key) or {}).get("data")


def changes_of(changes: list[ObjectChange]) -> list[tuple[str, str]]:
    return [(change.type.value, change.object["metadata"]["name"]) for change in changes]


async def test_the_reflector_sees_objects_created_updated_and_deleted(
    kube: ClusterClient, namespace: str
) -> None:
    store = Store()
    reflector = Reflector(ApiListWatch(kube.http, ConfigMap, namespace=namespace), store, name="configmaps")
    changes: list[ObjectChange] = []
    reflector.add_handler(changes.append)
    task = start(reflector)
    try:
        await asyncio.wait_for(reflector.has_synced.wait(), PATIENCE)
        changes.clear()  # the namespace's own kube-root-ca.crt, if already there
        await kube.api.create(config_map("a", namespace, step="one"))
        await eventually(lambda: f"{namespace}/a" in store, what="the creation")
        await kube.api.patch(ConfigMap, "a", {"data": {"step": "two"}}, namespace=namespace)
        await eventually(
            lambda: (store.get(f"{namespace}/a") or {}).get("data") == {"step": "two"}, what="update"
        )
        await kube.api.delete(ConfigMap, "a", namespace=namespace)
        await eventually(lambda: f"{namespace}/a" not in store, what="the deletion")
        assert [c for c in changes_of(changes) if c[1] == "a"] == [
            ("ADDED", "a"),
            ("MODIFIED", "a"),
            ("DELETED", "a"),
        ]
    finally:
        await stop(task)


async def test_a_label_selector_keeps_other_objects_out_of_the_cache(
    kube: ClusterClient, namespace: str
) -> None:
    store = Store()
    source = ApiListWatch(kube.http, ConfigMap, namespace=namespace, label_selector="kubetrain.test/watched")
    reflector = Reflector(source, store, name="configmaps")
    await kube.api.create(config_map("listed", namespace, SELECTED))
    await kube.api.create(config_map("ignored", namespace))
    task = start(reflector)
    try:
        await asyncio.wait_for(reflector.has_synced.wait(), PATIENCE)
        await kube.api.create(config_map("watched", namespace, SELECTED))
        await kube.api.create(config_map("also-ignored", namespace))
        await eventually(lambda: f"{namespace}/watched" in store, what="the labelled creation")
        assert sorted(store.keys()) == [f"{namespace}/listed", f"{namespace}/watched"]
    finally:
        await stop(task)


async def test_the_first_list_is_read_in_pages(kube: ClusterClient, namespace: str) -> None:
    for index in range(7):
        await kube.api.create(config_map(f"cm-{index}", namespace, SELECTED))
    store = Store()
    source = ApiListWatch(kube.http, ConfigMap, namespace=namespace, label_selector="kubetrain.test/watched")
    reflector = Reflector(source, store, name="configmaps", settings=ReflectorSettings(page_size=3))
    before = kube.requests.by_method["GET"]
    task = start(reflector)
    try:
        await asyncio.wait_for(reflector.has_synced.wait(), PATIENCE)
        assert len(store) == 7
        await eventually(lambda: kube.requests.by_method["GET"] - before >= 4, what="the watch request")
        assert kube.requests.by_method["GET"] - before == 4  # three pages, then one watch
    finally:
        await stop(task)


PROBE_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: probes.runtime-test.kubetrain.dev
spec:
  group: runtime-test.kubetrain.dev
  scope: Namespaced
  names: {kind: Probe, plural: probes, singular: probe, listKind: ProbeList}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
"""
Probe = create_namespaced_resource("runtime-test.kubetrain.dev", "v1", "Probe", "probes")


@pytest.fixture
def probe_kind(kube_api: KubeApi, tmp_path: Path) -> type[Resource]:
    """A custom kind for this test alone. Its watch cache starts when the CRD is established, so
    resourceVersion 1 is long gone from it (a core kind's cache on a fresh envtest starts at version 1)."""
    (tmp_path / "probe.yaml").write_text(PROBE_CRD)
    install_crds(kube_api, tmp_path)
    return Probe


class StartsTooOld(ApiListWatch):
    """Opens its watches at resourceVersion 1, as a reflector cut off for a long time would, until the server
    has answered 410 Gone once. Not just the first watch: a CRD's new watch cache may answer that one 429
    "storage is (re)initializing" instead, and the reflector's retry must still start too old."""

    gone_answered = False

    async def watch(self, *, resource_version: str, timeout_seconds: int) -> AsyncGenerator[WatchEvent, None]:
        version = resource_version if self.gone_answered else "1"
        try:
            async for event in super().watch(resource_version=version, timeout_seconds=timeout_seconds):
                if event.type == "ERROR" and event.object.get("code") == 410:
                    self.gone_answered = True
                yield event
        except ResourceExpiredError:
            self.gone_answered = True
            raise


async def test_a_watch_from_an_expired_version_makes_the_reflector_re_list(
    kube: ClusterClient, namespace: str, probe_kind: type[Resource]
) -> None:
    store = Store()
    reflector = Reflector(StartsTooOld(kube.http, probe_kind, namespace=namespace), store, name="probes")
    task = start(reflector)
    try:
        await eventually(lambda: reflector.lists == 2, what="a re-list after 410 Gone")
        assert reflector.restarts["gone"] == 1
        await kube.api.create(Probe(metadata=ObjectMeta(name="after", namespace=namespace)))
        await eventually(lambda: f"{namespace}/after" in store, what="events after the re-list")
    finally:
        await stop(task)


async def test_a_silent_watch_is_re_listed_after_the_inactivity_timeout(
    kube: ClusterClient, namespace: str
) -> None:
    settings = ReflectorSettings(inactivity_timeout=1.0)
    source = ApiListWatch(kube.http, ConfigMap, namespace=namespace, label_selector="kubetrain.test/none")
    reflector = Reflector(source, Store(), name="configmaps", settings=settings)
    task = start(reflector)
    try:
        await eventually(lambda: reflector.lists >= 2, what="a re-list of the silent watch")
        assert reflector.restarts["inactive"] >= 1
    finally:
        await stop(task)


async def test_an_informer_indexes_children_by_their_controller_owner(
    kube: ClusterClient, namespace: str
) -> None:
    owner = await kube.api.create(config_map("owner", namespace))
    assert owner.metadata is not None and owner.metadata.uid is not None
    uid = owner.metadata.uid
    reference = OwnerReference(apiVersion="v1", kind="ConfigMap", name="owner", uid=uid, controller=True)
    informer = Informer(kube.http, ConfigMap, namespace=namespace, label_selector="kubetrain.test/watched")
    task = asyncio.ensure_future(informer.run())
    try:
        await wait_for_sync([informer], timeout=PATIENCE)
        for name in ("child-0", "child-1"):
            child = config_map(name, namespace, SELECTED)
            assert child.metadata is not None
            child.metadata.ownerReferences = [reference]
            await kube.api.create(child)
        await eventually(lambda: len(informer.store.by_owner(uid)) == 2, what="indexed children")
        assert [cm["metadata"]["name"] for cm in informer.store.by_owner(uid)] == [
            "child-0",
            "child-1",
        ]
    finally:
        await stop(task)
