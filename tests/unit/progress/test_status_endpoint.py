"""The status endpoint's HTTP handling (progress/server.py), against a fake authenticator and sink."""

from __future__ import annotations

import asyncio
import json
import ssl
import urllib.request
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from kubetrain.api.progress import MAX_REPORT_BYTES, StatusTarget, TrainerStatus
from kubetrain.progress import credentials
from kubetrain.progress.limits import RateLimiter
from kubetrain.progress.server import (
    EndpointCounts,
    RefusedError,
    Reporter,
    serve,
    status_application,
)

Client = TestClient[web.Request, web.Application]
PATH = "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/mnist/status"
TARGET = StatusTarget("kubeflow.org/v1", "team-a", "pytorchjobs", "mnist")
RECEIVED = datetime(2026, 11, 26, 10, 0, tzinfo=UTC)
GOOD = {"Authorization": "Bearer good-token"}
REPORT = {"trainerStatus": {"progressPercentage": 45, "metrics": [{"name": "loss", "value": "0.5"}]}}


class Tokens:
    """``good-token`` belongs to mnist's master-0; ``other-job`` to a replica of another job."""

    def __init__(self) -> None:
        self.checked = 0

    async def authenticate(self, token: str, target: StatusTarget) -> Reporter:
        self.checked += 1
        if token == "good-token" and target == TARGET:
            return Reporter("mnist-master-0")
        if token == "other-job":
            raise RefusedError(403, "the token's pod other-master-0 is not a replica of team-a/mnist")
        raise RefusedError(401, "the token is not valid")


class Sink:
    def __init__(self) -> None:
        self.accepted: list[tuple[StatusTarget, TrainerStatus, Reporter]] = []

    def accept(self, target: StatusTarget, status: TrainerStatus, reporter: Reporter) -> None:
        self.accepted.append((target, status, reporter))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def tokens() -> Tokens:
    return Tokens()


@pytest.fixture
def sink() -> Sink:
    return Sink()


@pytest.fixture
def counts() -> EndpointCounts:
    return EndpointCounts.empty()


@pytest.fixture
async def client(tokens: Tokens, sink: Sink, counts: EndpointCounts) -> AsyncIterator[Client]:
    app = status_application(tokens, sink, counts=counts, now=lambda: RECEIVED)
    async with TestClient(TestServer(app)) as test_client:
        yield test_client


async def test_an_accepted_report_reaches_the_sink_stamped_and_is_echoed(
    client: Client,
    sink: Sink,
    counts: EndpointCounts,
) -> None:
    response = await client.post(PATH, json=REPORT, headers=GOOD)
    assert response.status == 200
    echoed = await response.json()
    assert echoed["trainerStatus"]["progressPercentage"] == 45
    assert echoed["trainerStatus"]["lastUpdatedTime"] == "2026-11-26T10:00:00Z"
    [(target, status, reporter)] = sink.accepted
    assert (target, status.progress_percentage, reporter) == (TARGET, 45, Reporter("mnist-master-0"))
    assert counts.by_code == {200: 1}


async def test_no_token_is_401_and_says_where_the_token_is(client: Client, sink: Sink) -> None:
    response = await client.post(PATH, json=REPORT)
    assert response.status == 401
    body = await response.json()
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "Unauthorized", 401)
    assert "KUBEFLOW_TRAINER_STATUS_SERVER_TOKEN" in body["message"]
    assert sink.accepted == []


async def test_a_token_the_authenticator_refuses_changes_nothing(client: Client, sink: Sink) -> None:
    assert (await client.post(PATH, json=REPORT, headers={"Authorization": "Bearer nope"})).status == 401
    other = await client.post(PATH, json=REPORT, headers={"Authorization": "Bearer other-job"})
    assert other.status == 403
    assert "not a replica of team-a/mnist" in (await other.json())["message"]
    assert sink.accepted == []


async def test_a_path_that_names_no_job_is_404_and_says_which_path_to_post_to(client: Client) -> None:
    response = await client.post("/status", json=REPORT, headers=GOOD)
    assert response.status == 404
    assert "/namespaces/<namespace>/<plural>/<name>/status" in (await response.json())["message"]


async def test_only_post_is_served(client: Client) -> None:
    assert (await client.get(PATH, headers=GOOD)).status == 405


async def test_a_malformed_report_is_422_naming_the_field_and_changes_nothing(
    client: Client,
    sink: Sink,
) -> None:
    body = {"trainerStatus": {"progressPercentage": 250}}
    response = await client.post(PATH, json=body, headers=GOOD)
    assert response.status == 422
    answer = await response.json()
    assert answer["reason"] == "Invalid"
    assert answer["details"]["causes"] == [
        {
            "field": "trainerStatus.progressPercentage",
            "message": "trainerStatus.progressPercentage: Invalid value: 250: must be between 0 and 100",
        }
    ]
    assert sink.accepted == []


async def test_a_body_that_is_not_json_is_400(client: Client) -> None:
    response = await client.post(PATH, data=b"progress=45", headers=GOOD)
    assert response.status == 400


async def test_an_oversized_body_is_413_and_never_reaches_the_authenticator(
    client: Client,
    tokens: Tokens,
) -> None:
    response = await client.post(PATH, data=b"x" * (MAX_REPORT_BYTES + 1), headers=GOOD)
    assert response.status == 413
    assert tokens.checked == 0


async def test_a_flood_with_one_token_is_429_with_retry_after_before_the_token_is_checked(
    tokens: Tokens, sink: Sink
) -> None:
    clock = Clock()
    app = status_application(
        tokens, sink, token_limits=RateLimiter(1.0, 3, clock=clock), now=lambda: RECEIVED, clock=clock
    )
    async with TestClient(TestServer(app)) as client:
        codes = [(await client.post(PATH, json=REPORT, headers=GOOD)).status for _ in range(5)]
        assert codes == [200, 200, 200, 429, 429]
        refused = await client.post(PATH, json=REPORT, headers=GOOD)
        assert refused.headers["Retry-After"] == "1"
        assert tokens.checked == 3
        clock.now += 1.0
        assert (await client.post(PATH, json=REPORT, headers=GOOD)).status == 200
    assert len(sink.accepted) == 4


async def test_one_job_cannot_keep_the_endpoint_to_itself(tokens: Tokens, sink: Sink) -> None:
    clock = Clock()
    app = status_application(
        tokens, sink, job_limits=RateLimiter(1.0, 2, clock=clock), now=lambda: RECEIVED, clock=clock
    )
    async with TestClient(TestServer(app)) as client:
        codes = [(await client.post(PATH, json=REPORT, headers=GOOD)).status for _ in range(3)]
    assert codes == [200, 200, 429]


async def test_the_endpoint_serves_tls_that_a_client_trusting_only_its_ca_accepts(
    tokens: Tokens, sink: Sink
) -> None:
    tls = credentials.issue(["127.0.0.1", "localhost"])
    runner = await serve(status_application(tokens, sink), "127.0.0.1", 0, tls.server_context())
    try:
        port = runner.addresses[0][1]
        client_context = ssl.create_default_context(cadata=tls.ca_cert)
        request = urllib.request.Request(
            f"https://127.0.0.1:{port}{PATH}", data=json.dumps(REPORT).encode(), headers=GOOD, method="POST"
        )
        answer = await asyncio.to_thread(urllib.request.urlopen, request, context=client_context, timeout=10)
        assert answer.status == 200
    finally:
        await runner.cleanup()
    assert len(sink.accepted) == 1
