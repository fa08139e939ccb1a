"""Each job's report history (``api.progress.ProgressHistory``) in a ConfigMap the job owns, so that it
survives an operator restart and goes when the job goes.

Where it lives, and why: ``status.trainerStatus`` holds the latest report, as Trainer v2 does; the history is
larger (up to ``MAX_HISTORY_POINTS`` points, a few hundred kilobytes at worst) and changes with every report,
so in the status it would make every watch event, list and ``kubectl get -o yaml`` of the job that much
heavier, and every write of it would race the reconciler's. A ConfigMap ``<job>-progress-history`` owned by
the job is read only by who asks for it (the SDK's ``get_job_progress_history``, the Jobs view), is deleted
with the job by the garbage collector, and is written on its own schedule: every ``FLUSH_PERIOD`` seconds per
reporting job, not per report.

Each operator replica keeps the points it received since its last write, and the history as it last wrote
it with its resourceVersion. A write merges the pending points into that copy (or into the stored history,
read again after a 409 or when it has none: another replica writes the same ConfigMap) and updates it under
that resourceVersion. Memory is bounded: a job's pending points are a ``ProgressHistory`` (itself bounded),
at most ``MAX_JOBS`` jobs are followed, and a job silent for ``IDLE_AFTER`` seconds is forgotten once its
points are written.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api.progress import ProgressHistory, StatusTarget, TrainerStatus
from kubetrain.frameworks.labels import JOB_NAME_LABEL
from kubetrain.kube.runtime.client import raise_for_status
from kubetrain.kube.runtime.http import HttpApi
from kubetrain.kube.runtime.store import KubeObject, Store
from kubetrain.kube.status.authenticator import job_uid_of
from kubetrain.kube.status.history_config_map import (
    COMPONENT,
    COMPONENT_LABEL,
    HISTORY_KEY,
    history_config_map_name,
    owned_by,
    read_history,
)
from kubetrain.progress.server import Reporter

log = logging.getLogger(__name__)

FLUSH_PERIOD = 12.0
FIRST_FLUSH = 2.0
"""A job's first points are written soon, so its curve appears in seconds."""
IDLE_AFTER = 300.0
MAX_JOBS = 5_000


@dataclass
class HistoryCounts:
    written: int = 0
    conflicts: int = 0
    failed: int = 0


@dataclass
class _Followed:
    target: StatusTarget
    job_uid: str
    due: float
    last_report: float
    pending: ProgressHistory = field(default_factory=ProgressHistory)
    written: ProgressHistory | None = None
    version: str | None = None


class HistoryRecorder:
    def __init__(
        self,
        http: HttpApi,
        jobs: Callable[[StatusTarget], Store | None],
        *,
        flush_period: float = FLUSH_PERIOD,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._http = http
        self._jobs = jobs
        self._flush_period = flush_period
        self._clock = clock
        self._followed: OrderedDict[str, _Followed] = OrderedDict()
        self.counts = HistoryCounts()

    def __len__(self) -> int:
        return len(self._followed)

    def accept(self, target: StatusTarget, status: TrainerStatus, reporter: Reporter) -> None:
        now = self._clock()
        job_uid = job_uid_of(reporter)
        followed = self._followed.pop(target.path, None)
        if followed is None or followed.job_uid != job_uid:
            followed = _Followed(target, job_uid, due=now + FIRST_FLUSH, last_report=now)
        followed.last_report = now
        followed.pending.add(status)
        self._followed[target.path] = followed  # most recently reported last
        while len(self._followed) > MAX_JOBS:
            _, dropped = self._followed.popitem(last=False)
            log.warning(
                "status endpoint: following too many jobs' histories; dropped %s's", dropped.target.key
            )

    async def run(self, tick: float = 1.0) -> None:
        while True:
            await asyncio.sleep(tick)
            await self.flush_due()

    async def flush_due(self, *, everything: bool = False) -> None:
        """Write the histories that are due (all with pending points when ``everything``: shutdown)."""
        now = self._clock()
        for path, followed in list(self._followed.items()):
            if followed.pending.points and (everything or now >= followed.due):
                followed.due = now + self._flush_period
                try:
                    await self._flush(followed)
                except Exception as error:
                    self.counts.failed += 1
                    log.warning(
                        "status endpoint: writing %s's history failed: %s", followed.target.key, error
                    )
            if not followed.pending.points and now - followed.last_report >= IDLE_AFTER:
                self._followed.pop(path, None)

    async def _flush(self, followed: _Followed) -> None:
        target = followed.target
        jobs = self._jobs(target)
        job = jobs.get(target.key) if jobs is not None else None
        if job is None or _uid(job) != followed.job_uid:
            self._followed.pop(target.path, None)  # the job is gone: so is its ConfigMap
            return
        collection = f"/api/v1/namespaces/{target.namespace}/configmaps"
        path = f"{collection}/{history_config_map_name(target.name)}"
        for _ in range(3):
            if followed.written is None:
                current = await self._http.get(path)
                if current.status_code == 404:
                    followed.written, followed.version = ProgressHistory(), None
                else:
                    raise_for_status(current, current.content)
                    stored = current.json()
                    if not owned_by(stored, followed.job_uid):
                        # Not this job's (a previous job of the name, not yet collected, or the user's own):
                        # never written over; the points wait for the next period.
                        log.info("status endpoint: %s is not %s's; its history waits", path, target.key)
                        return
                    followed.written = read_history(stored, followed.job_uid)
                    followed.version = str((stored.get("metadata") or {}).get("resourceVersion") or "")
            merged = ProgressHistory.from_json(followed.written.to_json())
            merged.merge(followed.pending)
            body = self._config_map(target, job, merged, followed.version)
            if followed.version is None:
                response = await self._http.post(collection, json=body)
            else:
                response = await self._http.put(path, json=body)
            if response.status_code == 409:
                self.counts.conflicts += 1
                followed.written = None  # another replica wrote: read theirs and merge again
                continue
            raise_for_status(response, response.content)
            followed.written = merged
            followed.version = str((response.json().get("metadata") or {}).get("resourceVersion") or "")
            followed.pending = ProgressHistory()
            self.counts.written += 1
            return
        raise RuntimeError(f"{path} kept changing under three writes in a row")

    def _config_map(
        self, target: StatusTarget, job: KubeObject, history: ProgressHistory, version: str | None
    ) -> dict[str, Any]:
        metadata: dict[str, Any] = {
            "name": history_config_map_name(target.name),
            "namespace": target.namespace,
            "labels": {JOB_NAME_LABEL: target.name, COMPONENT_LABEL: COMPONENT},
            "ownerReferences": [
                {
                    "apiVersion": target.api_version,
                    "kind": str(job.get("kind") or ""),
                    "name": target.name,
                    "uid": _uid(job),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        }
        if version is not None:
            metadata["resourceVersion"] = version
        data = {HISTORY_KEY: json.dumps(history.to_json(), separators=(",", ":"))}
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


def _uid(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")
