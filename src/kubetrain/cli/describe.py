"""``kubetrain describe KIND NAME``: what is wrong with a job now, its spec summary, replicas, pods,
conditions and recent Events (a TrainJob's runtime, trainer, progress and JobSet jobs)."""

from __future__ import annotations

from datetime import UTC, datetime
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
from kubetrain.sdk import tables


def describe(
    kind_or_name: str = typer.Argument(
        ...,
        metavar="KIND",
        help="The job's kind (or KIND/NAME, or just NAME).",
        autocompletion=complete_kind,
    ),
    name: str | None = typer.Argument(None, metavar="[NAME]", help="The job's name."),
    namespace: str | None = NamespaceOption,
    local: bool = LocalOption,
    state_dir: Path | None = StateDirOption,
    kubeconfig: Path | None = KubeconfigOption,
    context: str | None = ContextOption,
) -> None:
    """Show one job in detail: what is wrong with it now, run policy, replicas, pods, conditions and events.

    A Diagnosis section comes first while the job shows a known failure mode (a half-scheduled gang, pods
    waiting for resources, a crash loop, an image that cannot be pulled, an OOM kill, workers waiting for
    their master, replicas on different image digests, stalled progress): its cause and fix.

    Then, once a replica has failed, which one failed first: its pod and node, its exit code and reason, when,
    and its last lines, kept on the job so that they are there after its pods are gone (cleanPodPolicy, TTL);
    and each other failed replica's latest failure.

    A TrainJob shows its runtime, trainer, progress and its JobSet's replicated jobs (jobsStatus) instead of
    the run policy and replicas.

    Example: kubetrain describe pytorchjob mnist -n team-a

    Example: kubetrain describe trainjob torch-ddp

    Example: kubetrain describe --local pytorchjob/hello
    """
    with reported_errors():
        kind, job_name = split_kind_and_name(kind_or_name, name)
        if job_name is None:
            raise ValueError("name the job: kubetrain describe KIND NAME")
        client = Target(local, state_dir, kubeconfig, context, namespace).client()
        job = find_job(client, kind, job_name)
        kind_of_job = kind_name(client.kind_of(job))
        pods = client.get_job_pods(job.name, job.namespace, job_kind=kind_of_job)
        events = client.get_job_events(job.name, job.namespace, kind_of_job)
        findings = client.get_job_diagnosis(job.name, job.namespace, kind_of_job)
        state = client.get_job_state(job.name, job.namespace, kind_of_job)
        failures = client.get_job_failures(job.name, job.namespace, kind_of_job)
        typer.echo(tables.describe(job, pods, events, datetime.now(UTC), findings, state, failures))
