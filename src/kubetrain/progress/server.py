"""The status endpoint's HTTP handling: one route, checked in the order that keeps a flood cheap.

For ``POST <a job's status path>``:

1. the path must name a job (404 otherwise) and the request carry ``Authorization: Bearer <token>`` (401);
2. the token's own rate limit (429 with ``Retry-After``): a flood with one token is refused before anything
   costs more than a hash;
3. the body is at most ``MAX_REPORT_BYTES`` (413), read only then;
4. the substrate's ``Authenticator`` checks the token and that it was issued to a replica of that job
   (401, 403; it may answer 429 itself when it is asked to check too many new tokens);
5. the job's rate limit (429): a job whose every replica reports cannot keep the endpoint to itself;
6. the report is parsed (400 unreadable, 422 naming the field at fault) and handed to the ``ReportSink``,
   which must not block: it coalesces what it writes.

Every refusal is a Kubernetes ``Status`` object, as an API server would send, with the field in
``details.causes`` when one is at fault. Nothing a request carries is logged except who sent it and why it
was refused.
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
    ReportError,
    StatusTarget,
    TrainerStatus,
    parse_report,
    parse_status_path,
)
from kubetrain.progress.limits import RateLimiter

TOKEN_RATE = 2.0
"""Reports a second one token may send after its burst: a reporter needs one every few seconds."""
TOKEN_BURST = 5
JOB_RATE = 20.0
"""Reports a second one job may send, all its replicas together, after its burst."""
JOB_BURST = 40

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    413: "RequestEntityTooLarge",
    422: "Invalid",
    429: "TooManyRequests",
    503: "ServiceUnavailable",
}


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
    authenticator: Authenticator,
    sink: ReportSink,
    *,
    counts: EndpointCounts | None = None,
    token_limits: RateLimiter | None = None,
    job_limits: RateLimiter | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    clock: Callable[[], float] = time.monotonic,
) -> web.Application:
    """The endpoint as an aiohttp application; serve it with ``serve``."""
    # ``is None``, not ``or``: a limiter that has seen no key yet has length 0 and is falsy.
    tally = EndpointCounts.empty() if counts is None else counts
    per_token = RateLimiter(TOKEN_RATE, TOKEN_BURST, clock=clock) if token_limits is None else token_limits
    per_job = RateLimiter(JOB_RATE, JOB_BURST, clock=clock) if job_limits is None else job_limits

    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            target, report, reporter = await _report(request, authenticator, per_token, per_job, now)
        except RefusedError as refused:
            tally.by_code[refused.code] += 1
            return _refusal(refused)
        sink.accept(target, report, reporter)
        tally.by_code[200] += 1
        return web.json_response({"trainerStatus": report.to_wire()})

    app = web.Application(client_max_size=MAX_REPORT_BYTES)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


async def _report(
    request: web.Request,
    authenticator: Authenticator,
    per_token: RateLimiter,
    per_job: RateLimiter,
    now: Callable[[], datetime],
) -> tuple[StatusTarget, TrainerStatus, Reporter]:
    target = parse_status_path(request.path)
    if target is None:
        raise RefusedError(
            404,
            f"{request.path} is not a job's status: POST to "
            "/apis/<group>/<version>/namespaces/<namespace>/<plural>/<name>/status "
            "(KUBEFLOW_TRAINER_STATUS_SERVER_URL holds the whole URL)",
        )
    if request.method != "POST":
        raise RefusedError(405, f"{request.method} is not supported: POST a report")
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise RefusedError(
            401,
            "no bearer token: send 'Authorization: Bearer <token>', the token read from the file "
            "KUBEFLOW_TRAINER_STATUS_SERVER_TOKEN names",
        )
    wait = per_token.allow(hashlib.sha256(token.encode()).hexdigest())
    if wait is not None:
        raise RefusedError(
            429, "too many reports with this token; report at most every few seconds", retry_after=wait
        )
    if request.content_length is not None and request.content_length > MAX_REPORT_BYTES:
        raise RefusedError(413, f"a report may be at most {MAX_REPORT_BYTES} bytes")
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
        return target, parse_report(body, now()), reporter
    except ReportError as error:
        raise _InvalidReportError(error) from None


class _InvalidReportError(RefusedError):
    """400 for a body that is not a report at all, 422 for a field at fault (named in the answer)."""

    def __init__(self, error: ReportError) -> None:
        super().__init__(422 if error.field else 400, str(error))
        self.field = error.field


def _refusal(refused: RefusedError) -> web.Response:
    body: dict[str, object] = {
        "kind": "Status",
        "apiVersion": "v1",
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
