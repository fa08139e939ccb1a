"""The status endpoint's HTTP handling: Kubeflow Trainer v2.3's status server, checked in the order that keeps
a flood cheap.

For a request:

1. the path must be a status path of a kind the endpoint serves (its ``StatusRoutes``) and the method POST,
   else 404 (Trainer v2.3 answers 404 to every other request, whatever its method);
2. a ``Content-Length`` over ``MAX_REPORT_BYTES`` is 413;
3. ``Authorization: Bearer <token>``, else 403 (Trainer v2.3's answer to every request it does not
   authorise);
4. the token's own rate limit (429 with ``Retry-After``): a flood with one token is refused before anything
   costs more than a hash;
5. the body is read, at most ``MAX_REPORT_BYTES`` (413);
6. the substrate's ``Authenticator`` checks the token and that it was issued to a replica of that job
   (403; 404 for a job that does not exist; it may answer 429 or 503 itself);
7. the job's rate limit (429): a job whose every replica reports cannot keep the endpoint to itself;
8. the report is parsed (422 naming the field at fault) and, when it carries a ``trainerStatus``, handed to
   the ``ReportSink``, which must not block: it coalesces what it writes.

The answer to a report is 200 with ``{"trainerStatus": ...}`` as stored (``{}`` for a body without one),
and a ``Warning`` header naming each field that was ignored. Every refusal is a Kubernetes ``Status`` object,
as Trainer v2.3's server and an API server send, with the field in ``details.causes`` when one is at fault.
Nothing a request carries is logged except who sent it and why it was refused.
"""

from __future__ import annotations

import hashlib
import json
import math
import ssl
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from aiohttp import web

from kubetrain.api.progress import (
    MAX_REPORT_BYTES,
    Report,
    ReportError,
    StatusRoutes,
    StatusTarget,
    TrainerStatus,
    parse_report,
)
from kubetrain.progress.limits import RateLimiter

TOKEN_RATE = 2.0
"""Reports a second one token may send after its burst: a reporter needs one every few seconds."""
TOKEN_BURST = 5
JOB_RATE = 20.0
"""Reports a second one job may send, all its replicas together, after its burst."""
JOB_BURST = 40

_REASONS = {
    403: "Forbidden",
    404: "NotFound",
    413: "RequestEntityTooLarge",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}
"""Each code's ``reason``, as Trainer v2.3's server (``metav1.StatusReason``) gives it."""
WARNING_AGENT = "kubetrain"


@dataclass(frozen=True)
class Reporter:
    """Who sent an accepted report."""

    name: str
    """The replica it came from: a pod's name, or a local replica's ``<type>-<index>``."""


class RefusedError(Exception):
    """A request the endpoint answers with an error ``code``; ``message`` says why and what to do."""

    def __init__(self, code: int, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after = retry_after


class Authenticator(Protocol):
    async def authenticate(self, token: str, target: StatusTarget) -> Reporter:
        """The replica ``token`` was issued to, a replica of ``target``'s job; raises ``RefusedError``."""
        ...


class ReportSink(Protocol):
    def accept(self, target: StatusTarget, status: TrainerStatus, reporter: Reporter) -> None:
        """Take an accepted report (at once: writing it is the sink's own business, coalesced)."""
        ...


@dataclass
class EndpointCounts:
    """Requests answered, by HTTP code: what the substrate's metrics report."""

    by_code: Counter[int]

    @classmethod
    def empty(cls) -> EndpointCounts:
        return cls(Counter())


def status_application(
    routes: StatusRoutes,
    authenticator: Authenticator,
    sink: ReportSink,
    *,
    counts: EndpointCounts | None = None,
    token_limits: RateLimiter | None = None,
    job_limits: RateLimiter | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    clock: Callable[[], float] = time.monotonic,
) -> web.Application:
    """The endpoint for the kinds ``routes`` names, as an aiohttp application; serve it with ``serve``."""
    # ``is None``, not ``or``: a limiter that has seen no key yet has length 0 and is falsy.
    tally = EndpointCounts.empty() if counts is None else counts
    per_token = RateLimiter(TOKEN_RATE, TOKEN_BURST, clock=clock) if token_limits is None else token_limits
    per_job = RateLimiter(JOB_RATE, JOB_BURST, clock=clock) if job_limits is None else job_limits

    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            target, report, reporter = await _report(request, routes, authenticator, per_token, per_job, now)
        except RefusedError as refused:
            tally.by_code[refused.code] += 1
            return _refusal(refused)
        headers = {"Warning": _warning(report.ignored)} if report.ignored else None
        tally.by_code[200] += 1
        if report.status is None:
            return web.json_response({}, headers=headers)
        sink.accept(target, report.status, reporter)
        return web.json_response({"trainerStatus": report.status.to_wire()}, headers=headers)

    app = web.Application(client_max_size=MAX_REPORT_BYTES)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


async def _report(
    request: web.Request,
    routes: StatusRoutes,
    authenticator: Authenticator,
    per_token: RateLimiter,
    per_job: RateLimiter,
    now: Callable[[], datetime],
) -> tuple[StatusTarget, Report, Reporter]:
    matched = routes.match(request.path)
    if matched is None:
        served = " or ".join(route.path_pattern for route in routes)
        raise RefusedError(
            404,
            f"{request.path} is not the status of a job this endpoint serves: POST to {served} "
            "(KUBEFLOW_TRAINER_SERVER_URL holds the whole URL)",
        )
    route, target = matched
    if request.method != "POST":
        raise RefusedError(404, f"{request.method} {request.path} is not served: POST a report to it")
    if request.content_length is not None and request.content_length > MAX_REPORT_BYTES:
        raise RefusedError(413, f"a report may be at most {MAX_REPORT_BYTES} bytes")
    token = bearer_token(request.headers.get("Authorization", ""))
    if token is None:
        raise RefusedError(
            403,
            "no bearer token: send 'Authorization: Bearer <token>', the token read from the file "
            "KUBEFLOW_TRAINER_SERVER_TOKEN names",
        )
    wait = per_token.allow(hashlib.sha256(token.encode()).hexdigest())
    if wait is not None:
        raise RefusedError(
            429, "too many reports with this token; report at most every few seconds", retry_after=wait
        )
    try:
        body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise RefusedError(413, f"a report may be at most {MAX_REPORT_BYTES} bytes") from None
    reporter = await authenticator.authenticate(token, target)
    wait = per_job.allow(target.key)
    if wait is not None:
        raise RefusedError(
            429,
            f"too many reports for {target.key}; one replica reporting every few seconds is enough",
            retry_after=wait,
        )
    try:
        return target, parse_report(body, now(), route.limits), reporter
    except ReportError as error:
        raise _InvalidReportError(error) from None


def bearer_token(header: str) -> str | None:
    """The credentials of an ``Authorization: Bearer <token>`` header, as Trainer v2.3 reads it: the scheme
    in any case, any whitespace around and between, and exactly one credential; None otherwise."""
    parts = header.split()
    if len(parts) != 2 or parts[0].lower() != "bearer":
        return None
    return parts[1]


def _warning(ignored: tuple[str, ...]) -> str:
    """A ``Warning`` header (RFC 7234, as an API server warns of fields it drops) naming what was ignored."""
    named = [_printable(field)[:100] for field in ignored[:8]]
    fields = ", ".join(named) + (f" and {len(ignored) - 8} more" if len(ignored) > 8 else "")
    return f'299 {WARNING_AGENT} "unknown field{"s" if len(ignored) > 1 else ""} ignored: {fields}"'


class _InvalidReportError(RefusedError):
    """422 for a body that is not a report (Trainer v2.3's "Invalid payload"), naming the field at fault."""

    def __init__(self, error: ReportError) -> None:
        super().__init__(422, str(error))
        self.field = error.field


def _printable(text: str) -> str:
    """``text`` fit for a header's quoted string: a field name is the sender's, any character at all."""
    return "".join(c if " " <= c <= "~" and c not in '"\\' else "?" for c in text)


def _refusal(refused: RefusedError) -> web.Response:
    body: dict[str, object] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": refused.message,
        "reason": _REASONS.get(refused.code, "Unknown"),
        "code": refused.code,
    }
    if isinstance(refused, _InvalidReportError) and refused.field:
        body["details"] = {"causes": [{"field": refused.field, "message": refused.message}]}
    headers = {}
    if refused.retry_after is not None:
        headers["Retry-After"] = str(max(1, math.ceil(refused.retry_after)))
    return web.Response(
        status=refused.code, text=json.dumps(body), content_type="application/json", headers=headers
    )


async def serve(app: web.Application, host: str, port: int, context: ssl.SSLContext) -> web.AppRunner:
    """Serve ``app`` over TLS on ``host:port``; port 0 picks a free one.

    Returns the runner: ``runner.addresses`` says where it listens, ``await runner.cleanup()`` stops it."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=context)
    await site.start()
    return runner
