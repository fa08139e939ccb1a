"""What the namespace holds, kept current by a list and a watch in a thread of its own: the suite's eyes.

Polling the API for thousands of pods several times a second would cost the API server more than the
operator does; a watch costs one event per change. The mirror survives the faults it watches: a broken
stream, a refused connection or a 410 Gone makes it list again (half a second later), as a reflector does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from kubetrain.envtest.kubeapi import ApiError, KubeApi, KubeObject
from waiting import PATIENCE, eventually

WATCH_SECONDS = 5
"""Short, so that stopping the mirror does not wait long for the open watch to end."""
RELIST_DELAY_SECONDS = 0.5


@dataclass(frozen=True)
class Summary:
    """The little of an object the suite looks at."""

    name: str
    uid: str
    owner_uid: str
    """The controller ownerReference's uid; empty when there is none."""
    node: str
    phase: str
    running_condition: bool
    """A job's Running condition is True."""
    deleting: bool


def summarize(obj: KubeObject) -> Summary:
    metadata = obj.get("metadata") or {}
    owner: KubeObject = next(
        (ref for ref in metadata.get("ownerReferences") or [] if ref.get("controller")), {}
    )
    status = obj.get("status") or {}
    conditions = status.get("conditions") or []
    return Summary(
        name=str(metadata.get("name", "")),
        uid=str(metadata.get("uid", "")),
        owner_uid=str(owner.get("uid", "")),
        node=str((obj.get("spec") or {}).get("nodeName") or ""),
        phase=str(status.get("phase") or ""),
        running_condition=any(c.get("type") == "Running" and c.get("status") == "True" for c in conditions),
        deleting=bool(metadata.get("deletionTimestamp")),
    )


@dataclass
class Mirror:
    """The objects of one collection, by name."""

    api: KubeApi
    path: str
    on_change: Callable[[KubeObject], None] = lambda _: None
    """Called (on the mirror's thread) with every object listed or changed."""
    objects: dict[str, Summary] = field(default_factory=dict)
    relists: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._follow, name=f"mirror {self.path}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=WATCH_SECONDS + 15)

    def snapshot(self) -> list[Summary]:
        with self._lock:
            return list(self.objects.values())

    def _follow(self) -> None:
        while not self._stopping.is_set():
            try:
                version = self._list()
                while not self._stopping.is_set():
                    version = self._watch(version)
            except (ApiError, httpx.HTTPError, OSError, KeyError, ValueError):
                self._stopping.wait(RELIST_DELAY_SECONDS)

    def _list(self) -> str:
        listing = self.api.get(self.path)
        items = listing.get("items") or []
        with self._lock:
            self.objects = {summary.name: summary for summary in map(summarize, items)}
            self.relists += 1
        for item in items:
            self.on_change(item)
        return str(listing["metadata"]["resourceVersion"])

    def _watch(self, version: str) -> str:
        for kind, obj in self.api.watch(self.path, version, WATCH_SECONDS):
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if kind == "BOOKMARK":
                continue
            summary = summarize(obj)
            with self._lock:
                if kind == "DELETED":
                    self.objects.pop(summary.name, None)
                else:
                    self.objects[summary.name] = summary
            if kind != "DELETED":
                self.on_change(obj)
            if self._stopping.is_set():
                break
        return version


def wait_for(probe: Callable[[], Any], what: str, timeout: float = PATIENCE) -> Any:
    """``probe()`` once truthy; ``timeout`` only where a wait is known to take longer than PATIENCE."""
    return eventually(probe, what, timeout)
