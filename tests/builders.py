"""Small builders for job manifests and typed jobs, shared by every test tier.

``job("PyTorchJob", {"Master": 1, "Worker": 2})`` is a parsed PyTorchJob whose replicas each run
one container named after the framework's default container (``pytorch``), image ``busybox``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from typer.testing import CliRunner

from kubetrain.api.common import ReplicaStatus
from kubetrain.api.jobs import V1, TrainingJob
from kubetrain.api.manifest import parse_job
from kubetrain.frameworks.base import StatusContext
from kubetrain.frameworks.registry import framework_for_kind


@dataclass(frozen=True)
class ObservedPhase:
    """A replica as the frameworks' status rules see it (``ReplicaPhase``), on its own."""

    replica_type: str
    index: int
    phase: str
    exit_code: int | None = None
    reason: str | None = None
    message: str | None = None


def container(name: str, image: str = "busybox", **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": image, **extra}


def replica_spec(
    replicas: int | None,
    containers: list[dict[str, Any]],
    restart_policy: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"containers": containers}}}
    if replicas is not None:
        spec["replicas"] = replicas
    if restart_policy is not None:
        spec["restartPolicy"] = restart_policy
    return spec


def manifest(
    kind: str,
    replicas: Mapping[str, int | None],
    *,
    name: str = "test-job",
    namespace: str | None = "default",
    api_version: str = V1,
    spec: Mapping[str, Any] | None = None,
    restart_policy: str | None = None,
    containers: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A job manifest: one replica spec per entry of ``replicas`` (``None`` leaves ``replicas`` unset)."""
    framework = framework_for_kind(api_version, kind)
    spec_model = framework.model.model_fields["spec"].annotation
    assert isinstance(spec_model, type)
    field_name = spec_model.REPLICA_SPECS_FIELD
    alias = spec_model.model_fields[field_name].alias or _camel(field_name)
    default_containers = containers if containers is not None else [container(framework.default_container)]
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": metadata,
        "spec": {
            alias: {
                replica_type: replica_spec(count, [dict(c) for c in default_containers], restart_policy)
                for replica_type, count in replicas.items()
            },
            **(spec or {}),
        },
    }


def job(kind: str, replicas: Mapping[str, int | None], **options: Any) -> TrainingJob:
    """The parsed (not defaulted) job of ``manifest(kind, replicas, **options)``."""
    return parse_job(manifest(kind, replicas, **options), strict=True)


def defaulted(kind: str, replicas: Mapping[str, int | None], **options: Any) -> TrainingJob:
    """``job(...)`` after its framework's defaulting, as the engine sees it."""
    parsed = job(kind, replicas, **options)
    result: TrainingJob = framework_for_kind(parsed.API_VERSION, parsed.KIND).set_defaults(parsed)
    return result


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part.title() for part in rest)


def status_context(
    job: TrainingJob,
    statuses: Mapping[str, ReplicaStatus] | None = None,
    replicas: Sequence[ObservedPhase] = (),
    *,
    colocated: bool = False,
) -> StatusContext:
    """What a framework's status rules see: replicaStatuses counted this round and the replicas."""
    return StatusContext(
        job=job, replica_statuses=dict(statuses or {}), replicas=replicas, colocated=colocated
    )


def counted(active: int = 0, succeeded: int = 0, failed: int = 0) -> ReplicaStatus:
    return ReplicaStatus(active=active, succeeded=succeeded, failed=failed)


def cli_runner() -> CliRunner:
    """A CliRunner with the same terminal everywhere: 200 columns.

    typer draws usage errors in a rich box as wide as the terminal, so a message wraps differently in
    a narrow terminal (or none, in CI: 80 columns), and a test of its words would pass only where the
    terminal happens to be wide enough.
    """
    return CliRunner(env={"COLUMNS": "200"})
