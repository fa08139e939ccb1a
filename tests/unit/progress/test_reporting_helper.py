"""The reporting helper users put in a training loop (kubetrain/reporting.py), against a real HTTPS endpoint:
the ``kubetrain.progress`` application served on loopback with a fake authenticator."""

from __future__ import annotations

import ast
import asyncio
import json
import logging
import math
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.typedefs import Handler

from kubetrain import reporting
from kubetrain.api.progress import (
    TRAINJOB_REPORT_LIMITS,
    StatusRoute,
    StatusRoutes,
    StatusTarget,
    TrainerStatus,
    parse_report,
)
from kubetrain.progress import credentials
from kubetrain.progress.credentials import TlsCredentials
from kubetrain.progress.limits import RateLimiter
from kubetrain.progress.server import EndpointCounts, RefusedError, Reporter, serve, status_application
from kubetrain.reporting import ProgressReporter, StatusEndpoint, trainer_status
from waiting import PATIENCE, eventually

PATH = "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs/mnist/status"
TARGET = StatusTarget("kubeflow.org/v1", "default", "pytorchjobs", "mnist")
ROUTES = StatusRoutes([StatusRoute.of("kubeflow.org/v1", "pytorchjobs")])
HELPER = Path(reporting.__file__)


class Tokens:
    """Accepts the tokens in ``valid`` for mnist's path (the reporter is named after its token); else 403."""

    def __init__(self, *valid: str) -> None:
        self.valid = set(valid)
        self.seen: list[str] = []

    async def authenticate(self, token: str, target: StatusTarget) -> Reporter:
        self.seen.append(token)
        if token not in self.valid:
            raise RefusedError(403, "the token is not valid")
        if target != TARGET:
            raise RefusedError(403, f"the token of master-0 may only report for {TARGET.path}")
        return Reporter(token)


@dataclass
class Sink:
    accepted: list[tuple[float, TrainerStatus, Reporter]] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def accept(self, target: StatusTarget, status: TrainerStatus, reporter: Reporter) -> None:
        with self.arrived:
            self.accepted.append((time.monotonic(), status, reporter))
            self.arrived.notify_all()

    def wait_for(self, count: int) -> list[TrainerStatus]:
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.accepted) >= count, PATIENCE), self.accepted
            return [status for _, status, _ in self.accepted]

    @property
    def progress(self) -> list[int | None]:
        return [status.progress_percentage for _, status, _ in self.accepted]


@dataclass
class Served:
    port: int
    tls: TlsCredentials
    counts: EndpointCounts
    bodies: list[bytes]
    """Every request's body, as it arrived."""
    answered: list[tuple[float, int]]
    """(monotonic time, HTTP status) of every answer, as the endpoint gave it."""


@contextmanager
def endpoint(
    tokens: Tokens, sink: Sink, *, port: int = 0, tls: TlsCredentials | None = None, **options: Any
) -> Iterator[Served]:
    """The status application over TLS on 127.0.0.1, in an event loop of its own thread."""
    tls = tls or credentials.issue(["127.0.0.1", "localhost"])
    counts = EndpointCounts.empty()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    app = status_application(ROUTES, tokens, sink, counts=counts, **options)
    bodies: list[bytes] = []
    answered: list[tuple[float, int]] = []

    @web.middleware
    async def keep_body(request: web.Request, handler: Handler) -> web.StreamResponse:
        bodies.append(await request.read())
        response = await handler(request)
        answered.append((time.monotonic(), response.status))
        return response

    app.middlewares.append(keep_body)
    runner = asyncio.run_coroutine_threadsafe(
        serve(app, "127.0.0.1", port, tls.server_context()), loop
    ).result(PATIENCE)
    try:
        yield Served(runner.addresses[0][1], tls, counts, bodies, answered)
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(PATIENCE)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


@pytest.fixture
def make_reporter() -> Iterator[Callable[..., ProgressReporter]]:
    made: list[ProgressReporter] = []

    def make(*args: Any, **kwargs: Any) -> ProgressReporter:
        reporter = ProgressReporter(*args, **kwargs)
        made.append(reporter)
        return reporter

    yield make
    for reporter in made:
        reporter.close(timeout=0)


def variables(tmp_path: Path, port: int, ca_pem: str, token: str = "token-1") -> dict[str, str]:
    (tmp_path / "ca.crt").write_text(ca_pem)
    (tmp_path / "token").write_text(token + "\n")
    return {
        reporting.STATUS_SERVER_URL_ENV: f"https://127.0.0.1:{port}{PATH}",
        reporting.STATUS_SERVER_CA_CERT_ENV: str(tmp_path / "ca.crt"),
        reporting.STATUS_SERVER_TOKEN_ENV: str(tmp_path / "token"),
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_until(predicate: Callable[[], bool], what: str = "condition") -> None:
    eventually(predicate, what)


# --- a file that can be copied into any image ----------------------------------------------------


def test_the_helper_imports_only_the_standard_library() -> None:
    tree = ast.parse(HELPER.read_text())
    imported = {
        name.split(".")[0]
        for node in ast.walk(tree)
        for name in (
            [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
    }
    assert imported - {"__future__"} <= sys.stdlib_module_names, imported - sys.stdlib_module_names


def test_a_copy_of_the_file_alone_imports_and_runs_without_site_packages(tmp_path: Path) -> None:
    shutil.copy(HELPER, tmp_path / "reporting.py")
    script = (
        "import reporting; reporting.report_progress(50, 10, {'loss': 0.5}); "
        "print(reporting.default_reporter().enabled)"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-E", "-s", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={},
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "False\n", "")


# --- no variables, no effect -----------------------------------------------------------------------


def test_without_the_variables_reporting_does_nothing_and_starts_no_thread(
    make_reporter: Callable[..., ProgressReporter],
) -> None:
    reporter = make_reporter(environ={})
    threads = threading.active_count()
    reporter.report(10, 60, {"loss": 1.0})
    reporter.report_step(1, 10)
    assert not reporter.enabled
    assert reporter.flush() is True
    assert threading.active_count() == threads
    assert (reporter.sent, reporter.dropped) == (0, 0)


def test_an_http_url_is_never_sent_a_token() -> None:
    environ = {
        reporting.STATUS_SERVER_URL_ENV: "http://127.0.0.1:1/x",
        reporting.STATUS_SERVER_TOKEN_ENV: "/t",
    }
    assert StatusEndpoint.from_environment(environ) is None


# --- reports reach the endpoint --------------------------------------------------------------------


class Scalar:
    """What a NumPy or PyTorch scalar offers: ``item()``."""

    def __init__(self, value: float) -> None:
        self.value = value

    def item(self) -> float:
        return self.value


def test_a_report_reaches_the_endpoint_with_numbers_and_strings_as_metric_values(
    tmp_path: Path, make_reporter: Callable[..., ProgressReporter]
) -> None:
    tokens, sink = Tokens("token-1"), Sink()
    with endpoint(tokens, sink) as served:
        reporter = make_reporter(environ=variables(tmp_path, served.port, served.tls.ca_cert))
        reporter.report(40, 600, {"loss": 0.25, "step": 12, "phase": "warmup", "lr": Scalar(0.5)})
        [status] = sink.wait_for(1)
    assert (status.progress_percentage, status.estimated_remaining_seconds) == (40, 600)
    assert [(m.name, m.value) for m in status.metrics or []] == [
        ("loss", "0.25"),
        ("step", "12"),
        ("phase", "warmup"),
        ("lr", "0.5"),
    ]
    assert sink.accepted[0][2] == Reporter("token-1")
    # Counted once the answer is read, which the endpoint has written by now: a loaded machine lags.
    wait_until(lambda: reporter.sent == 1)


def test_a_report_says_when_its_values_were_observed_as_trainer_v2_3_requires(
    tmp_path: Path, make_reporter: Callable[..., ProgressReporter]
) -> None:
    tokens, sink = Tokens("token-1"), Sink()
    with endpoint(tokens, sink) as served:
        reporter = make_reporter(environ=variables(tmp_path, served.port, served.tls.ca_cert))
        before = datetime.now(UTC).replace(microsecond=0)
        reporter.report(40)
        sink.wait_for(1)
    [body] = served.bodies
    sent = datetime.fromisoformat(json.loads(body)["trainerStatus"]["lastUpdatedTime"])
    assert before <= sent <= datetime.now(UTC)


def test_reports_within_the_interval_collapse_to_the_latest_sent_when_it_is_over(
    tmp_path: Path, make_reporter: Callable[..., ProgressReporter]
) -> None:
    tokens, sink = Tokens("token-1"), Sink()
    with endpoint(tokens, sink) as served:
        reporter = make_reporter(0.6, environ=variables(tmp_path, served.port, served.tls.ca_cert))
        reporter.report(1)
        sink.wait_for(1)
        for progress in range(2, 11):
            reporter.report(progress)
        sink.wait_for(2)
        # Nothing is left to send once the second answer is read: no third request can follow.
        wait_until(lambda: reporter.sent == 2, "the second answer read")
        assert reporter.flush(0) is True
    assert sink.progress == [1, 10]
    first, second = (at for at, _, _ in sink.accepted)
    assert second - first >= 0.6, "the second request waited for the interval"
    assert (reporter.sent, reporter.dropped) == (2, 8)


def test_report_step_reports_the_percentage_and_an_eta_from_the_pace_of_steps(
    tmp_path: Path, make_reporter: Callable[..., ProgressReporter]
) -> None:
    tokens, sink = Tokens("token-1"), Sink()
    with endpoint(tokens, sink) as served:
        reporter = make_reporter(0, environ=variables(tmp_path, served.port, served.tls.ca_cert))
        before_first = time.monotonic()
        reporter.report_step(20, 120)  # resumed at step 20: the pace is timed from here
        after_first = time.monotonic()
        sink.wait_for(1)
        time.sleep(0.5)
        before_second = time.monotonic()
        reporter.report_step(30, 120, {"loss": 0.1})
        after_second = time.monotonic()
        first, second = sink.wait_for(2)
    assert (first.progress_percentage, first.estimated_remaining_seconds) == (16, None)
    assert second.progress_percentage == 25
    # 10 steps took as long as the two calls were apart, whatever the load made that: 90 steps left take
    # 9 times it, rounded to the second.
    shortest, longest = before_second - after_first, after_second - before_first
    assert second.estimated_remaining_seconds is not None
    assert round(9 * shortest) <= second.estimated_remaining_seconds <= round(9 * longest)


def test_the_token_file_is_read_again_for_every_request(
    tmp_path: Path, make_reporter: Callable[..., ProgressReporter]
) -> None:
    tokens, sink = Tokens("token-1", "token-2"), Sink()
    with endpoint(tokens, sink) as served:
        reporter = make_reporter(0, environ=variables(tmp_path, served.port, served.tls.ca_cert))
        reporter.report(1)
        sink.wait_for(1)
        (tmp_path / "token").write_text("token-2")
        reporter.report(2)
        sink.wait_for(2)
    assert tokens.seen == ["token-1", "token-2"]


@pytest.mark.parametrize("spelling", reporting.VARIABLE_SPELLINGS[1:], ids=lambda s: s[0])
def test_earlier_drafts_spellings_of_the_variables_are_read_when_trainer_v2_3s_are_absent(
    tmp_path: Path, make_reporter: Callable[..., ProgressReporter], spelling: tuple[str, str, str]
) -> None:
    tokens, sink = Tokens("token-1"), Sink()
    with endpoint(tokens, sink) as served:
        ours = variables(tmp_path, served.port, served.tls.ca_cert)
        environ = {
            theirs: ours[name] for name, theirs in zip(reporting.VARIABLE_SPELLINGS[0], spelling, strict=True)
        }
        make_reporter(environ=environ).report(77)
        [status] = sink.wait_for(1)
    assert status.progress_percentage == 77


def test_trainer_v2_3s_spelling_wins_when_an_earlier_one_is_set_too() -> None:
    environ = {
        "KUBEFLOW_TRAINER_STATUS_SERVER_URL": "https://draft/x",
        "KUBEFLOW_TRAINER_STATUS_SERVER_TOKEN": "/draft",
        "KUBEFLOW_TRAINER_SERVER_URL": "https://trainer/x",
        "KUBEFLOW_TRAINER_SERVER_TOKEN": "/trainer",
    }
    assert StatusEndpoint.from_environment(environ) == StatusEndpoint("https://trainer/x", None, "/trainer")


# --- the endpoint down, slow, refusing ---------------------------------------------------------------


def test_report_never_waits_for_an_endpoint_that_accepts_connections_but_never_answers(
    tmp_path: Path, make_reporter: Callable[..., ProgressReporter]
) -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()  # connections complete in the backlog; the TLS handshake never does
    try:
        tls = credentials.issue(["127.0.0.1"])
        # A request may hang for a day: a report that waited for it would hold the test past pytest's
        # timeout. What the calls cost is bench/progress_reporting.py's to measure.
        reporter = make_reporter(
            0, timeout=86_400.0, environ=variables(tmp_path, silent.getsockname()[1], tls.ca_cert)
        )
        for step in range(1000):
            reporter.report(step % 100, 60, {"loss": 1.0 / (step + 1)})
        # One report is in its hung request (or none yet, if the sending thread has not run), one waits:
        # each of the others was replaced by the next.
        assert reporter.sent == 0 and reporter.dropped >= 998
        assert reporter.flush(0.2) is False  # never answered: no wait, however long, would make it True
    finally:
        silent.close()


def test_while_the_endpoint_is_down_reports_are_dropped_and_the_latest_goes_when_it_is_back(
    tmp_path: Path, make_reporter: Callable[..., ProgressReporter]
) -> None:
    port = free_port()
    tls = credentials.issue(["127.0.0.1"])
    reporter = make_reporter(0.1, environ=variables(tmp_path, port, tls.ca_cert))
    reporter.report(1)  # nothing listens: refused at once
    wait_until(lambda: reporter.dropped == 1)
    for progress in (2, 3, 4):
        reporter.report(progress)
    tokens, sink = Tokens("token-1"), Sink()
    with endpoint(tokens, sink, port=port, tls=tls):
        sink.wait_for(1)  # after the backoff (1 s)
        # Nothing is left to send once its answer is read: no stale report can follow.
        wait_until(lambda: reporter.sent == 1, "the answer read")
        assert reporter.flush(0) is True
    assert sink.progress == [4]
    assert (reporter.sent, reporter.dropped) == (1, 3)


def test_a_429_is_honoured_for_as_long_as_its_retry_after_says(
    tmp_path: Path, make_reporter: Callable[..., ProgressReporter]
) -> None:
    tokens, sink = Tokens("token-1"), Sink()
    # One report, then one every 2 s: a report right after the first is told to retry after 2 s.
    with endpoint(tokens, sink, token_limits=RateLimiter(0.5, 1)) as served:
        reporter = make_reporter(0.1, environ=variables(tmp_path, served.port, served.tls.ca_cert))
        reporter.report(1)
        sink.wait_for(1)
        reporter.report(2)
        sink.wait_for(2)
    assert sink.progress == [1, 2], "the refused report was kept and sent when allowed"
    assert served.counts.by_code == {200: 2, 429: 1}, "no request went before Retry-After"
    [refused_at] = [at for at, code in served.answered if code == 429]
    assert sink.accepted[1][0] - refused_at >= 2, "the retry waited for Retry-After (2 s) after the 429"


def test_a_refused_report_is_counted_and_logged_with_the_endpoints_reason(
    tmp_path: Path, make_reporter: Callable[..., ProgressReporter], caplog: pytest.LogCaptureFixture
) -> None:
    tokens, sink = Tokens("token-1"), Sink()
    with endpoint(tokens, sink) as served, caplog.at_level(logging.WARNING, "kubetrain.reporting"):
        environ = variables(tmp_path, served.port, served.tls.ca_cert)
        environ[reporting.STATUS_SERVER_URL_ENV] = environ[reporting.STATUS_SERVER_URL_ENV].replace(
            "mnist", "other"
        )
        reporter = make_reporter(environ=environ)
        reporter.report(5)
        wait_until(lambda: reporter.refused == 1)
    assert sink.accepted == []
    assert f"(HTTP 403): the token of master-0 may only report for {PATH}" in caplog.text


def test_an_endpoint_whose_certificate_another_ca_signed_gets_nothing(
    tmp_path: Path, make_reporter: Callable[..., ProgressReporter]
) -> None:
    tokens, sink = Tokens("token-1"), Sink()
    with endpoint(tokens, sink) as served:
        impostor_ca = credentials.issue(["127.0.0.1"]).ca_cert
        reporter = make_reporter(environ=variables(tmp_path, served.port, impostor_ca))
        reporter.report(5)
        wait_until(lambda: reporter.dropped == 1)
    assert tokens.seen == [], "the token was never sent"
    assert sink.accepted == []


# --- the process's last report ------------------------------------------------------------------------


def test_the_last_report_is_sent_when_the_process_exits_without_waiting_for_the_interval(
    tmp_path: Path,
) -> None:
    tokens, sink = Tokens("token-1"), Sink()
    with endpoint(tokens, sink) as served:
        # An interval of a day: an exit that waited for it would outlast the run's timeout. The exit's
        # own budget (EXIT_FLUSH_SECONDS) is raised to PATIENCE so that a loaded machine's slow
        # handshake cannot lose the report: this test is about what the exit sends, not how fast.
        script = (
            "from kubetrain import reporting\n"
            f"reporting.EXIT_FLUSH_SECONDS = {PATIENCE}\n"
            "reporter = reporting.ProgressReporter(86_400)\n"
            "reporter.report(10)\n"
            f"assert reporter.flush({PATIENCE})  # the first report goes at once\n"
            "reporter.report(100, 0, {'loss': 0.01})  # a day's interval away: waiting at exit\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", script],
            env=variables(tmp_path, served.port, served.tls.ca_cert),
            capture_output=True,
            text=True,
            check=False,
            timeout=PATIENCE,
        )
        sink.wait_for(2)
    assert done.returncode == 0, done.stderr
    assert sink.progress == [10, 100]


def test_a_forked_child_reports_through_a_thread_of_its_own(tmp_path: Path) -> None:
    """A data loader's worker forks with the parent's reporter: the parent's lock and thread are not the
    child's, so the child's first report starts its own thread instead of waiting on theirs."""
    tokens, sink = Tokens("token-1"), Sink()
    with endpoint(tokens, sink) as served:
        script = (
            "import os, time\n"
            "from kubetrain.reporting import ProgressReporter\n"
            "reporter = ProgressReporter(0)\n"
            "reporter.report(10)\n"
            f"reporter.flush({PATIENCE})\n"
            "child = os.fork()\n"
            "if child == 0:\n"
            "    reporter.report(20)\n"
            f"    os._exit(0 if reporter.flush({PATIENCE}) else 1)\n"
            "_, status = os.waitpid(child, 0)\n"
            "print(os.waitstatus_to_exitcode(status))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", script],
            env=variables(tmp_path, served.port, served.tls.ca_cert),
            capture_output=True,
            text=True,
            check=False,
            timeout=PATIENCE,
        )
        sink.wait_for(2)
    assert (done.returncode, done.stdout) == (0, "0\n"), done.stderr
    assert sink.progress == [10, 20]


# --- what fits the protocol ---------------------------------------------------------------------------


def test_values_outside_the_protocol_are_left_out_or_clamped_never_raised() -> None:
    many = {f"m{i}": i for i in range(reporting.MAX_METRICS + 10)}
    assert trainer_status(150, -5) == {"progressPercentage": 100, "estimatedRemainingSeconds": 0}
    assert trainer_status(99.9, timedelta(minutes=2)) == {
        "progressPercentage": 99,
        "estimatedRemainingSeconds": 120,
    }
    assert trainer_status(math.nan, math.inf) == {}
    assert trainer_status("half", "soon") == {}  # type: ignore[arg-type]
    assert len(trainer_status(metrics=many)["metrics"]) == reporting.MAX_METRICS  # type: ignore[arg-type]
    assert trainer_status(
        metrics={"": 1, "x" * 65: 2, "acc": math.nan, "ok": True, "empty": "", "big": "v" * 65}
    ) == {
        "metrics": [
            {"name": "acc", "value": "nan"},
            {"name": "ok", "value": "true"},
            {"name": "big", "value": "v" * reporting.MAX_METRIC_VALUE},
        ]
    }


def test_every_report_the_helper_sends_fits_trainer_v2_3s_trainjob_too() -> None:
    metrics = {f"{'m' * 60}{i}": "v" * 100 for i in range(300)}
    status = {**trainer_status(100, 5, metrics), "lastUpdatedTime": "2026-11-26T10:00:00Z"}
    report = parse_report(
        json.dumps({"trainerStatus": status}).encode(), datetime.now(UTC), TRAINJOB_REPORT_LIMITS
    )
    assert report.status is not None and len(report.status.metrics or []) == TRAINJOB_REPORT_LIMITS.metrics


class Float64(float):
    """What NumPy 2's float64 is: a float whose repr is ``np.float64(...)``."""

    def __repr__(self) -> str:
        return f"np.float64({float(self)!r})"


def test_a_metric_value_is_the_number_it_holds_whatever_its_type_calls_itself() -> None:
    assert reporting.metric_text(Float64(0.25)) == "0.25"
    assert reporting.metric_text(Scalar(3)) == "3"
    assert reporting.metric_text(1e-7) == "1e-07"


def test_report_never_raises_whatever_it_is_given(
    tmp_path: Path, make_reporter: Callable[..., ProgressReporter]
) -> None:
    class Broken:
        def item(self) -> float:
            raise RuntimeError("device lost")

    reporter = make_reporter(
        environ=variables(tmp_path, free_port(), credentials.issue(["127.0.0.1"]).ca_cert)
    )
    reporter.report(object(), object(), object())  # type: ignore[arg-type]
    reporter.report(metrics={"x": Broken()})
    reporter.report_step("a", None)  # type: ignore[arg-type]
    reporter.report_step(1, 0)
