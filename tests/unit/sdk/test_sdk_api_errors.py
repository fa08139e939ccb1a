"""API server statuses become the SDK's errors, each keeping the server's message."""

from __future__ import annotations

import pytest

from kubetrain.sdk.backends.kubernetes import _status_error
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
