"""``kubetrain logs JOB``: every replica's lines prefixed with the replica (``worker-1 | ...``, a TrainJob's
``node-1 | ...``), or one replica's as written; ``-f`` follows until the job ends, waiting for replicas that
have not started."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

import typer

from kubetrain.api.jobs import TrainingJob
from kubetrain.cli.jobs import (
    ContextOption,
    KubeconfigOption,
    LocalOption,
    NamespaceOption,
    StateDirOption,
    Target,
    find_job,
    kind_name,
    reported_errors,
    split_kind_and_name,
)
from kubetrain.engine.failures import ReplicaFailure
from kubetrain.sdk.kept_logs import kept_log_lines


def logs(
    job_ref: str = typer.Argument(..., metavar="JOB", help="The job: NAME or KIND/NAME."),
    replica: str | None = typer.Option(
        None, "--replica", "-r", help="One replica, <type>-<index> (e.g. worker-1), printed without prefix."
    ),
    master: bool = typer.Option(
        False, "--master", help="Only the master replica (the v1 SDK's default; a TrainJob's node-0)."
    ),
    all_replicas: bool = typer.Option(
        False, "--all", "--all-replicas", help="Every replica, prefixed (the default without --replica)."
    ),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until the job ends."),
    tail: int | None = typer.Option(None, "--tail", help="Only the last N lines of each replica first."),
    namespace: str | None = NamespaceOption,
    local: bool = LocalOption,
    state_dir: Path | None = StateDirOption,
    kubeconfig: Path | None = KubeconfigOption,
    context: str | None = ContextOption,
) -> None:
    """Print a job's logs: every replica's lines prefixed with the replica, or one replica's as written.

    On a cluster the API server reads logs from the kubelets; a cluster without them (envtest) says so.

    A replica that failed and whose pod is gone (cleanPodPolicy, TTL) is shown from what the job kept of it:
    one line naming the pod, its exit code and when it failed, then its last lines.

    Example: kubetrain logs mnist -f

    Example: kubetrain logs --local hello --replica worker-1 --tail 20

    Example: kubetrain logs trainjob/torch-ddp --replica node-1 -f
    """
    if replica is not None and (master or all_replicas):
        raise typer.BadParameter("choose one of --replica, --master and --all", param_hint="--replica")
    out: TextIO = typer.get_text_stream("stdout")
    with reported_errors():
        kind, job_name = split_kind_and_name(job_ref, None)
        assert job_name is not None
        client = Target(local, state_dir, kubeconfig, context, namespace).client()
        job = find_job(client, kind, job_name)
        kind_of_job = kind_name(client.kind_of(job))
        replicas = client.get_job_replicas(job.name, job.namespace, kind_of_job)
        failures = client.get_job_failures(job.name, job.namespace, kind_of_job)
        kept = {f.replica for f in failures.failures()} if failures is not None else set()
        replica_type = replica_index = None
        if replica is not None:
            if replicas and replica not in replicas.values() and replica not in kept:
                names = ", ".join(sorted(replicas.values(), key=_replica_order))
                raise ValueError(f"job {job.name} has no replica {replica!r}; it has: {names}")
            replica_type, _, index = replica.rpartition("-")
            replica_index = int(index) if index.isdigit() else None
            replica_type = replica_type or replica
        framework = client.kind_of(job).v1_framework if isinstance(job, TrainingJob) else None

        def selected(failure: ReplicaFailure) -> bool:
            if replica is not None:
                return failure.replica == replica
            if master:
                assert isinstance(job, TrainingJob)
                return framework is not None and framework.is_master_role(
                    job, failure.replica_type, failure.index
                )
            return True

        # Replicas whose pods are gone (cleanPodPolicy, TTL, a restart): what the job kept of them, first.
        for name, line in kept_log_lines(failures, set(replicas.values()), selected, tail):
            out.write(f"{line}\n" if replica is not None else f"{name} | {line}\n")
        lines = client.stream_job_logs(
            job.name,
            job.namespace,
            kind_of_job,
            is_master=master,
            replica_type=replica_type,
            replica_index=replica_index,
            follow=follow,
            tail_lines=tail,
        )
        prefix = f"{job.name}-"
        for pod, line in lines:
            if replica is None:
                # Pods that started after the listing above are named as their pod names say.
                line = f"{replicas.get(pod) or pod.removeprefix(prefix)} | {line}"
            out.write(f"{line}\n")
            out.flush()


def _replica_order(replica: str) -> tuple[str, int]:
    replica_type, _, index = replica.rpartition("-")
    return (replica_type, int(index)) if index.isdigit() else (replica, 0)
