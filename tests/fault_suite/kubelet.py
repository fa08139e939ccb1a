"""The kubelet of a burst: every pod the scheduler binds to a fake node is started (Running, Ready, a pod IP)
as soon as the pod mirror sees it bound, through envtest's pod driver.

A pod whose start fails (the API server is down) is tried again half a second later; one that is gone is
forgotten. Pods already Running are left alone, so a relist after a fault re-offers only what is left.
"""

from __future__ import annotations

import queue
import threading

import httpx

from kubetrain.envtest.kubeapi import ApiError, KubeApi, KubeObject
from kubetrain.envtest.poddriver import PodDriver, PodDriverError

RETRY_SECONDS = 0.5


class BurstKubelet:
    def __init__(self, api: KubeApi, namespace: str) -> None:
        self._driver = PodDriver(api)
        self._namespace = namespace
        self._pending: queue.Queue[str | None] = queue.Queue()
        self._offered: set[str] = set()
        """Uids queued or started: a pod is started once, however often the mirror shows it."""
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._start_pods, name="burst kubelet", daemon=True)
        self.started = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._pending.put(None)
        self._thread.join(timeout=30)

    def offer(self, pod: KubeObject) -> None:
        """A pod the mirror listed or saw change: queue it if it is bound and not yet running."""
        metadata = pod.get("metadata") or {}
        status = pod.get("status") or {}
        bound = bool((pod.get("spec") or {}).get("nodeName"))
        if not bound or metadata.get("deletionTimestamp") or status.get("phase") in ("Running", "Succeeded"):
            return
        uid = str(metadata.get("uid"))
        with self._lock:
            if uid in self._offered:
                return
            self._offered.add(uid)
        self._pending.put(str(metadata["name"]))

    def _start_pods(self) -> None:
        while (name := self._pending.get()) is not None:
            try:
                self._driver.run((self._namespace, name))
                self.started += 1
            except ApiError as error:
                if error.code != 404:
                    self._retry_later(name)
            except (httpx.HTTPError, OSError, PodDriverError):
                self._retry_later(name)

    def _retry_later(self, name: str) -> None:
        timer = threading.Timer(RETRY_SECONDS, self._pending.put, args=(name,))
        timer.daemon = True
        timer.start()
