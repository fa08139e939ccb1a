"""``kubetrain plan``: print exactly what a manifest would become, on Kubernetes or locally.

A Kubeflow Trainer TrainJob is planned on its runtime, found as ``kubetrain run`` finds it: in the file, in a
``--runtime-file``, or among the built-in ClusterTrainingRuntimes."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from kubetrain.api.errors import InvalidJobError
from kubetrain.api.jobs import TrainingJob
from kubetrain.api.manifest import load_documents, parse_job
from kubetrain.cli.errors import fail_invalid
from kubetrain.cli.output import to_json, to_yaml
from kubetrain.kube.plan import kubernetes_plan, trainjob_kubernetes_plan
from kubetrain.local.plan import plan_for, trainjob_plan_for
from kubetrain.local.runtime import Runtime
from kubetrain.local.trainjob import (
    is_runtime,
    is_trainjob,
    parse_runtimes,
    parse_trainjob,
    resolve_runtime,
)


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
    runtime_file: list[Path] = typer.Option(
        [],
        "--runtime-file",
        exists=True,
        dir_okay=False,
        help="A TrainingRuntime or ClusterTrainingRuntime a TrainJob may name (repeatable); the file's own "
        "runtimes and the built-in ones are found without it.",
    ),
) -> None:
    """Print the objects (Kubernetes) or processes (local) a job manifest would create.

    A TrainJob on Kubernetes: the runtime snapshot, Trainer's companions (MPI Secret and hostfile, PodGroup)
    and the JobSet, as the operator applies them; locally: each node's process, as kubetrain run starts it.

    Example: kubetrain plan examples/pytorch-ddp/job.yaml --target local

    Example: kubetrain plan examples/trainjob/torch-ddp.yaml
    """
    try:
        manifests = load_documents(file.read_text())
        runtimes = parse_runtimes(
            [d for d in manifests if is_runtime(d)]
            + [d for path in runtime_file for d in load_documents(path.read_text()) if is_runtime(d)]
        )
        documents: list[dict[str, Any]] = []
        for manifest in manifests:
            if is_runtime(manifest):
                continue
            if is_trainjob(manifest):
                trainjob = parse_trainjob({**manifest, "metadata": _with_namespace(manifest, namespace)})
                training_runtime = resolve_runtime(trainjob, runtimes)
                if target is Target.KUBERNETES:
                    documents.extend(trainjob_kubernetes_plan(trainjob, training_runtime))
                else:
                    documents.extend(trainjob_plan_for(trainjob, training_runtime, runtime, Path.cwd()))
                continue
            job: TrainingJob = parse_job(manifest, strict=True)
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


def _with_namespace(manifest: dict[str, Any], namespace: str | None) -> Any:
    metadata = manifest.get("metadata")
    if namespace and isinstance(metadata, dict) and not metadata.get("namespace"):
        return {**metadata, "namespace": namespace}
    return metadata
