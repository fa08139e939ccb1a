"""``kubetrain submit FILE``: validate each job of a manifest and create it on a cluster or as a local run.

A file may hold Kubeflow Trainer TrainJobs and the runtimes they name, as ``kubetrain run`` reads it: a local
TrainJob runs on those runtimes (or a built-in one); a cluster's TrainJob names the cluster's runtimes, so the
file's are not created there (that is ``kubectl apply``'s work) and submit says so."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from kubetrain.api.errors import InvalidJobError
from kubetrain.api.jobs import TrainingJob
from kubetrain.api.manifest import load_documents, parse_job
from kubetrain.api.trainer import TrainJob
from kubetrain.cli.errors import fail_invalid
from kubetrain.cli.jobs import (
    ContextOption,
    KubeconfigOption,
    LocalOption,
    NamespaceOption,
    StateDirOption,
    Target,
    reported_errors,
)
from kubetrain.cli.output import to_json, to_yaml
from kubetrain.engine.admission import admit
from kubetrain.engine.types import CLUSTER_CEILING
from kubetrain.local.trainjob import is_runtime, is_trainjob, parse_runtimes, parse_trainjob
from kubetrain.sdk.tables import qualified_name


def submit(
    file: Path = typer.Argument(..., help="A manifest (YAML or JSON) with one or more jobs; - reads stdin."),
    namespace: str | None = NamespaceOption,
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the defaulted, validated job instead of creating it."
    ),
    output: str | None = typer.Option(None, "--output", "-o", help="yaml or json: print the created jobs."),
    local: bool = LocalOption,
    state_dir: Path | None = StateDirOption,
    kubeconfig: Path | None = KubeconfigOption,
    context: str | None = ContextOption,
    runtime: str = typer.Option(
        "process",
        "--runtime",
        help="With --local: process (each replica a process here), podman or docker (each in its image).",
    ),
) -> None:
    """Create the jobs of a manifest, after checking them as the API server and the operator would.

    With --local each job starts as a background run on this machine (follow it: kubetrain logs --local -f).

    Example: kubetrain submit job.yaml -n team-a

    Example: kubetrain submit job.yaml --local

    Example: kubetrain submit job.yaml --local --runtime podman

    Example: kubetrain submit job.yaml --dry-run -o yaml

    Example: kubetrain submit trainjob.yaml --local
    """
    if output not in (None, "yaml", "json"):
        raise typer.BadParameter("supported values: yaml, json", param_hint="--output")
    if runtime not in ("process", "podman", "docker"):
        raise typer.BadParameter("supported values: process, podman, docker", param_hint="--runtime")
    if runtime != "process" and not local:
        raise typer.BadParameter("--runtime chooses how a local run starts its replicas: add --local")
    source = "<stdin>" if str(file) == "-" else str(file)
    try:
        text = sys.stdin.read() if str(file) == "-" else file.read_text(encoding="utf-8")
    except OSError as error:
        raise typer.BadParameter(f"cannot read {file}: {error.strerror}", param_hint="FILE") from None
    try:
        documents = load_documents(text)
        runtimes = [d for d in documents if is_runtime(d)]
        parse_runtimes(runtimes)  # each named by its field when it is invalid
        # The operator's own limits are its flags; a client can only refuse what no cluster can run.
        jobs: list[TrainingJob | TrainJob] = [
            parse_trainjob(document)
            if is_trainjob(document)
            else admit(parse_job(document, strict=True), limits=CLUSTER_CEILING)
            for document in documents
            if not is_runtime(document)
        ]
    except InvalidJobError as error:
        fail_invalid(source, error)
    if not jobs:
        raise typer.BadParameter(f"{source} holds no job", param_hint="FILE")
    if runtimes and not local:
        names = ", ".join(f"{r.get('kind')}/{(r.get('metadata') or {}).get('name')}" for r in runtimes)
        typer.echo(
            f"note: {names} not created: a cluster's TrainJob runs on the cluster's runtimes (kubectl apply "
            "them); --local runs on the file's",
            err=True,
        )
    with reported_errors():
        client = Target(local, state_dir, kubeconfig, context, namespace, runtime).client()
        created = [
            client.create_job(job, namespace=namespace, dry_run=dry_run, runtimes=runtimes if local else ())
            for job in jobs
        ]
    if output == "json":
        typer.echo(to_json([_wire(j) for j in created] if len(created) > 1 else _wire(created[0])))
        return
    if output == "yaml" or dry_run:
        typer.echo(to_yaml([_wire(j) for j in created]), nl=False)
        return
    for job in created:
        typer.echo(f"{qualified_name(job)} created")


def _wire(job: TrainingJob | TrainJob) -> dict[str, Any]:
    """The job as the server stores it; a status nobody wrote yet is left out."""
    wire = job.to_wire()
    if not job.status.conditions:
        wire.pop("status", None)
    return wire
