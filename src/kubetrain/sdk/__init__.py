"""The Python SDK (``TrainingClient``) over a cluster or local runs."""

from kubetrain.sdk.client import TrainingClient
from kubetrain.sdk.errors import (
    AccessDeniedError,
    BackendUnavailableError,
    JobExistsError,
    JobFailedError,
    JobNotFoundError,
    TrainingApiError,
    UnsupportedOperationError,
)

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
