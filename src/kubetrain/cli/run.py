"""``kubetrain run FILE``: run a job manifest on this machine, every replica a local process."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer

from kubetrain.api.errors import InvalidJobError
from kubetrain.api.jobs import TrainingJob
from kubetrain.api.manifest import load_documents, parse_job
from kubetrain.engine.admission import admit
from kubetrain.frameworks.addressing import Addressing
from kubetrain.local.containers import ContainerEngineError, make_substrate
from kubetrain.local.gpus import GpuShortageError, detect_gpus
from kubetrain.local.runner import LocalRun, Outcome, RunOptions
from kubetrain.local.runtime import Runtime
from kubetrain.local.state import STATE_DIR_ENV, RunDirectory, default_state_dir
from kubetrain.local.substrate import ProcessOptions, Substrate
from kubetrain.local.trainjob import (
    is_runtime,
    is_trainjob,
    parse_runtimes,
    parse_trainjob,
    prepare,
    resolve_runtime,
)

EXIT_SUCCEEDED = 0
EXIT_FAILED = 1
EXIT_INVALID = 2
EXIT_INTERRUPTED = 130
"""128 + SIGINT; a run stopped by SIGTERM exits 128 + SIGTERM (143), as shells report it."""

_EXIT_CODES = {
    Outcome.SUCCEEDED: EXIT_SUCCEEDED,
    Outcome.FAILED: EXIT_FAILED,
    Outcome.INTERRUPTED: EXIT_INTERRUPTED,
}


def _fail(message: str, code: int) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def run_command(
    file: Path = typer.Argument(
        ..., help="The job manifest (YAML or JSON) with exactly one job.", exists=True
    ),
    state_dir: Path | None = typer.Option(
        None,
        "--state-dir",
        envvar=STATE_DIR_ENV,
        help="Where runs keep status.json and logs (default ~/.local/state/kubetrain/runs).",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print the replicas' logs only."),
    grace_period: float = typer.Option(
        30.0,
        "--grace-period",
        min=0.0,
        help="Seconds between SIGTERM and SIGKILL when stopping a replica whose template sets no "
        "terminationGracePeriodSeconds.",
    ),
    runtime: Runtime = typer.Option(
        Runtime.PROCESS,
        "--runtime",
        help="process: each replica a process here; podman/docker: each in its image, on a job network with "
        "the Kubernetes DNS names.",
    ),
    runtime_file: list[Path] = typer.Option(
        [],
        "--runtime-file",
        exists=True,
        help="A TrainingRuntime or ClusterTrainingRuntime a TrainJob may name (repeatable); the file's own "
        "runtimes and the built-in ones are found without it.",
    ),
) -> None:
    """Run a training job on this machine: every replica a process, same env and semantics as on Kubernetes.

    With --runtime podman (or docker) every replica runs in its pod template's image instead.

    A Kubeflow Trainer v2 TrainJob runs every node of its runtime's JobSet here; the runtime comes from the
    file, --runtime-file or the built-in ClusterTrainingRuntimes.

    Exit status: 0 Succeeded, 1 Failed, 2 invalid manifest, 130 interrupted (Ctrl-C; 143 for SIGTERM).

    Example: kubetrain run examples/pytorch-ddp/job.yaml
    """
    try:
        documents = load_documents(file.read_text())
        runtimes = [d for d in documents if is_runtime(d)]
        runtimes += [d for path in runtime_file for d in load_documents(path.read_text()) if is_runtime(d)]
        documents = [d for d in documents if not is_runtime(d)]
        if len(documents) != 1:
            raise _fail(f"{file} holds {len(documents)} jobs; kubetrain run runs exactly one", EXIT_INVALID)
        substrate = make_substrate(runtime, ProcessOptions(Path.cwd(), None, detect_gpus))
        job, addressing = _admitted(documents[0], runtimes, substrate)
        if not job.name:
            raise _fail(
                "metadata.name: Required value: name the job (it names the run's state)", EXIT_INVALID
            )
        root = state_dir or default_state_dir()
        previous = RunDirectory(root, job.name).read()
        if previous is not None and not previous.finished and previous.runner_alive():
            raise _fail(
                f"job {job.name} is already running locally (runner pid {previous.runner_pid}); "
                "stop it or give this job another metadata.name",
                EXIT_FAILED,
            )
        options = RunOptions(
            state_dir=root,
            grace_period=grace_period,
            quiet=quiet,
            adopt_orphans=True,
            substrate=substrate,
            addressing=addressing,
        )
        local_run = LocalRun(job, options)
    except InvalidJobError as error:
        lines = "\n".join(f"  {e}" for e in error.errors)
        raise _fail(f"{file} is not a valid job:\n{lines}", EXIT_INVALID) from None
    except (GpuShortageError, ContainerEngineError) as error:
        raise _fail(str(error), EXIT_FAILED) from None
    result = asyncio.run(local_run.run())
    if result.outcome is Outcome.INTERRUPTED and result.stopped_by is not None:
        raise typer.Exit(128 + int(result.stopped_by))
    raise typer.Exit(_EXIT_CODES[result.outcome])


def _admitted(
    document: dict[str, object], runtimes: list[dict[str, object]], substrate: Substrate
) -> tuple[TrainingJob, Addressing | None]:
    """The job to run and, for a TrainJob, the addresses its JobSet was planned with."""
    if not is_trainjob(document):
        return admit(parse_job(document, strict=True)), None
    trainjob = parse_trainjob(document)
    planned = prepare(
        trainjob, resolve_runtime(trainjob, parse_runtimes(runtimes)), substrate.addressing, substrate.traits
    )
    return admit(planned.run), planned.addressing
