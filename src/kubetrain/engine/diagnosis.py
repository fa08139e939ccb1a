"""Diagnosis of a job's failure modes from what the substrates already observe (pure, like the rest)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    """One failure mode found: a Warning event on the job, and the top of ``kubetrain describe``."""

    reason: str
    """The event's reason, e.g. ``GangDeadlock``."""
    message: str
    """Names the replicas, the cause and the fix."""
    replicas: tuple[str, ...] = ()
    """The pods (locally, ``<type>-<index>``) concerned."""
