"""From a replica's plan (its injected pod template) to the process that runs it locally.

This is the local counterpart of rendering a Pod: the main container's ``command`` + ``args``
become argv, its ``env`` (with the downward API resolved to what it would say about a process on
this host) becomes the process environment, and ``$(VAR)`` references are expanded as the kubelet
would. Things a process cannot have (secrets, config maps, an image's entrypoint) are errors that
name the field and say what to write instead.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubetrain.api.errors import FieldError, InvalidJobError
from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.types import ReplicaPlan
from kubetrain.frameworks.addressing import LOOPBACK
from kubetrain.local.expansion import expand, expand_all
from kubetrain.local.process import InPlaceRestart, LaunchSpec

OMP_NUM_THREADS = "OMP_NUM_THREADS"


def short_name(replica_type: str, index: int) -> str:
    """``worker-1``: the console prefix, log file name and ``--replica`` value."""
    return f"{replica_type.lower()}-{index}"


def main_container(plan: ReplicaPlan) -> tuple[int, dict[str, Any]]:
    containers: list[dict[str, Any]] = (plan.template.get("spec") or {}).get("containers") or []
    for position, container in enumerate(containers):
        if container.get("name") == plan.main_container:
            return position, container
    return 0, containers[0]


def _field_ref(path: str, plan: ReplicaPlan, job: TrainingJob) -> str | None:
    metadata = plan.template.get("metadata") or {}
    simple: dict[str, str] = {
        "metadata.name": plan.name,
        "metadata.namespace": job.namespace,
        "metadata.uid": job.metadata.uid or "",
        "spec.nodeName": socket.gethostname(),
        "spec.serviceAccountName": str(
            (plan.template.get("spec") or {}).get("serviceAccountName", "default")
        ),
        "status.podIP": LOOPBACK,
        "status.podIPs": LOOPBACK,
        "status.hostIP": LOOPBACK,
        "status.hostIPs": LOOPBACK,
    }
    if path in simple:
        return simple[path]
    for prefix, values in (
        ("metadata.labels", {**(metadata.get("labels") or {}), **plan.labels}),
        ("metadata.annotations", metadata.get("annotations") or {}),
    ):
        if path.startswith(f"{prefix}['") and path.endswith("']"):
            return str(values.get(path[len(prefix) + 2 : -2], ""))
    return None


def container_env(
    plan: ReplicaPlan, job: TrainingJob, container: Mapping[str, Any], path: str
) -> dict[str, str]:
    """The container's ``env`` resolved in order; each value may refer to variables defined before it."""
    resolved: dict[str, str] = {}
    errors: list[FieldError] = []
    for position, entry in enumerate(container.get("env") or []):
        name = str(entry.get("name", ""))
        where = f"{path}.env[{position}]"
        if "value" in entry or "valueFrom" not in entry:
            resolved[name] = expand(str(entry.get("value", "") or ""), resolved)
            continue
        source = entry["valueFrom"] or {}
        field_ref = source.get("fieldRef")
        value = _field_ref(str(field_ref.get("fieldPath", "")), plan, job) if field_ref else None
        if value is None:
            kinds = ", ".join(sorted(source)) or "valueFrom"
            errors.append(
                FieldError(
                    f"{where}.valueFrom",
                    f"{kinds} cannot be resolved for a local process (no cluster here); "
                    f"give {name} a literal 'value' instead",
                )
            )
            continue
        resolved[name] = value
    if errors:
        raise InvalidJobError(errors)
    return resolved


def process_environment(
    container_vars: Mapping[str, str], base: Mapping[str, str], extra: Mapping[str, str]
) -> dict[str, str]:
    """This process's environment, the interpreter's bin first on PATH, then the container's env.

    The interpreter's bin directory goes first so ``python`` and ``torchrun`` in a manifest are the
    ones kubetrain runs under (its virtual environment), not whatever else is on PATH.
    """
    env = dict(base)
    interpreter_bin = str(Path(sys.executable).parent)
    path_entries = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p and p != interpreter_bin]
    env["PATH"] = os.pathsep.join([interpreter_bin, *path_entries])
    env.update(extra)
    env.update(container_vars)
    if OMP_NUM_THREADS not in container_vars:
        # Oversubscribed OpenMP threads stall gloo and XLA on small machines; torchrun does the same.
        env[OMP_NUM_THREADS] = "1"
    return env


def launch_spec(
    plan: ReplicaPlan,
    job: TrainingJob,
    *,
    cwd: Path,
    base_env: Mapping[str, str],
    extra_env: Mapping[str, str],
) -> LaunchSpec:
    """The process for ``plan``; raises ``InvalidJobError`` when the container cannot run locally."""
    position, container = main_container(plan)
    path = f"{job.replica_specs_path}.{plan.replica_type}.template.spec.containers[{position}]"
    variables = container_env(plan, job, container, path)
    command = [str(c) for c in container.get("command") or []]
    args = [str(a) for a in container.get("args") or []]
    if not command:
        raise InvalidJobError(
            [
                FieldError(
                    f"{path}.command",
                    "required to run locally: the image's entrypoint is not available without a "
                    "container runtime; write the program to run, e.g. [python, train.py]",
                )
            ]
        )
    pod_policy = str((plan.template.get("spec") or {}).get("restartPolicy") or "Never")
    return LaunchSpec(
        replica_type=plan.replica_type,
        index=plan.index,
        prefix=short_name(plan.replica_type, plan.index),
        argv=tuple(expand_all(command + args, variables)),
        env=process_environment(variables, base_env, extra_env),
        # ``workingDir`` is a path inside the image, like ``image`` itself: replicas run in ``cwd``.
        cwd=cwd,
        restart=_in_place_restart(pod_policy),
        container=str(container.get("name") or ""),
    )


def _in_place_restart(pod_policy: str) -> InPlaceRestart:
    try:
        return InPlaceRestart(pod_policy)
    except ValueError:
        return InPlaceRestart.NEVER
