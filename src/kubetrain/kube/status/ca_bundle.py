"""The endpoint's CA in every namespace with jobs: one ConfigMap per namespace, which each pod's projected
volume reads.

One per namespace rather than one per job (Trainer v2 copies it per job): the CA is the same for every
job, so a renewal updates as many ConfigMaps as there are namespaces with jobs, not as many as there are
jobs, and a job's start costs no extra write once its namespace has the ConfigMap. The price is an object
no job owns: it stays in the namespace after its last job (a few kilobytes, labelled
``app.kubernetes.io/component: status-endpoint`` so it is easy to find and delete), and it is re-created
before the next job's pods when it was deleted.

The leader publishes: before it creates a job's pods (``ensure``, remembered per namespace and checked
again once per ``recheck_period``), and to every namespace with jobs when it starts leading and whenever the
CA bundle changes (``follow``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from kubetrain.kube.runtime.client import raise_for_status
from kubetrain.kube.runtime.http import HttpApi
from kubetrain.kube.status.injection import CA_CONFIG_MAP, CA_CONFIG_MAP_KEY
from kubetrain.kube.status.keeper import LABELS

log = logging.getLogger(__name__)

RECHECK_PERIOD = 300.0


class CaPublisher:
    def __init__(
        self,
        http: HttpApi,
        name: str = CA_CONFIG_MAP,
        *,
        recheck_period: float = RECHECK_PERIOD,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._http = http
        self._name = name
        self._recheck_period = recheck_period
        self._clock = clock
        self.bundle: str | None = None
        self._published: dict[str, tuple[str, float]] = {}
        """Namespace → the bundle published there and when it was last checked."""
        self._locks: dict[str, asyncio.Lock] = {}
        self._changed = asyncio.Event()
        self.writes = 0

    def set_bundle(self, bundle: str) -> None:
        """The keeper's CA bundle changed (called on the operator's loop)."""
        if bundle != self.bundle:
            self.bundle = bundle
            self._changed.set()

    async def ensure(self, namespace: str) -> None:
        """Make the namespace's ConfigMap hold the current bundle (nothing to do before the first one)."""
        bundle = self.bundle
        if bundle is None:
            return
        known = self._published.get(namespace)
        if known is not None and known[0] == bundle and self._clock() - known[1] < self._recheck_period:
            return
        lock = self._locks.setdefault(namespace, asyncio.Lock())
        async with lock:  # one namespace's pods are often created by several workers at once
            known = self._published.get(namespace)
            if known is not None and known[0] == bundle and self._clock() - known[1] < self._recheck_period:
                return
            await self._write(namespace, bundle)
            self._published[namespace] = (bundle, self._clock())

    async def follow(self, namespaces: Callable[[], Iterable[str]]) -> None:
        """The leader's loop: publish to every namespace with jobs now, on every bundle change, and once per
        recheck period (a deleted ConfigMap comes back)."""
        while True:
            self._changed.clear()
            current = set(namespaces())
            for gone in set(self._published) - current:  # bounded by the namespaces with jobs now
                self._published.pop(gone, None)
                self._locks.pop(gone, None)
            for namespace in sorted(current):
                try:
                    await self.ensure(namespace)
                except Exception as error:
                    log.warning("status endpoint: publishing the CA in %s failed: %s", namespace, error)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), self._recheck_period)

    async def _write(self, namespace: str, bundle: str) -> None:
        collection = f"/api/v1/namespaces/{namespace}/configmaps"
        path = f"{collection}/{self._name}"
        current = await self._http.get(path)
        if current.status_code == 404:
            response = await self._http.post(collection, json=self._config_map(namespace, bundle))
            if response.status_code == 409:
                return  # another writer made it; the next check compares it
        else:
            raise_for_status(current, current.content)
            existing: dict[str, Any] = current.json()
            labels = (existing.get("metadata") or {}).get("labels") or {}
            if any(labels.get(key) != value for key, value in LABELS.items()):
                # Someone else's ConfigMap of that name: never written over. Pods there cannot verify the
                # endpoint until it is renamed or deleted, which the warning says.
                log.warning(
                    "status endpoint: ConfigMap %s/%s is not the operator's (it lacks the label "
                    "app.kubernetes.io/component=status-endpoint); reports from that namespace fail TLS "
                    "verification until it is renamed or deleted",
                    namespace,
                    self._name,
                )
                return
            if (existing.get("data") or {}).get(CA_CONFIG_MAP_KEY) == bundle:
                return
            body = self._config_map(namespace, bundle)
            body["metadata"] = {**(existing.get("metadata") or {}), **body["metadata"]}
            body["metadata"].pop("managedFields", None)
            response = await self._http.put(path, json=body)
        raise_for_status(response, response.content)
        self.writes += 1

    def _config_map(self, namespace: str, bundle: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": self._name, "namespace": namespace, "labels": dict(LABELS)},
            "data": {CA_CONFIG_MAP_KEY: bundle},
        }
