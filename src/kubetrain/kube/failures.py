"""Keeping a job's failure record (``engine.failures``) in ``<job>-failure``, before its pods can go.

On every reconcile of a job whose replicas show a failure, the controller asks the engine what the record
should be, and this keeper makes it so *before* the Decision is carried out: the failed containers' last lines
are read through ``pods/log`` (``GET .../log?container=C&tailLines=N``, ``previous=true`` for a container
that runs or waits again) while the pods still exist, the ConfigMap is written, and the first failure is
announced with a Warning event. So a job failed and cleaned up in one reconcile (``cleanPodPolicy: All``,
``restartPolicy: Never``) keeps its lines.

Costs are bounded: nothing is read or written for a job none of whose replicas failed; each job's record is
remembered as last written (``REMEMBERED`` jobs, least recently used forgotten first, then read again from
the ConfigMap when needed: an operator restart does the same); a log that cannot be read (a lost node, a
fake node) is not asked for again; reads run together and each gives up after ``READ_TIMEOUT`` seconds. A
write that fails is retried on a later reconcile (``keep`` says when); it never stops the reconcile's other
work.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.failures import (
    MAX_LINE_BYTES,
    MAX_LINES,
    FailureRecord,
    LinesWanted,
    ReplicaFailure,
    first_failure_event,
    lines_wanted,
    observed_failures,
    record_failures,
    with_lines,
)
from kubetrain.engine.types import ObservedReplica
from kubetrain.frameworks.base import Framework
from kubetrain.kube.events import EventRecord, EventRecorder
from kubetrain.kube.failure_config_map import failure_config_map_name, read_record, render_record
from kubetrain.kube.render import owner_reference
from kubetrain.kube.runtime.client import raise_for_status
from kubetrain.kube.runtime.http import HttpApi
from kubetrain.kube.runtime.store import KubeObject

log = logging.getLogger(__name__)

REMEMBERED = 256
"""Jobs whose record is remembered as written: at most about 40 KiB each (``engine.failures``' bounds)."""
UNREADABLE_REMEMBERED = 4096
"""Logs remembered as unreadable, so that they are not asked for again."""
READ_TIMEOUT = 5.0
"""Seconds a log read may take (a node that does not answer): the reconcile waits for it."""
READ_BYTES = 16 * MAX_LINE_BYTES
"""At most this much of a log is read (the last ``MAX_LINES`` lines; ``engine.failures`` keeps their end)."""
RETRY_AFTER = 5.0
"""When to reconcile again after a record could not be written."""


@dataclass
class _Kept:
    record: FailureRecord | None
    version: str | None = None
    """The ConfigMap's resourceVersion as last read or written; None while there is none."""
    written: bool = True
    """``record`` is what the ConfigMap holds (False: a write failed, to be tried again)."""


class FailureKeeper:
    def __init__(
        self,
        reads: HttpApi,
        writes: HttpApi,
        events: EventRecorder,
        *,
        capacity: int = REMEMBERED,
        read_timeout: float = READ_TIMEOUT,
    ) -> None:
        self._reads = reads
        self._writes = writes
        self._events = events
        self._capacity = capacity
        self._read_timeout = read_timeout
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._unreadable: OrderedDict[tuple[str, ReplicaFailure], None] = OrderedDict()
        self.reads = 0
        """Log reads sent."""
        self.writes = 0
        """Records written."""

    def forget(self, uid: str) -> None:
        """The job is gone (its ConfigMap goes with it)."""
        self._kept.pop(uid, None)

    async def keep(
        self,
        stored: KubeObject,
        job: TrainingJob,
        framework: Framework[Any],
        replicas: Sequence[ObservedReplica],
        now: datetime,
    ) -> float | None:
        """Bring ``<job>-failure`` up to date with what ``replicas`` show; ``job`` as stored (its status
        before this reconcile). Returns when to look again when a write failed, else None."""
        uid = str(job.metadata.uid or "")
        if uid not in self._kept and not observed_failures(job, framework, replicas, now):
            return None  # the common case: nothing failed, nothing read
        kept = await self._recorded(job, uid)
        record = record_failures(job, framework, replicas, kept.record, now)
        if record is None:
            return None
        wanted = lines_wanted(record, replicas)
        if wanted:
            record = with_lines(record, await self._read_lines(job.namespace, wanted))
        if record == kept.record and kept.written:
            return None
        announce = kept.record is None
        try:
            kept.version = await self._write(record, job, kept.version)
        except Exception as error:
            kept.record, kept.written = record, False
            log.warning("cannot keep the failure record of %s/%s: %s", job.namespace, job.name, error)
            return RETRY_AFTER
        kept.record, kept.written = record, True
        self.writes += 1
        if announce:
            event = first_failure_event(job, record)
            component = framework.event_source or framework.controller_name
            self._events.record(EventRecord(stored, str(event.type), event.reason, event.message, component))
        return None

    async def _recorded(self, job: TrainingJob, uid: str) -> _Kept:
        kept = self._kept.get(uid)
        if kept is None:
            path = _path(job.namespace, failure_config_map_name(job.name))
            response = await self._reads.get(path)
            if response.status_code == 404:
                kept = _Kept(None)
            else:
                raise_for_status(response, response.content)
                config_map = response.json()
                version = (config_map.get("metadata") or {}).get("resourceVersion")
                # Another job's (the name's previous owner, not yet collected): replaced on the first write.
                kept = _Kept(read_record(config_map, uid), str(version) if version else None)
            self._kept[uid] = kept
        self._kept.move_to_end(uid)
        while len(self._kept) > self._capacity:
            self._kept.popitem(last=False)
        return kept

    async def _read_lines(self, namespace: str, wanted: Sequence[LinesWanted]) -> dict[ReplicaFailure, str]:
        todo = [w for w in wanted if (namespace, w.failure) not in self._unreadable]
        texts = await asyncio.gather(*(self._read(namespace, w) for w in todo))
        lines: dict[ReplicaFailure, str] = {}
        for entry, text in zip(todo, texts, strict=True):
            if text:
                lines[entry.failure] = text
            else:
                self._unreadable[(namespace, entry.failure)] = None
                while len(self._unreadable) > UNREADABLE_REMEMBERED:
                    self._unreadable.popitem(last=False)
        return lines

    async def _read(self, namespace: str, wanted: LinesWanted) -> str:
        failure = wanted.failure
        params = {
            "container": failure.container or "",
            "tailLines": str(MAX_LINES),
            "limitBytes": str(READ_BYTES),
        }
        if wanted.previous:
            params["previous"] = "true"
        self.reads += 1
        try:
            response = await asyncio.wait_for(
                self._reads.get(f"/api/v1/namespaces/{namespace}/pods/{failure.pod}/log", params=params),
                self._read_timeout,
            )
        except Exception as error:  # the node is gone or does not answer: kept without its lines
            log.debug("log of %s/%s %s: %s", namespace, failure.pod, failure.container, error)
            return ""
        if response.status_code != 200:
            log.debug("log of %s/%s: HTTP %s", namespace, failure.pod, response.status_code)
            return ""
        return response.content.decode("utf-8", errors="replace")

    async def _write(self, record: FailureRecord, job: TrainingJob, version: str | None) -> str | None:
        """Create or replace the ConfigMap; returns its new resourceVersion. One that was written meanwhile
        (another operator replica before a hand-over, or the name's previous owner's) is replaced."""
        body = render_record(record, job.name, job.namespace, owner_reference(job))
        path = _path(job.namespace, body["metadata"]["name"])
        if version is None:
            response = await self._writes.post(f"/api/v1/namespaces/{job.namespace}/configmaps", json=body)
            if response.status_code != 409:
                raise_for_status(response, response.content)
                return _version(response.json())
        for attempt in range(2):
            if version is None or attempt:
                current = await self._reads.get(path)
                raise_for_status(current, current.content)
                version = _version(current.json())
            body["metadata"]["resourceVersion"] = version
            response = await self._writes.put(path, json=body)
            if response.status_code != 409:
                break
        raise_for_status(response, response.content)
        return _version(response.json())


def _path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps/{name}"


def _version(obj: KubeObject) -> str | None:
    version = (obj.get("metadata") or {}).get("resourceVersion")
    return str(version) if version else None
