"""GPUs for local replicas: ``nvidia.com/gpu`` limits become disjoint ``CUDA_VISIBLE_DEVICES``.

On a cluster the device plugin gives each pod its own GPUs; here the runner does the same by
hand, so two replicas never train on one device by accident. A job that asks for more GPUs than
this machine has fails before anything starts, rather than hanging in a collective later.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

GPU_RESOURCE = "nvidia.com/gpu"
CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"

_GPU_LINE = re.compile(r"^GPU (\d+):")


class GpuShortageError(RuntimeError):
    """The job asks for more GPUs than this machine has."""


@dataclass(frozen=True)
class GpuRequest:
    replica: str
    """``<type>-<index>``, for messages."""
    field_path: str
    """Where the request was made, e.g. ``spec.pytorchReplicaSpecs.Worker.template.spec.containers[0]``."""
    count: int


def requested_gpus(container: Mapping[str, Any]) -> int:
    """The container's ``nvidia.com/gpu`` limit (requests must equal limits for extended resources)."""
    resources = container.get("resources") or {}
    value = (resources.get("limits") or {}).get(GPU_RESOURCE)
    if value is None:
        value = (resources.get("requests") or {}).get(GPU_RESOURCE)
    return int(value) if value is not None else 0


def parse_nvidia_smi_list(output: str) -> list[str]:
    """Device indices from ``nvidia-smi -L`` (``GPU 0: NVIDIA H100 (UUID: GPU-...)``)."""
    return [match.group(1) for line in output.splitlines() if (match := _GPU_LINE.match(line.strip()))]


def detect_gpus() -> list[str]:
    """This machine's GPU indices; none when ``nvidia-smi`` is absent or fails."""
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return []
    try:
        result = subprocess.run([binary, "-L"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_nvidia_smi_list(result.stdout) if result.returncode == 0 else []


def assign_gpus(requests: list[GpuRequest], available: list[str]) -> dict[str, list[str]]:
    """Disjoint devices for each replica that asks for some, in request order.

    Raises ``GpuShortageError`` naming every request when the total exceeds what exists.
    """
    wanted = sum(r.count for r in requests)
    if wanted > len(available):
        asked = "; ".join(f"{r.replica} asks for {r.count} at {r.field_path}" for r in requests if r.count)
        have = f"{len(available)} GPU(s)" + (f" ({', '.join(available)})" if available else "")
        raise GpuShortageError(
            f"the job asks for {wanted} GPU(s) ({GPU_RESOURCE} limits) but this machine has {have}: "
            f"{asked}. Lower the limits or run on a machine with more GPUs."
        )
    assigned: dict[str, list[str]] = {}
    cursor = 0
    for request in requests:
        if request.count:
            assigned[request.replica] = available[cursor : cursor + request.count]
            cursor += request.count
    return assigned
