"""``kubetrain plan``: print exactly what a manifest would become, on Kubernetes or locally."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from kubetrain.api.errors import InvalidJobError
from kubetrain.api.manifest import load_jobs
from kubetrain.cli.errors import fail_invalid
from kubetrain.cli.output import to_json, to_yaml
from kubetrain.kube.plan import kubernetes_plan
from kubetrain.local.plan import plan_for
from kubetrain.local.runtime import Runtime


class Target(StrEnum):
    KUBERNETES = "kubernetes"
    LOCAL = "local"


class Output(StrEnum):
    YAML = "yaml"
    JSON = "json"


def plan(
    file: Path = typer.Argument(..., exists=True, dir_okay=False, help="Job manifest (YAML or JSON)."),
    target: Target = typer.Option(Target.KUBERNETES, "--target", "-t", help="Where the job would run."),
    output: Output = typer.Option(Output.YAML, "--output", "-o", help="Output format."),
    namespace: str | None = typer.Option(
        None, "--namespace", "-n", help="Namespace for jobs that name none (default: default)."
    ),
    gang_scheduler_name: str | None = typer.Option(
        None, "--gang-scheduler-name", help="Show the PodGroup and pod decoration for this gang scheduler."
    ),
    runtime: Runtime = typer.Option(
        Runtime.PROCESS,
        "--runtime",
        help="With --target local: processes, or the podman/docker containers (image, network, run command).",
    ),
) -> None:
    """Print the objects (Kubernetes) or processes (local) a job manifest would create.

    Example: kubetrain plan examples/pytorch-ddp/job.yaml --target local
    """
    try:
        jobs = load_jobs(file)
        documents: list[dict[str, Any]] = []
        for job in jobs:
            if namespace and not job.metadata.namespace:
                job = job.model_copy(
                    update={"metadata": job.metadata.model_copy(update={"namespace": namespace})}
                )
            if target is Target.KUBERNETES:
                documents.extend(kubernetes_plan(job, gang_scheduler=gang_scheduler_name))
            else:
                documents.extend(plan_for(job, runtime, working_dir=Path.cwd()))
    except InvalidJobError as error:
        fail_invalid(file, error)
    if output is Output.JSON:
        typer.echo(to_json(documents))
    else:
        typer.echo(to_yaml(documents), nl=False)
