"""A work queue of keys with client-go's guarantees.

- A key waits in the queue at most once: adding it again while it waits does nothing.
- A key is handed to one worker at a time: added while a worker holds it, it is queued again once, after
  ``done``.
- ``add_after`` delays a key (deadlines, TTL); a key already waiting for a later time moves earlier, never
  later.
- ``add_rate_limited`` delays a key by client-go's default controller rate limit: the larger of a per-key
  exponential backoff (5 ms doubling up to 1000 s, until ``forget`` resets it) and an overall token bucket
  (10 retries per second after a burst of 100), so an API outage failing every key at once does not
  become a retry storm when it ends.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from kubetrain.kube.runtime.clock import Clock, LoopClock, sleep_or_wake

K = TypeVar("K", bound=Hashable)

DEFAULT_BASE_DELAY = 0.005
DEFAULT_MAX_DELAY = 1000.0
DEFAULT_RETRY_QPS = 10.0
DEFAULT_RETRY_BURST = 100


class QueueShutDownError(Exception):
    """``get`` on a queue that was shut down and has nothing left to hand out."""


class WorkQueue(Generic[K]):
    def __init__(
        self,
        *,
        clock: Clock | None = None,
        base_delay: float = DEFAULT_BASE_DELAY,
        max_delay: float = DEFAULT_MAX_DELAY,
        retry_qps: float = DEFAULT_RETRY_QPS,
        retry_burst: int = DEFAULT_RETRY_BURST,
    ) -> None:
        if base_delay <= 0 or max_delay < base_delay:
            raise ValueError("need 0 < base_delay <= max_delay")
        if retry_qps <= 0 or retry_burst < 1:
            raise ValueError("need retry_qps > 0 and retry_burst >= 1")
        self._clock = clock or LoopClock()
        self._retry_qps = retry_qps
        self._retry_burst = float(retry_burst)
        self._retry_tokens = self._retry_burst
        self._retry_tokens_at = self._clock.monotonic()
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._ready: deque[K] = deque()
        self._dirty: set[K] = set()
        """Keys that need processing: waiting in ``_ready``, or re-added while a worker holds them."""
        self._processing: set[K] = set()
        self._delayed: list[tuple[float, int, K]] = []
        self._deadlines: dict[K, float] = {}
        """The one live deadline per delayed key; heap entries with another deadline are stale."""
        self._order = itertools.count()
        self._failures: dict[K, int] = {}
        self._getters: deque[asyncio.Future[None]] = deque()
        self._delayer: asyncio.Task[None] | None = None
        self._delayer_wake = asyncio.Event()
        self._shutting_down = False

    def __len__(self) -> int:
        """Keys ready to be handed out (the queue-depth metric); delayed keys are not counted."""
        return len(self._ready)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def add(self, key: K) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return  # handed out again by done()
        self._ready.append(key)
        self._wake_one_getter()

    def add_after(self, key: K, seconds: float) -> None:
        if self._shutting_down:
            return
        if seconds <= 0:
            self.add(key)
            return
        deadline = self._clock.monotonic() + seconds
        current = self._deadlines.get(key)
        if current is not None and current <= deadline:
            return
        self._deadlines[key] = deadline
        heapq.heappush(self._delayed, (deadline, next(self._order), key))
        self._ensure_delayer()
        self._delayer_wake.set()

    def add_rate_limited(self, key: K) -> None:
        self.add_after(key, self.next_backoff(key))

    def next_backoff(self, key: K) -> float:
        """The delay for this key's next failure, counting it: the larger of base·2^failures (capped at the
        maximum) and the wait for a token of the overall retry bucket."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        # Past ~2^60 the float is far above any sane cap; clamp the exponent so it never overflows.
        per_key = min(self._base_delay * 2.0 ** min(failures, 60), self._max_delay)
        return max(per_key, self._reserve_retry_token())

    def _reserve_retry_token(self) -> float:
        """Take a token from the overall retry bucket; returns how long until it is really available."""
        now = self._clock.monotonic()
        elapsed = now - self._retry_tokens_at
        self._retry_tokens = min(self._retry_burst, self._retry_tokens + elapsed * self._retry_qps)
        self._retry_tokens_at = now
        self._retry_tokens -= 1
        return max(0.0, -self._retry_tokens / self._retry_qps)

    def num_requeues(self, key: K) -> int:
        return self._failures.get(key, 0)

    def forget(self, key: K) -> None:
        """Reset the key's backoff (after a successful reconcile)."""
        self._failures.pop(key, None)

    async def get(self) -> K:
        """The next ready key, waiting for one; the caller must call ``done(key)`` when finished with it."""
        while True:
            if self._ready:
                key = self._ready.popleft()
                self._dirty.discard(key)
                self._processing.add(key)
                return key
            if self._shutting_down:
                raise QueueShutDownError
            getter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(getter)
            try:
                await getter
            except asyncio.CancelledError:
                if getter.done() and not getter.cancelled():
                    self._wake_one_getter()  # we were woken for a key we will not take: pass it on
                raise

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._ready.append(key)
            self._wake_one_getter()

    def is_processing(self, key: K) -> bool:
        return key in self._processing

    def shutdown(self, *, drain: bool = True) -> None:
        """Stop accepting keys and drop delayed ones.

        ``get`` hands out what is ready (unless ``drain`` is False) and then raises QueueShutDownError.
        """
        self._shutting_down = True
        self._delayed.clear()
        self._deadlines.clear()
        if not drain:
            self._ready.clear()
            self._dirty.clear()
        if self._delayer is not None:
            self._delayer.cancel()
            self._delayer = None
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)

    def _wake_one_getter(self) -> None:
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
                return

    def _ensure_delayer(self) -> None:
        if self._delayer is None or self._delayer.done():
            self._delayer = asyncio.get_running_loop().create_task(self._release_due_keys())

    async def _release_due_keys(self) -> None:
        while not self._shutting_down:
            now = self._clock.monotonic()
            while self._delayed and self._delayed[0][0] <= now:
                deadline, _, key = heapq.heappop(self._delayed)
                if self._deadlines.get(key) == deadline:
                    del self._deadlines[key]
                    self.add(key)
            self._delayer_wake.clear()
            timeout = self._delayed[0][0] - now if self._delayed else None
            await sleep_or_wake(self._clock, timeout, self._delayer_wake)
