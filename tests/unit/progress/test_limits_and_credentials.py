"""The endpoint's rate limits (bounded memory) and TLS credentials (issue, cover, renew)."""

from __future__ import annotations

import datetime

import pytest

from kubetrain.progress import credentials
from kubetrain.progress.limits import RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_key_gets_its_burst_then_its_rate() -> None:
    clock = Clock()
    limiter = RateLimiter(2.0, 3, clock=clock)
    assert [limiter.allow("a") for _ in range(3)] == [None, None, None]
    assert limiter.allow("a") == pytest.approx(0.5)
    clock.now += 0.5
    assert limiter.allow("a") is None


def test_keys_are_limited_separately() -> None:
    limiter = RateLimiter(1.0, 1, clock=Clock())
    assert limiter.allow("a") is None
    assert limiter.allow("b") is None
    assert limiter.allow("a") is not None


def test_a_flood_of_new_keys_does_not_grow_the_limiter_past_its_bound() -> None:
    limiter = RateLimiter(1.0, 1, max_keys=100, clock=Clock())
    for key in range(10_000):
        limiter.allow(str(key))
    assert len(limiter) == 100


def test_a_limiter_needs_a_positive_rate_and_burst() -> None:
    with pytest.raises(ValueError, match="rate > 0 and burst >= 1"):
        RateLimiter(0, 1)


def test_issued_credentials_cover_their_names_and_are_not_due_for_renewal() -> None:
    now = datetime.datetime(2026, 11, 26, tzinfo=datetime.UTC)
    tls = credentials.issue(["kubetrain.kubeflow.svc", "10.0.0.7"], now)
    assert tls.covers(["kubetrain.kubeflow.svc", "10.0.0.7"])
    assert not tls.covers(["elsewhere.example"])
    assert not tls.needs_renewal(now)
    assert tls.expires() == now + credentials.SERVING_VALIDITY


def test_credentials_near_their_end_need_renewal() -> None:
    issued = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    tls = credentials.issue(["x"], issued)
    assert tls.needs_renewal(issued + credentials.SERVING_VALIDITY - credentials.RENEW_BEFORE)


def test_a_server_context_loads_the_credentials() -> None:
    context = credentials.issue(["localhost"]).server_context()
    assert context.minimum_version.name == "TLSv1_2"
