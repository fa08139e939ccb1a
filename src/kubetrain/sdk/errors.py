"""The SDK's errors, in upstream's vocabulary: ``ValueError`` for bad input, ``TimeoutError`` when
waiting runs out, ``RuntimeError`` when the backend fails. The subclasses let callers (and the CLI)
tell the common failures apart without parsing messages."""

from __future__ import annotations


class TrainingApiError(RuntimeError):
    """A backend call failed (upstream: ``Failed to <verb> <Kind>: <namespace>/<name>``)."""


class JobNotFoundError(TrainingApiError):
    """The job (or its local run) does not exist."""


class JobExistsError(TrainingApiError):
    """A job of that name already exists (or is already running locally)."""


class AccessDeniedError(TrainingApiError):
    """The API server refused the request (403 Forbidden, 401 Unauthorized)."""


class BackendUnavailableError(TrainingApiError):
    """No cluster to talk to: no kubeconfig, an unknown context, or an unreachable API server."""


class UnsupportedOperationError(TrainingApiError):
    """The backend cannot do this (e.g. updating a local run while it runs, or cluster logs without a
    kubelet)."""


class JobFailedError(TrainingApiError):
    """``wait_for_job_conditions`` saw the job fail while waiting for something else."""

    def __init__(self, message: str, job: object) -> None:
        super().__init__(message)
        self.job = job
