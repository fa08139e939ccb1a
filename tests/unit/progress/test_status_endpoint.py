"""The status endpoint's HTTP handling (progress/server.py), against a fake authenticator and sink: Kubeflow
Trainer v2.3's status server's answers (``pkg/statusserver``) to its request and to bad ones, for every kind
its routes name."""

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

from kubetrain.api.progress import (
    MAX_REPORT_BYTES,
    TRAINJOB_REPORT_LIMITS,
    StatusRoute,
    StatusRoutes,
    StatusTarget,
    TrainerStatus,
)
from kubetrain.progress import credentials
from kubetrain.progress.limits import RateLimiter
from kubetrain.progress.server import (
    EndpointCounts,
    RefusedError,
    Reporter,
    serve,
    status_application,
)
from waiting import PATIENCE

Client = TestClient[web.Request, web.Application]
PATH = "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/mnist/status"
TARGET = StatusTarget("kubeflow.org/v1", "team-a", "pytorchjobs", "mnist")
RECEIVED = datetime(2026, 11, 26, 10, 0, tzinfo=UTC)
ROUTES = StatusRoutes([StatusRoute.of("kubeflow.org/v1", "pytorchjobs")])
GOOD = {"Authorization": "Bearer good-token"}
REPORT = {"trainerStatus": {"progressPercentage": 45, "metrics": [{"name": "loss", "value": "0.5"}]}}


class Tokens:
    """``good-token`` belongs to mnist's master-0; ``other-job`` to a replica of another job."""

    def __init__(self) -> None:
        self.checked = 0
        self.targets: list[StatusTarget] = []

    async def authenticate(self, token: str, target: StatusTarget) -> Reporter:
        self.checked += 1
        self.targets.append(target)
        if token == "good-token" and target.key == TARGET.key:
            return Reporter("mnist-master-0")
        if token == "other-job":
            raise RefusedError(403, "the token's pod other-master-0 is not a replica of team-a/mnist")
        raise RefusedError(403, "the token is not valid")


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
    app = status_application(ROUTES, tokens, sink, counts=counts, now=lambda: RECEIVED)
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


async def test_trainer_v2_3s_own_request_is_accepted_as_it_sends_it(client: Client, sink: Sink) -> None:
    """What ``test/e2e/testdata/status_update.py`` sends: urllib's default form Content-Type, Python's
    ``isoformat()`` time, no Content-Type of JSON at all."""
    body = (
        b'{"trainerStatus": {"progressPercentage": 42, "estimatedRemainingSeconds": 120, "metrics": '
        b'[{"name": "loss", "value": "0.123"}, {"name": "accuracy", "value": "0.95"}], '
        b'"lastUpdatedTime": "2026-11-26T09:59:58.123456+00:00"}}'
    )
    headers = {**GOOD, "Content-Type": "application/x-www-form-urlencoded"}
    response = await client.post(PATH, data=body, headers=headers)
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("application/json")
    [(_, status, _)] = sink.accepted
    assert (status.progress_percentage, status.estimated_remaining_seconds) == (42, 120)
    assert [(m.name, m.value) for m in status.metrics or []] == [("loss", "0.123"), ("accuracy", "0.95")]
    assert status.last_updated_time == RECEIVED, "the time it arrived, on the endpoint's clock"


@pytest.mark.parametrize(
    "header", ["Bearer good-token", "bearer good-token", "BEARER  good-token ", "Bearer\tgood-token"]
)
async def test_the_bearer_scheme_is_read_in_any_case_and_spacing_as_trainer_v2_3_reads_it(
    client: Client, header: str
) -> None:
    assert (await client.post(PATH, json=REPORT, headers={"Authorization": header})).status == 200


@pytest.mark.parametrize(
    "header", [None, "good-token", "Basic good-token", "Bearer", "Bearer good-token extra"]
)
async def test_no_bearer_token_is_403_and_says_where_the_token_is(
    client: Client, sink: Sink, tokens: Tokens, header: str | None
) -> None:
    response = await client.post(PATH, json=REPORT, headers={"Authorization": header} if header else {})
    assert response.status == 403
    body = await response.json()
    assert (body["kind"], body["status"], body["reason"], body["code"]) == (
        "Status",
        "Failure",
        "Forbidden",
        403,
    )
    assert body["metadata"] == {}
    assert "KUBEFLOW_TRAINER_SERVER_TOKEN" in body["message"]
    assert sink.accepted == [] and tokens.checked == 0


async def test_a_token_the_authenticator_refuses_is_403_and_changes_nothing(
    client: Client, sink: Sink
) -> None:
    assert (await client.post(PATH, json=REPORT, headers={"Authorization": "Bearer nope"})).status == 403
    other = await client.post(PATH, json=REPORT, headers={"Authorization": "Bearer other-job"})
    assert other.status == 403
    assert "not a replica of team-a/mnist" in (await other.json())["message"]
    assert sink.accepted == []


@pytest.mark.parametrize(
    "path",
    [
        "/status",
        "/apis/kubeflow.org/v1/namespaces/team-a/tfjobs/mnist/status",
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/mnist/status",
        PATH + "/",
    ],
)
async def test_a_path_not_of_a_kind_it_serves_is_404_before_the_token_is_looked_at(
    client: Client, tokens: Tokens, path: str
) -> None:
    response = await client.post(path, json=REPORT, headers=GOOD)
    assert response.status == 404
    answer = await response.json()
    assert answer["reason"] == "NotFound"
    assert "/apis/kubeflow.org/v1/namespaces/<namespace>/pytorchjobs/<name>/status" in answer["message"]
    assert tokens.checked == 0


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE"])
async def test_only_post_is_served_any_other_method_is_404_as_trainer_v2_3_answers(
    client: Client, method: str
) -> None:
    response = await client.request(method, PATH, json=REPORT, headers=GOOD)
    assert response.status == 404
    assert "POST a report" in (await response.json())["message"]


async def test_a_registered_kind_is_served_at_its_own_path_with_its_own_bounds(
    tokens: Tokens, sink: Sink
) -> None:
    trainjobs = StatusRoute("trainer.kubeflow.org", "v1alpha1", "trainjobs", TRAINJOB_REPORT_LIMITS)
    routes = StatusRoutes([*ROUTES, trainjobs])
    path = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/mnist/status"
    long_value = {"trainerStatus": {"metrics": [{"name": "loss", "value": "0" * 65}]}}
    async with TestClient(
        TestServer(status_application(routes, tokens, sink, now=lambda: RECEIVED))
    ) as client:
        assert (await client.post(path, json=REPORT, headers=GOOD)).status == 200
        refused = await client.post(path, json=long_value, headers=GOOD)
        assert refused.status == 422
        assert "must be a string of 1 to 64 characters" in (await refused.json())["message"]
        assert (await client.post(PATH, json=long_value, headers=GOOD)).status == 200, "a PyTorchJob's bounds"
    assert [target.api_version for target, _, _ in sink.accepted] == [
        "trainer.kubeflow.org/v1alpha1",
        "kubeflow.org/v1",
    ]
    assert tokens.targets[0] == StatusTarget("trainer.kubeflow.org/v1alpha1", "team-a", "trainjobs", "mnist")


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


@pytest.mark.parametrize("body", [b"progress=45", b"", b"[1, 2]", b'{"trainerStatus": 5}'])
async def test_a_body_that_is_not_a_report_is_422_as_trainer_v2_3_answers_it(
    client: Client, sink: Sink, body: bytes
) -> None:
    response = await client.post(PATH, data=body, headers=GOOD)
    assert response.status == 422
    assert (await response.json())["reason"] == "Invalid"
    assert sink.accepted == []


@pytest.mark.parametrize("body", [b"null", b"{}", b'{"trainerStatus": null}', b'{"progress": 5}'])
async def test_a_body_without_a_trainer_status_is_200_and_stores_nothing(
    client: Client, sink: Sink, body: bytes
) -> None:
    response = await client.post(PATH, data=body, headers=GOOD)
    assert response.status == 200
    assert await response.json() == {}
    assert sink.accepted == []


async def test_unknown_fields_are_ignored_and_named_in_a_warning(client: Client, sink: Sink) -> None:
    body = {
        "trainerStatus": {
            "progressPercentage": 45,
            "phase": "eval",
            "metrics": [{"name": "a", "value": "1", "unit": "s"}],
        },
        "step": 3,
    }
    response = await client.post(PATH, json=body, headers=GOOD)
    assert response.status == 200
    assert response.headers["Warning"] == (
        '299 kubetrain "unknown fields ignored: step, trainerStatus.phase, trainerStatus.metrics[0].unit"'
    )
    [(_, status, _)] = sink.accepted
    assert status.progress_percentage == 45 and status.metric("a") == "1"


async def test_an_ignored_field_named_with_any_characters_cannot_break_the_warning_header(
    client: Client, sink: Sink
) -> None:
    body = {"trainerStatus": {"progressPercentage": 45, 'na\u00efve"\r\nX-Injected: 1': 1}}
    response = await client.post(PATH, json=body, headers=GOOD)
    assert response.status == 200
    assert (
        response.headers["Warning"]
        == '299 kubetrain "unknown field ignored: trainerStatus.na?ve???X-Injected: 1"'
    )
    assert "X-Injected" not in response.headers
    assert len(sink.accepted) == 1


async def test_a_field_name_sent_in_another_case_is_read_as_trainer_v2_3s_decoder_reads_it(
    client: Client, sink: Sink
) -> None:
    body = {"TrainerStatus": {"ProgressPercentage": 45, "METRICS": [{"Name": "loss", "VALUE": "0.5"}]}}
    response = await client.post(PATH, json=body, headers=GOOD)
    assert response.status == 200 and "Warning" not in response.headers
    [(_, status, _)] = sink.accepted
    assert status.progress_percentage == 45 and status.metric("loss") == "0.5"


async def test_what_follows_the_first_json_value_is_not_read_as_trainer_v2_3s_decoder_does_not(
    client: Client, sink: Sink
) -> None:
    response = await client.post(
        PATH, data=b'{"trainerStatus": {"progressPercentage": 7}}\ntrailing', headers=GOOD
    )
    assert response.status == 200
    assert [status.progress_percentage for _, status, _ in sink.accepted] == [7]


async def test_an_oversized_body_is_413_and_never_reaches_the_authenticator(
    client: Client,
    tokens: Tokens,
) -> None:
    for headers in (GOOD, {}):  # Trainer v2.3 looks at the size before the token
        response = await client.post(PATH, data=b"x" * (MAX_REPORT_BYTES + 1), headers=headers)
        assert response.status == 413
        assert (await response.json())["reason"] == "RequestEntityTooLarge"
    assert tokens.checked == 0


async def test_a_flood_with_one_token_is_429_with_retry_after_before_the_token_is_checked(
    tokens: Tokens, sink: Sink
) -> None:
    clock = Clock()
    app = status_application(
        ROUTES, tokens, sink, token_limits=RateLimiter(1.0, 3, clock=clock), now=lambda: RECEIVED, clock=clock
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
        ROUTES, tokens, sink, job_limits=RateLimiter(1.0, 2, clock=clock), now=lambda: RECEIVED, clock=clock
    )
    async with TestClient(TestServer(app)) as client:
        codes = [(await client.post(PATH, json=REPORT, headers=GOOD)).status for _ in range(3)]
    assert codes == [200, 200, 429]


async def test_the_endpoint_serves_tls_that_a_client_trusting_only_its_ca_accepts(
    tokens: Tokens, sink: Sink
) -> None:
    tls = credentials.issue(["127.0.0.1", "localhost"])
    runner = await serve(status_application(ROUTES, tokens, sink), "127.0.0.1", 0, tls.server_context())
    try:
        port = runner.addresses[0][1]
        client_context = ssl.create_default_context(cadata=tls.ca_cert)
        request = urllib.request.Request(
            f"https://127.0.0.1:{port}{PATH}", data=json.dumps(REPORT).encode(), headers=GOOD, method="POST"
        )
        answer = await asyncio.to_thread(
            urllib.request.urlopen, request, context=client_context, timeout=PATIENCE
        )
        assert answer.status == 200
    finally:
        await runner.cleanup()
    assert len(sink.accepted) == 1
