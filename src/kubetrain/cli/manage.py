"""``kubetrain delete``, ``suspend``, ``resume`` and ``scale``: change a job on the cluster or a local run.

A local run has no API server to edit: suspend, resume and scale stop it and start it again from the
changed manifest."""

from __future__ import annotations

from pathlib import Path

import typer

from kubetrain.cli.jobs import (
    ContextOption,
    KubeconfigOption,
    LocalOption,
    NamespaceOption,
    StateDirOption,
    Target,
    complete_kind,
    find_job,
    kind_name,
    reported_errors,
    split_kind_and_name,
)
from kubetrain.sdk import TrainingClient
from kubetrain.sdk.kinds import Job
from kubetrain.sdk.tables import qualified_name

KindArgument = typer.Argument(
    ..., metavar="KIND", help="The job's kind (or KIND/NAME, or just NAME).", autocompletion=complete_kind
)
NameArgument = typer.Argument(None, metavar="[NAME]", help="The job's name.")


def _job(client_target: Target, kind_or_name: str, name: str | None) -> tuple[TrainingClient, Job]:
    kind, job_name = split_kind_and_name(kind_or_name, name)
    if job_name is None:
        raise ValueError("name the job: KIND NAME, KIND/NAME or NAME")
    client = client_target.client()
    return client, find_job(client, kind, job_name)


def delete(
    kind_or_name: str = KindArgument,
    name: str | None = NameArgument,
    cascade: str = typer.Option(
        "background", "--cascade", help="background, foreground (wait for the pods) or orphan (keep them)."
    ),
    grace_period: int | None = typer.Option(
        None, "--grace-period", help="Seconds the pods get to stop (kubectl's --grace-period)."
    ),
    namespace: str | None = NamespaceOption,
    local: bool = LocalOption,
    state_dir: Path | None = StateDirOption,
    kubeconfig: Path | None = KubeconfigOption,
    context: str | None = ContextOption,
) -> None:
    """Delete a job (its pods and services go with it; a TrainJob's JobSet too); locally, stop the run and
    forget it.

    Example: kubetrain delete pytorchjob mnist -n team-a

    Example: kubetrain delete trainjob torch-ddp

    Example: kubetrain delete --local hello
    """
    with reported_errors():
        client, job = _job(Target(local, state_dir, kubeconfig, context, namespace), kind_or_name, name)
        options = {"propagationPolicy": cascade.capitalize(), "gracePeriodSeconds": grace_period}
        client.delete_job(job.name, job.namespace, kind_name(client.kind_of(job)), options)
        typer.echo(f'{qualified_name(job).rpartition("/")[0]} "{job.name}" deleted')


def suspend(
    kind_or_name: str = KindArgument,
    name: str | None = NameArgument,
    namespace: str | None = NamespaceOption,
    local: bool = LocalOption,
    state_dir: Path | None = StateDirOption,
    kubeconfig: Path | None = KubeconfigOption,
    context: str | None = ContextOption,
) -> None:
    """Suspend a job (runPolicy.suspend=true; a TrainJob's spec.suspend): its pods are deleted and it waits
    until resumed.

    Example: kubetrain suspend pytorchjob mnist
    """
    with reported_errors():
        client, job = _job(Target(local, state_dir, kubeconfig, context, namespace), kind_or_name, name)
        client.suspend_job(job.name, job.namespace, kind_name(client.kind_of(job)))
        typer.echo(f"{qualified_name(job)} suspended")


def resume(
    kind_or_name: str = KindArgument,
    name: str | None = NameArgument,
    namespace: str | None = NamespaceOption,
    local: bool = LocalOption,
    state_dir: Path | None = StateDirOption,
    kubeconfig: Path | None = KubeconfigOption,
    context: str | None = ContextOption,
) -> None:
    """Resume a suspended job (runPolicy.suspend=false; a TrainJob's spec.suspend): its pods are created
    again.

    Example: kubetrain resume pytorchjob mnist
    """
    with reported_errors():
        client, job = _job(Target(local, state_dir, kubeconfig, context, namespace), kind_or_name, name)
        client.resume_job(job.name, job.namespace, kind_name(client.kind_of(job)))
        typer.echo(f"{qualified_name(job)} resumed")


def scale(
    kind_or_name: str = KindArgument,
    name: str | None = NameArgument,
    replicas: int = typer.Option(
        ..., "--replicas", min=0, help="The new replica count of the scalable type."
    ),
    namespace: str | None = NamespaceOption,
    local: bool = LocalOption,
    state_dir: Path | None = StateDirOption,
    kubeconfig: Path | None = KubeconfigOption,
    context: str | None = ContextOption,
) -> None:
    """Set the replicas of a job's scalable replica type (e.g. PyTorchJob Workers) via the scale subresource.

    Example: kubetrain scale pytorchjob mnist --replicas 4
    """
    with reported_errors():
        client, job = _job(Target(local, state_dir, kubeconfig, context, namespace), kind_or_name, name)
        client.scale_job(job.name, replicas, job.namespace, kind_name(client.kind_of(job)))
        typer.echo(f"{qualified_name(job)} scaled")
