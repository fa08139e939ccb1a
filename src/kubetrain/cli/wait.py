"""``kubetrain wait JOB --for=condition=Succeeded --timeout=10m``: block until a condition holds; a job that
fails instead exits 1 with the Failed condition's message. A TrainJob waits for its state (Complete, ...)."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import typer

from kubetrain.cli.jobs import (
    ContextOption,
    KubeconfigOption,
    LocalOption,
    NamespaceOption,
    StateDirOption,
    Target,
    console,
    fail,
    find_job,
    kind_name,
    reported_errors,
    split_kind_and_name,
)
from kubetrain.sdk.errors import JobFailedError
from kubetrain.sdk.tables import qualified_name

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds in a Go/kubectl duration (``90s``, ``10m``, ``1h30m``); a bare number is seconds."""
    stripped = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", stripped):
        return float(stripped)
    parts = _DURATION.findall(stripped)
    if not parts or "".join(n + u for n, u in parts) != stripped:
        raise ValueError(f"--timeout {text!r}: not a duration; use e.g. 30s, 10m or 1h30m")
    return sum(float(number) * _SECONDS[unit] for number, unit in parts)


def parse_condition(text: str) -> str:
    """``condition=Succeeded`` (kubectl's form) or just ``Succeeded``."""
    name = text.removeprefix("condition=")
    if "=" in name:
        raise ValueError(f"--for {text!r}: only condition=<Type> is supported (e.g. condition=Succeeded)")
    return name[:1].upper() + name[1:]


def wait(
    job_ref: str = typer.Argument(..., metavar="JOB", help="The job: NAME or KIND/NAME."),
    for_: str = typer.Option(
        "condition=Succeeded",
        "--for",
        help="condition=<Created|Running|Restarting|Succeeded|Suspended|Failed>; a TrainJob's: "
        "<Created|Running|Complete|Suspended|Failed> (Succeeded means Complete).",
    ),
    timeout: str = typer.Option("30s", "--timeout", help="Give up after this long (30s, 10m, 1h)."),
    namespace: str | None = NamespaceOption,
    local: bool = LocalOption,
    state_dir: Path | None = StateDirOption,
    kubeconfig: Path | None = KubeconfigOption,
    context: str | None = ContextOption,
) -> None:
    """Wait until a job's condition is True. Exit status: 0 met, 1 the job failed or the wait timed out.

    Example: kubetrain wait mnist --for=condition=Succeeded --timeout=10m

    Example: kubetrain wait trainjob/torch-ddp --for=condition=Complete --timeout=10m

    Example: kubetrain wait --local hello
    """
    with reported_errors():
        condition = parse_condition(for_)
        seconds = parse_duration(timeout)
        kind, job_name = split_kind_and_name(job_ref, None)
        assert job_name is not None
        client = Target(local, state_dir, kubeconfig, context, namespace).client()
        job = find_job(client, kind, job_name)
        progress = console(stderr=True)
        # A spinner only for people watching a terminal; scripts and pipes get the result line alone.
        spinner = (
            progress.status(f"waiting for {condition} on {qualified_name(job)}")
            if progress.is_terminal
            else contextlib.nullcontext()
        )
        try:
            with spinner:
                done = client.wait_for_job_conditions(
                    job.name,
                    job.namespace,
                    kind_name(client.kind_of(job)),
                    expected_conditions={condition},
                    wait_timeout=seconds,
                    polling_interval=min(1.0, max(seconds / 10, 0.1)),
                )
        except JobFailedError as error:
            fail(str(error))
        except TimeoutError:
            fail(f"timed out after {timeout} waiting for the condition {condition} on {qualified_name(job)}")
        typer.echo(f"{qualified_name(done)} condition met")
