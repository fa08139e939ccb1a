"""Report a training job's progress and metrics from inside its processes, with the standard library only.

The substrates inject three variables into every replica's containers, Kubeflow Trainer v2.3's
(``KUBEFLOW_TRAINER_SERVER_URL``, ``_CA_CERT``, ``_TOKEN``): the whole URL of the job's status endpoint, the
CA certificate that endpoint's TLS certificate chains to, and a file holding the bearer token to send. This
module imports nothing but the standard library, so it may be copied, as this one file, into an image that
does not have kubetrain installed.

In a training loop::

    from kubetrain.reporting import ProgressReporter

    reporter = ProgressReporter()
    for step in range(start, total_steps):
        loss = train_step()
        reporter.report_step(step + 1, total_steps, metrics={"loss": loss})

or, without keeping a reporter, ``report_progress(40, eta_seconds=600, metrics={"loss": 0.23})``.

What the helper promises a training loop:

- **it never raises** and **never blocks a step**: ``report`` stores the values and returns; a daemon thread
  sends them. A report not sent yet is replaced by a newer one (the newest values are what matter).
- **it throttles**: at most one request every ``interval`` seconds (5 by default); what is reported in
  between is sent, latest values only, when the interval is over. At process exit a report still waiting is
  sent if that takes at most a couple of seconds.
- **it drops reports while the endpoint is down** and backs off (up to a minute) instead of queueing, and it
  waits as long as a ``429``'s ``Retry-After`` says.
- **it re-reads the token file for every request** (tokens rotate) and **trusts only the given CA**.
- **without the variables it does nothing at all**, so the same script runs anywhere: on a laptop, in
  ``kubetrain run``, on a cluster.

Where those are absent, the spellings of earlier drafts of the protocol are read
(``KUBEFLOW_TRAINER_STATUS_SERVER_URL``..., which kubetrain injected before, and
``KUBEFLOW_TRAINER_STATUS_URL``...), so a pod made by an earlier kubetrain still reports. Every report is
one Trainer v2.3's status server accepts too (its ``lastUpdatedTime`` set, its metrics within its bounds).
"""

from __future__ import annotations

import atexit
import http.client
import json
import logging
import math
import os
import ssl
import threading
import time
import urllib.parse
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import SupportsFloat

STATUS_SERVER_URL_ENV = "KUBEFLOW_TRAINER_SERVER_URL"
STATUS_SERVER_CA_CERT_ENV = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
STATUS_SERVER_TOKEN_ENV = "KUBEFLOW_TRAINER_SERVER_TOKEN"
"""Kubeflow Trainer v2.3's names (``pkg/runtime/framework/plugins/trainjobstatus``): what both substrates
inject."""

VARIABLE_SPELLINGS: tuple[tuple[str, str, str], ...] = (
    (STATUS_SERVER_URL_ENV, STATUS_SERVER_CA_CERT_ENV, STATUS_SERVER_TOKEN_ENV),
    (
        "KUBEFLOW_TRAINER_STATUS_SERVER_URL",
        "KUBEFLOW_TRAINER_STATUS_SERVER_CA_CERT",
        "KUBEFLOW_TRAINER_STATUS_SERVER_TOKEN",
    ),
    ("KUBEFLOW_TRAINER_STATUS_URL", "KUBEFLOW_TRAINER_STATUS_CA_CERT", "KUBEFLOW_TRAINER_STATUS_TOKEN"),
)
"""(URL, CA, token) variable names, first found first: Trainer v2.3's, then earlier drafts' (the first of
them what kubetrain injected until it took Trainer v2.3's)."""

DEFAULT_INTERVAL = 5.0
"""Seconds between two requests of one reporter: Trainer v2's helper's throttle, far inside the endpoints'
per-token limit (a burst of 5, then 2 a second)."""
REQUEST_TIMEOUT = 5.0
"""Seconds one request may take (connect, TLS, answer): it only ever holds up the sending thread."""
MAX_BACKOFF = 60.0
"""The longest wait between tries while the endpoint is down."""
EXIT_FLUSH_SECONDS = 2.0
"""How long a process's exit may wait for its last report to be sent."""

MAX_METRICS = 256
MAX_METRIC_NAME = 64
MAX_METRIC_VALUE = 64
MAX_REMAINING_SECONDS = 2**31 - 1
"""The bounds every endpoint takes, kubetrain's for every kind and Trainer v2.3's TrainJob's (the narrower,
``kubetrain.api.progress.TRAINJOB_REPORT_LIMITS``): a report beyond them would be refused whole, so the
helper leaves out what does not fit instead."""
_MAX_ANSWER_BYTES = 64 * 1024

log = logging.getLogger(__name__)

MetricValue = object
"""A metric's value: a number, a string, or anything with ``item()`` or ``__float__`` (a NumPy or PyTorch
scalar)."""


@dataclass(frozen=True)
class StatusEndpoint:
    """Where reports go: the whole URL of the job's status path, the CA file to trust, the token file."""

    url: str
    ca_file: str | None
    token_file: str

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> StatusEndpoint | None:
        """The endpoint the variables describe, or None when there is none (or it is unusable)."""
        environ = os.environ if environ is None else environ
        for url_name, ca_name, token_name in VARIABLE_SPELLINGS:
            url = environ.get(url_name, "").strip()
            if not url:
                continue
            token_file = environ.get(token_name, "").strip()
            if urllib.parse.urlsplit(url).scheme != "https" or not token_file:
                # A bearer token is never sent in clear text, and without one every report would be refused.
                log.warning(
                    "%s is set but progress is not reported: it needs an https:// URL and %s",
                    url_name,
                    token_name,
                )
                return None
            return cls(url, environ.get(ca_name, "").strip() or None, token_file)
        return None


def trainer_status(
    progress: float | None = None,
    eta_seconds: float | timedelta | None = None,
    metrics: Mapping[str, MetricValue] | None = None,
) -> dict[str, object]:
    """The ``trainerStatus`` of a report: what fits the protocol, the rest left out (never an error)."""
    status: dict[str, object] = {}
    percentage = _number(progress)
    if percentage is not None:
        status["progressPercentage"] = min(100, max(0, math.floor(percentage)))
    if isinstance(eta_seconds, timedelta):
        eta_seconds = eta_seconds.total_seconds()
    remaining = _number(eta_seconds)
    if remaining is not None:
        status["estimatedRemainingSeconds"] = min(MAX_REMAINING_SECONDS, max(0, round(remaining)))
    listed = _metrics(metrics)
    if listed:
        status["metrics"] = listed
    return status


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _metrics(metrics: Mapping[str, MetricValue] | None) -> list[dict[str, str]]:
    if not isinstance(metrics, Mapping):
        return []
    listed: list[dict[str, str]] = []
    seen: set[str] = set()
    for name, value in metrics.items():
        text = metric_text(value)
        key = str(name)
        if text is None or not 0 < len(key) <= MAX_METRIC_NAME or key in seen:
            continue
        seen.add(key)
        listed.append({"name": key, "value": text})
        if len(listed) == MAX_METRICS:
            break
    return listed


def metric_text(value: MetricValue) -> str | None:
    """A metric's value as the string the protocol carries: numbers in full (``repr``), strings as they are;
    None for what has no value (an empty string) or cannot be read."""
    try:
        if not isinstance(value, str | int | float):
            # A NumPy or PyTorch scalar: its Python number (for a tensor on a GPU this waits for the GPU, so
            # pass ``loss.item()`` where you have it already).
            item = getattr(value, "item", None)
            if callable(item):
                value = item()
            elif isinstance(value, SupportsFloat):
                value = float(value)
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, float):
            text = repr(float(value))  # a float subclass (NumPy's float64) may repr itself otherwise
        elif isinstance(value, int):
            text = str(int(value))
        else:
            text = str(value)
    except Exception:
        return None
    return text[:MAX_METRIC_VALUE] or None


@dataclass(frozen=True)
class _Answer:
    """What one try to send a report came to."""

    code: int | None
    """The HTTP status; None when the endpoint was not reached."""
    retry_after: float | None = None
    message: str = ""


class ProgressReporter:
    """Sends a job's progress reports from a background thread: never raises, never blocks the caller.

    ``interval`` is the fewest seconds between two requests; ``timeout`` bounds one request. ``endpoint``
    defaults to what the variables say (``StatusEndpoint.from_environment``); without one every method
    returns at once and nothing is started.
    """

    def __init__(
        self,
        interval: float = DEFAULT_INTERVAL,
        *,
        timeout: float = REQUEST_TIMEOUT,
        endpoint: StatusEndpoint | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.endpoint = endpoint if endpoint is not None else StatusEndpoint.from_environment(environ)
        self.interval = max(0.0, float(interval))
        self.timeout = float(timeout)
        self.sent = 0
        """Reports the endpoint accepted."""
        self.dropped = 0
        """Reports never accepted: replaced by a newer one before they were sent, or lost while the
        endpoint was down."""
        self.refused = 0
        """Reports the endpoint refused for good (4xx other than 429): the warning logged says why."""
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._pending: bytes | None = None
        self._sending = False
        self._urgent = False
        self._next_try = 0.0
        """Monotonic time before which no request is made: the interval, or the backoff while down."""
        self._not_before = 0.0
        """A 429's Retry-After: not even a flush goes earlier."""
        self._backoff = 0.0
        self._thread: threading.Thread | None = None
        self._closed = False
        self._ssl: tuple[tuple[object, ...], ssl.SSLContext] | None = None
        self._down_since: float | None = None
        self._step_origin: tuple[float, float] | None = None

    @property
    def enabled(self) -> bool:
        """Whether there is an endpoint to report to."""
        return self.endpoint is not None

    def report(
        self,
        progress: float | None = None,
        eta_seconds: float | timedelta | None = None,
        metrics: Mapping[str, MetricValue] | None = None,
    ) -> None:
        """Report how complete the training is (0 to 100), the seconds it expects to take still, and its
        latest metrics (name → number or string). Each report replaces the last: leave nothing out that
        should still show. Returns at once; a newer report replaces one not sent yet."""
        if self.endpoint is None or self._closed:
            return
        try:
            status = trainer_status(progress, eta_seconds, metrics)
            # When the values were observed: Trainer v2.3's TrainJob requires it (kubetrain's endpoints
            # replace it with the time they received the report).
            status["lastUpdatedTime"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            body = json.dumps({"trainerStatus": status}).encode()
            with self._lock:
                if self._pending is not None:
                    self.dropped += 1
                self._pending = body
                self._start_thread()
                self._changed.notify_all()
        except Exception:  # the one promise: a report never breaks training
            log.debug("progress report not queued", exc_info=True)

    def report_step(
        self, step: float, total_steps: float, metrics: Mapping[str, MetricValue] | None = None
    ) -> None:
        """Report ``step`` of ``total_steps`` steps done: the percentage, and an ETA from the pace of the
        steps since this reporter's first ``report_step`` (so a run resumed from a checkpoint is timed from
        where it resumed)."""
        if self.endpoint is None or self._closed:
            return
        try:
            now = time.monotonic()
            if self._step_origin is None or step < self._step_origin[0]:
                self._step_origin = (float(step), now)
            first_step, started = self._step_origin
            done, elapsed = step - first_step, now - started
            eta = (total_steps - step) * elapsed / done if done > 0 else None
            progress = 100.0 * step / total_steps if total_steps > 0 else None
            self.report(progress, eta, metrics)
        except Exception:
            log.debug("progress report not queued", exc_info=True)

    def flush(self, timeout: float = EXIT_FLUSH_SECONDS) -> bool:
        """Send a waiting report now, without waiting for the interval, and wait up to ``timeout`` seconds
        for it; True when nothing is left unsent. (A ``Retry-After`` is still honoured.)"""
        if self.endpoint is None:
            return True
        try:
            deadline = time.monotonic() + timeout
            with self._lock:
                self._urgent = True
                self._changed.notify_all()
                while self._pending is not None or self._sending:
                    left = deadline - time.monotonic()
                    if left <= 0 or self._thread is None or not self._thread.is_alive():
                        break
                    self._changed.wait(left)
                return self._pending is None and not self._sending
        except Exception:
            return False

    def close(self, timeout: float = EXIT_FLUSH_SECONDS) -> None:
        """Flush, then stop: later reports are ignored."""
        self.flush(timeout)
        with self._lock:
            self._closed = True
            self._pending = None
            self._changed.notify_all()

    def __enter__(self) -> ProgressReporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the sending thread ----------------------------------------------------------------------

    def _start_thread(self) -> None:
        """With the lock held."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._thread = threading.Thread(target=self._send_loop, name="kubetrain-progress", daemon=True)
        self._thread.start()
        _live_reporters.add(self)

    def _send_loop(self) -> None:
        while True:
            with self._lock:
                body = self._next_body()
                if body is None:
                    return
                self._sending = True
            try:
                answer = self._send(body)
            except Exception as error:  # nothing may end the thread but close()
                answer = _Answer(None, message=f"{type(error).__name__}: {error}")
            with self._lock:
                self._sending = False
                self._settle(body, answer)
                self._changed.notify_all()

    def _next_body(self) -> bytes | None:
        """With the lock held: wait for a report that may go now and take it; None once closed."""
        while True:
            if self._closed:
                return None
            now = time.monotonic()
            due = max(self._not_before, now if self._urgent else self._next_try)
            if self._pending is not None and now >= due:
                body, self._pending = self._pending, None
                return body
            if self._pending is None:
                self._urgent = False
            self._changed.wait(None if self._pending is None else due - now)

    def _settle(self, body: bytes, answer: _Answer) -> None:
        """With the lock held: count the outcome and decide when the next request may go."""
        now = time.monotonic()
        self._next_try = now + self.interval
        if answer.code is not None and 200 <= answer.code < 300:
            self.sent += 1
            self._backoff = 0.0
            if self._down_since is not None:
                log.info("progress reports reach %s again", self._url)
                self._down_since = None
        elif answer.code == 429:
            wait = max(self.interval, answer.retry_after or 0.0)
            self._not_before = self._next_try = now + wait
            if self._pending is None:
                self._pending = body  # refused for now, not for good: the latest values go when allowed
            else:
                self.dropped += 1
        elif answer.code is None or answer.code >= 500:
            self.dropped += 1
            self._backoff = min(MAX_BACKOFF, max(self.interval, 1.0, self._backoff * 2))
            self._next_try = now + self._backoff
            if self._down_since is None:
                self._down_since = now
                log.warning(
                    "progress reports cannot reach %s (%s); dropping them until it answers",
                    self._url,
                    answer.message or f"HTTP {answer.code}",
                )
        else:
            self.refused += 1
            log.warning(
                "the status endpoint refused a progress report (HTTP %s): %s", answer.code, answer.message
            )
        if self._pending is None:
            self._urgent = False

    @property
    def _url(self) -> str:
        return self.endpoint.url if self.endpoint is not None else ""

    def _send(self, body: bytes) -> _Answer:
        """One POST of ``body``, on a connection of its own (a report every few seconds needs no pool)."""
        endpoint = self.endpoint
        assert endpoint is not None
        try:
            token = Path(endpoint.token_file).read_text(encoding="utf-8").strip()
        except OSError as error:
            return _Answer(
                None, message=f"cannot read the token file {endpoint.token_file}: {error.strerror}"
            )
        url = urllib.parse.urlsplit(endpoint.url)
        try:
            context = self._context(endpoint)
        except OSError as error:  # ssl.SSLError is one
            return _Answer(None, message=f"cannot use the CA file {endpoint.ca_file}: {error}")
        connection = http.client.HTTPSConnection(
            url.hostname or "", url.port or 443, context=context, timeout=self.timeout
        )
        try:
            connection.request(
                "POST",
                url.path + (f"?{url.query}" if url.query else ""),
                body=body,
                headers={
                    "Authorization": f"Bearer {token}",
                    "Content-Type": "application/json",
                    "User-Agent": "kubetrain-reporting",
                },
            )
            response = connection.getresponse()
            answer = response.read(_MAX_ANSWER_BYTES)
            return _Answer(response.status, _retry_after(response.getheader("Retry-After")), _message(answer))
        except (OSError, http.client.HTTPException) as error:
            return _Answer(None, message=str(error) or type(error).__name__)
        finally:
            connection.close()

    def _context(self, endpoint: StatusEndpoint) -> ssl.SSLContext:
        """A TLS context trusting only the CA file (the system's CAs when none is given), made again when the
        file changes (the CA is renewed)."""
        key: tuple[object, ...] = (endpoint.ca_file,)
        if endpoint.ca_file is not None:
            stat = Path(endpoint.ca_file).stat()
            key = (endpoint.ca_file, stat.st_mtime_ns, stat.st_size, stat.st_ino)
        if self._ssl is None or self._ssl[0] != key:
            context = ssl.create_default_context(cafile=endpoint.ca_file)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            self._ssl = (key, context)
        return self._ssl[1]

    def _after_fork(self) -> None:
        """In a forked child (a data loader's worker): the parent's thread and lock state do not exist here,
        and the parent sends what it had pending."""
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._pending = None
        self._sending = False
        self._thread = None


def _retry_after(header: str | None) -> float | None:
    try:
        seconds = float(header) if header is not None else None
    except ValueError:
        return None  # the HTTP-date form: the interval will do
    return seconds if seconds is not None and math.isfinite(seconds) and seconds >= 0 else None


def _message(answer: bytes) -> str:
    """A refusal's reason: the Kubernetes ``Status`` message the endpoints send, else the text."""
    text = answer.decode("utf-8", errors="replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text[:500]
    return str(data.get("message", text))[:500] if isinstance(data, dict) else text[:500]


# --- one reporter per process, for report_progress ---------------------------------------------------

_live_reporters: weakref.WeakSet[ProgressReporter] = weakref.WeakSet()
_default: ProgressReporter | None = None
_default_lock = threading.Lock()


def default_reporter() -> ProgressReporter:
    """The process's reporter (made on first use from the variables, ``DEFAULT_INTERVAL`` apart)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ProgressReporter()
        return _default


def report_progress(
    progress: float | None = None,
    eta_seconds: float | timedelta | None = None,
    metrics: Mapping[str, MetricValue] | None = None,
) -> None:
    """Report progress (0 to 100), the seconds left and metrics through the process's reporter: returns at
    once, never raises, does nothing outside a job that has a status endpoint."""
    try:
        default_reporter().report(progress, eta_seconds, metrics)
    except Exception:
        log.debug("progress report not queued", exc_info=True)


def _flush_at_exit() -> None:
    deadline = time.monotonic() + EXIT_FLUSH_SECONDS
    for reporter in list(_live_reporters):
        reporter.flush(max(0.0, deadline - time.monotonic()))


def _reset_after_fork() -> None:
    global _default_lock
    _default_lock = threading.Lock()
    for reporter in list(_live_reporters):
        reporter._after_fork()


atexit.register(_flush_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
