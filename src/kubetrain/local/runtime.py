"""The local runtimes: its own module, so reading local runs (``get --local``) does not import the runner."""

from __future__ import annotations

from enum import StrEnum


class Runtime(StrEnum):
    """``--runtime``: what runs each replica locally."""

    PROCESS = "process"
    PODMAN = "podman"
    DOCKER = "docker"
