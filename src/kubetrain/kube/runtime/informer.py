"""One watched kind: its list/watch source, cache and reflector, wired together."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from lightkube.core.resource import Resource, api_info

from kubetrain.kube.runtime import wire
from kubetrain.kube.runtime.client import ApiListWatch
from kubetrain.kube.runtime.http import HttpApi
from kubetrain.kube.runtime.reflector import ChangeHandler, Reflector, ReflectorSettings, strip_managed_fields
from kubetrain.kube.runtime.store import Store


class Informer:
    """Keeps ``store`` current with the objects of ``resource`` in ``namespace`` (None: all) that match
    ``label_selector``; ``run()`` until cancelled, and read the store once ``has_synced`` is set.

    Each object is stored as ``transform`` makes it of the API server's JSON, or, with ``kept``, as decoded
    straight to what is kept (``kept.fallback`` is then the transform of what its schema refuses)."""

    def __init__(
        self,
        http: HttpApi,
        resource: type[Resource],
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        indexed_labels: Iterable[str] = (),
        settings: ReflectorSettings | None = None,
        transform: Callable[[dict[str, Any]], dict[str, Any]] = strip_managed_fields,
        kept: wire.KeptFields[Any] | None = None,
    ) -> None:
        self.kind = str(api_info(resource).resource.kind)
        self.store = Store(indexed_labels=indexed_labels)
        source = ApiListWatch(http, resource, namespace=namespace, label_selector=label_selector, kept=kept)
        if kept is not None:
            transform = _as_decoded
        self.reflector = Reflector(source, self.store, name=self.kind, settings=settings, transform=transform)

    @property
    def has_synced(self) -> asyncio.Event:
        return self.reflector.has_synced

    def add_handler(self, handler: ChangeHandler) -> None:
        self.reflector.add_handler(handler)

    async def run(self) -> None:
        await self.reflector.run()


def _as_decoded(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as its source made it (``ApiListWatch`` with ``kept`` already made it what is kept)."""
    return obj


async def wait_for_sync(informers: Sequence[Informer], timeout: float) -> None:
    """Wait until every informer's first list is in its store; a controller must not reconcile before that
    (an empty cache looks like "no pods yet" and would make it create them all again)."""
    try:
        await asyncio.wait_for(asyncio.gather(*(i.has_synced.wait() for i in informers)), timeout)
    except TimeoutError:
        waiting = ", ".join(i.kind for i in informers if not i.has_synced.is_set())
        raise TimeoutError(
            f"caches not synced after {timeout:g}s: {waiting}; check the API server is reachable and the "
            "operator's RBAC allows list and watch on these kinds"
        ) from None
