"""What every job command shares: the backend options (``--local`` or a cluster), the client, finding a job by
``KIND NAME`` / ``KIND/NAME`` / ``NAME``, and turning SDK errors into one-line messages with an exit status.

Exit statuses: 0 success, 1 the job failed or the request did (not found, forbidden, unreachable, timed
out), 2 bad usage or an invalid manifest.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer

from kubetrain.api.errors import InvalidJobError
from kubetrain.local.state import STATE_DIR_ENV
from kubetrain.sdk.errors import (
    AccessDeniedError,
    BackendUnavailableError,
    JobNotFoundError,
    TrainingApiError,
)

if TYPE_CHECKING:
    # The client and the kinds import every job model (pydantic): `get --local` lists without them.
    from rich.console import Console

    from kubetrain.sdk import TrainingClient
    from kubetrain.sdk.kinds import Job, JobKind

EXIT_FAILED = 1
EXIT_USAGE = 2

LOCAL_HELP = (
    "Act on jobs run on this machine (kubetrain run / TrainingClient(backend='local')), not a cluster."
)

LocalOption = typer.Option(False, "--local", help=LOCAL_HELP)
StateDirOption = typer.Option(
    None,
    "--state-dir",
    envvar=STATE_DIR_ENV,
    help="Local runs' state (default ~/.local/state/kubetrain/runs).",
)
KubeconfigOption = typer.Option(
    None, "--kubeconfig", envvar="KUBECONFIG", help="Path to the kubeconfig (default ~/.kube/config)."
)
ContextOption = typer.Option(None, "--context", help="The kubeconfig context to use.")
NamespaceOption = typer.Option(
    None, "--namespace", "-n", help="The namespace (default: the context's, else default)."
)


@dataclass(frozen=True)
class Target:
    """Where a command acts: the cluster (kubeconfig, context, namespace) or local runs (state dir)."""

    local: bool
    state_dir: Path | None
    kubeconfig: Path | None
    context: str | None
    namespace: str | None
    runtime: str = "process"
    """What starts a local run's replicas (``submit --local --runtime``)."""

    def client(self) -> TrainingClient:
        from kubetrain.sdk import TrainingClient

        if self.local:
            return TrainingClient(
                backend="local", state_dir=self.state_dir, namespace=self.namespace, runtime=self.runtime
            )
        return TrainingClient(
            config_file=str(self.kubeconfig) if self.kubeconfig else None,
            context=self.context,
            namespace=self.namespace,
        )


def fail(message: str, code: int = EXIT_FAILED) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


@contextmanager
def reported_errors() -> Iterator[None]:
    """Each expected failure as ``error: <message>`` on stderr and a documented exit status, no traceback."""
    try:
        yield
    except InvalidJobError as error:
        lines = "\n".join(f"  - {problem}" for problem in error.errors)
        fail(f"invalid job:\n{lines}", EXIT_USAGE)
    except (AccessDeniedError, BackendUnavailableError, JobNotFoundError, TrainingApiError) as error:
        fail(str(error))
    except TimeoutError as error:
        fail(str(error))
    except ValueError as error:
        fail(str(error), EXIT_USAGE)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def complete_kind(incomplete: str) -> list[str]:
    """Shell completion of KIND: the plural of every kind (what kubectl users type)."""
    from kubetrain.sdk.kinds import KINDS

    return [
        k.plural
        for k in KINDS
        if (k.version == "v1" or k.is_trainjob) and k.plural.startswith(incomplete.lower())
    ]


def split_kind_and_name(kind_or_name: str | None, name: str | None) -> tuple[JobKind | None, str | None]:
    """``KIND NAME``, ``KIND/NAME``, ``KIND`` or ``NAME`` (a first word that is no kind is a name)."""
    if kind_or_name is None:
        return None, name
    from kubetrain.sdk.kinds import resolve_kind

    if "/" in kind_or_name and name is None:
        kind_text, _, job_name = kind_or_name.rpartition("/")
        try:
            return resolve_kind(kind_text), job_name
        except ValueError:
            pass  # e.g. "mpijob/v2beta1" is a kind, not KIND/NAME
    try:
        return resolve_kind(kind_or_name), name
    except ValueError:
        if name is not None:
            raise
        return None, kind_or_name


def find_job(client: TrainingClient, kind: JobKind | None, name: str) -> Job:
    """The job ``name`` of ``kind``; without a kind, the one job of that name among every kind."""
    if kind is not None:
        return client.get_job(name, job_kind=kind_name(kind))
    found = [job for job in client.list_jobs(all_kinds=True) if job.name == name]
    if not found:
        raise JobNotFoundError(f"no job named {name!r} in {_where(client)}")
    if len(found) > 1:
        kinds = ", ".join(f"{j.KIND}/{name}" for j in found)
        raise ValueError(
            f"several jobs are named {name!r} ({kinds}): name the kind too, e.g. {kinds.split(', ')[0]}"
        )
    return found[0]


def kind_name(kind: JobKind) -> str:
    """A name ``resolve_kind`` maps back to exactly this kind (the v2beta1 MPIJob needs its version)."""
    return f"{kind.plural}.{kind.group}/{kind.version}"


def _where(client: TrainingClient) -> str:
    return "the local runs" if client.backend_name == "local" else f"namespace {client.namespace}"


def console(stderr: bool = False) -> Console:
    """Rich output that keeps long rows whole when piped, and no colour under ``NO_COLOR``."""
    from rich.console import Console  # not for the commands that print plain text

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else 250
    return Console(
        file=stream, width=width, highlight=False, no_color="NO_COLOR" in os.environ, soft_wrap=False
    )
