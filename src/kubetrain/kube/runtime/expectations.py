"""Creations and deletions in flight, remembered until the watch shows them (upstream ControllerExpectations).

A reconcile creates a pod and returns; the next reconcile may run before the informer cache has seen that
pod. Without a record of "one creation in flight" it would count one pod too few and create a duplicate. So
each create/delete raises a counter before the API call, the watch event lowers it, and a reconcile only acts
on the cache once every counter it relies on is back to zero. A record older than five minutes counts as
satisfied, so a lost watch event delays a job by minutes, never forever.

Keys are opaque strings; upstream's are ``<namespace>/<job>/<lowercase replica type>/{pods,services}``
(``expectation_key`` builds one).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

EXPECTATIONS_TIMEOUT_SECONDS = 5 * 60


def expectation_key(job_key: str, replica_type: str, resource: str) -> str:
    """``<namespace>/<job>/<lowercase replica type>/<resource>``, e.g. ``ns/mnist/worker/pods``."""
    return f"{job_key}/{replica_type.lower()}/{resource}"


@dataclass
class _Record:
    creations: int
    deletions: int
    since: float

    @property
    def fulfilled(self) -> bool:
        return self.creations <= 0 and self.deletions <= 0


class Expectations:
    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        timeout: float = EXPECTATIONS_TIMEOUT_SECONDS,
    ) -> None:
        self._clock = clock
        self._timeout = timeout
        self._records: dict[str, _Record] = {}

    def satisfied(self, key: str) -> bool:
        """True when nothing is in flight for the key, or what is in flight is older than the timeout."""
        record = self._records.get(key)
        if record is None or record.fulfilled:
            return True
        return self._clock() - record.since > self._timeout

    def pending(self, key: str) -> tuple[int, int]:
        """(creations, deletions) still expected for the key."""
        record = self._records.get(key)
        return (0, 0) if record is None else (record.creations, record.deletions)

    def expect_creations(self, key: str, count: int = 1) -> None:
        """Call before creating ``count`` objects."""
        self._raise(key, creations=count, deletions=0)

    def expect_deletions(self, key: str, count: int = 1) -> None:
        """Call before deleting ``count`` objects."""
        self._raise(key, creations=0, deletions=count)

    def creation_observed(self, key: str) -> None:
        """The watch showed one of the expected objects created."""
        self._lower(key, creations=1, deletions=0)

    def deletion_observed(self, key: str) -> None:
        """The watch showed one of the expected objects deleted."""
        self._lower(key, creations=0, deletions=1)

    def lower_on_error(self, key: str, *, creations: int = 0, deletions: int = 0) -> None:
        """The API call failed, so the watch will never show it: stop expecting it."""
        self._lower(key, creations=creations, deletions=deletions)

    def reset(self, key: str) -> None:
        """Expect nothing for the key from now on (upstream resets every key at the start of a reconcile)."""
        self._records[key] = _Record(0, 0, self._clock())

    def delete(self, key: str) -> None:
        """Forget the key (its job is gone)."""
        self._records.pop(key, None)

    def delete_prefix(self, prefix: str) -> None:
        """Forget every key starting with ``prefix`` (e.g. all of one job's keys)."""
        for key in [key for key in self._records if key.startswith(prefix)]:
            del self._records[key]

    def _raise(self, key: str, *, creations: int, deletions: int) -> None:
        record = self._records.get(key)
        if record is None or record.fulfilled:
            # A fresh batch starts the timeout; raising a batch still in flight does not extend it, so a key
            # whose watch events are lost still expires.
            self._records[key] = _Record(creations, deletions, self._clock())
            return
        record.creations += creations
        record.deletions += deletions

    def _lower(self, key: str, *, creations: int, deletions: int) -> None:
        record = self._records.get(key)
        if record is not None:
            record.creations -= creations
            record.deletions -= deletions
