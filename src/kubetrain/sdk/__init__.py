"""The Python SDK (``TrainingClient``) over a cluster or local runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubetrain.sdk.errors import (
    AccessDeniedError,
    BackendUnavailableError,
    JobExistsError,
    JobFailedError,
    JobNotFoundError,
    TrainingApiError,
    UnsupportedOperationError,
)

if TYPE_CHECKING:
    from kubetrain.sdk.client import TrainingClient

__all__ = [
    "AccessDeniedError",
    "BackendUnavailableError",
    "JobExistsError",
    "JobFailedError",
    "JobNotFoundError",
    "TrainingApiError",
    "TrainingClient",
    "UnsupportedOperationError",
]


def __getattr__(name: str) -> Any:
    # The client imports every kind's model (pydantic): only when asked, so a command that only needs the
    # errors, or lists local runs from their wire form, does not pay for it.
    if name == "TrainingClient":
        from kubetrain.sdk.client import TrainingClient

        return TrainingClient
    raise AttributeError(f"module 'kubetrain.sdk' has no attribute {name!r}")
