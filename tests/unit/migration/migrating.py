"""Builders for the migration tests: a v1 job migrated, and what Trainer plans of the result."""

from __future__ import annotations

from typing import Any

from builders import container, job, manifest
from kubetrain.api.manifest import parse_job
from kubetrain.api.trainer import TrainJob
from kubetrain.engine.trainjob_plan import plan
from kubetrain.frameworks.migration import Migration, migrate
from kubetrain.frameworks.trainer.builtin import builtin_runtimes


def migrated(kind: str, replicas: dict[str, int | None], **options: Any) -> Migration:
    return migrate(job(kind, replicas, **options))


def migrate_manifest(written: dict[str, Any]) -> Migration:
    return migrate(parse_job(written, strict=True))


def migrated_pod(
    kind: str, replicas: dict[str, int | None], pod: dict[str, Any], **options: Any
) -> Migration:
    """Migrated, with ``pod``'s fields added to every replica's pod spec."""
    written = manifest(kind, replicas, **options)
    specs = next(v for k, v in written["spec"].items() if k.endswith("ReplicaSpecs"))
    for spec in specs.values():
        spec["template"]["spec"].update(pod)
    return migrate_manifest(written)


def program(
    name: str, command: list[str] | None = None, args: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    """A container running ``command`` (omitted when None)."""
    found = container(name, "trainer:1", **extra)
    if command is not None:
        found["command"] = command
    if args is not None:
        found["args"] = args
    return found


def trainer(migration: Migration) -> dict[str, Any]:
    found: dict[str, Any] = migration.trainjob.to_wire()["spec"]["trainer"]
    return found


def notes(migration: Migration) -> dict[str, str]:
    return {note.field: note.message for note in migration.notes}


def jobset(migration: Migration) -> dict[str, Any]:
    """The JobSet Trainer plans of the migrated TrainJob on its runtime (its own, else the built-in one)."""
    trainjob = TrainJob.model_validate(migration.trainjob.to_wire())
    trainjob.metadata.namespace = trainjob.metadata.namespace or "default"
    runtime = migration.runtime or builtin_runtimes()[trainjob.spec.runtime_ref.name]
    planned = plan(trainjob, runtime.spec).jobset
    assert planned is not None
    return planned


def replicated(jobset_: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(j for j in jobset_["spec"]["replicatedJobs"] if j["name"] == name)
    return found


def planned_container(jobset_: dict[str, Any], job_name: str = "node") -> dict[str, Any]:
    pod = replicated(jobset_, job_name)["template"]["spec"]["template"]["spec"]
    found: dict[str, Any] = next(c for c in pod["containers"] if c["name"] == "node")
    return found


def env_of(container_: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container_.get("env") or []}
