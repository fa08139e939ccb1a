"""API server statuses become the SDK's errors, each keeping the server's message."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from kubetrain.sdk.backends import kubernetes
from kubetrain.sdk.backends.kubernetes import KubernetesBackend, _status_error
from kubetrain.sdk.errors import (
    AccessDeniedError,
    JobExistsError,
    JobNotFoundError,
    TrainingApiError,
)


@pytest.mark.parametrize(
    ("code", "error"),
    [(404, JobNotFoundError), (403, AccessDeniedError), (401, AccessDeniedError), (409, JobExistsError)],
)
def test_statuses_map_to_their_error(code: int, error: type[TrainingApiError]) -> None:
    assert type(_status_error("Failed to get PyTorchJob: ns/j", code, "said the server")) is error


def test_other_statuses_are_runtime_errors_with_the_servers_message() -> None:
    raised = _status_error("Failed to create PyTorchJob: ns/j", 422, "spec.x: Invalid value")
    assert isinstance(raised, RuntimeError)
    assert str(raised) == "Failed to create PyTorchJob: ns/j: spec.x: Invalid value"


def test_forbidden_says_so_before_the_servers_reason() -> None:
    assert "forbidden: cannot list" in str(_status_error("Failed to list", 403, "cannot list"))


def test_a_missing_object_may_carry_a_friendlier_message() -> None:
    assert str(_status_error("Failed to get", 404, "not found", missing="PyTorchJob ns/j not found")) == (
        "PyTorchJob ns/j not found"
    )


def _status(code: int) -> httpx2.HTTPStatusError:
    request = httpx2.Request("GET", "https://127.0.0.1:1/apis")
    response = httpx2.Response(
        code, json={"kind": "Status", "code": code, "message": f"said {code}"}, request=request
    )
    return httpx2.HTTPStatusError(f"{code}", request=request, response=response)


class Flaky:
    """Answers with the given statuses first, then "ok"; counts the calls."""

    def __init__(self, *codes: int) -> None:
        self.codes = list(codes)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.codes:
            raise _status(self.codes.pop(0))
        return "ok"


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> KubernetesBackend:
    monkeypatch.setattr(kubernetes, "RETRY_DELAYS", (0.0, 0.0, 0.0))
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    return KubernetesBackend(config)


def test_not_now_answers_are_retried_until_the_call_succeeds(backend: KubernetesBackend) -> None:
    call = Flaky(503, 429)
    assert backend._call("Failed to list", call) == "ok"
    assert call.calls == 3


def test_retries_give_up_with_the_servers_message(backend: KubernetesBackend) -> None:
    call = Flaky(503, 503, 503, 503, 503)
    with pytest.raises(TrainingApiError, match="said 503"):
        backend._call("Failed to list", call)
    assert call.calls == 4


def test_other_errors_are_not_retried(backend: KubernetesBackend) -> None:
    call = Flaky(500)
    with pytest.raises(TrainingApiError, match="Failed to create PyTorchJob: ns/j: said 500"):
        backend._call("Failed to create PyTorchJob: ns/j", call)
    assert call.calls == 1
