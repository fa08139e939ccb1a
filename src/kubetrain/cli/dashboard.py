"""``kubetrain dashboard``: the Jobs view of the kubeconfig's cluster and this machine's local runs, served
until Ctrl-C."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer

from kubetrain.cli.jobs import ContextOption, KubeconfigOption, StateDirOption, reported_errors


def dashboard(
    address: str = typer.Option("127.0.0.1", "--address", help="The address to listen on."),
    port: int = typer.Option(8080, "--port", "-p", min=0, max=65535, help="The port (0: any free one)."),
    namespace: str | None = typer.Option(
        None,
        "--namespace",
        "-n",
        help="Show only this namespace's jobs (default: every namespace you may list, else the context's).",
    ),
    cluster: bool = typer.Option(True, "--cluster/--no-cluster", help="Show the kubeconfig's cluster."),
    local: bool = typer.Option(True, "--local/--no-local", help="Show this machine's local runs."),
    user_header: str | None = typer.Option(
        None,
        "--user-header",
        help="Serve others behind an authenticating gateway: the user's name comes in this header "
        "(Kubeflow: kubeflow-userid) and every request is authorised with a SubjectAccessReview.",
    ),
    user_prefix: str = typer.Option("", "--user-prefix", help="Removed from the user header's value."),
    groups_header: str | None = typer.Option(
        None, "--groups-header", help="A header with the user's groups, comma-separated (optional)."
    ),
    state_dir: Path | None = StateDirOption,
    kubeconfig: Path | None = KubeconfigOption,
    context: str | None = ContextOption,
) -> None:
    """Serve the Jobs view: every job of the cluster and of this machine's local runs, live, with each job's
    replicas, conditions, events, logs, metric curves and actions.

    Example: kubetrain dashboard

    Example: kubetrain dashboard --no-cluster --port 9000
    """
    from kubetrain.dashboard.app import Settings, build, run

    def say(message: str) -> None:
        typer.echo(message, err=True)

    settings = Settings(
        address=address,
        port=port,
        namespace=namespace,
        kubeconfig=kubeconfig,
        context=context,
        state_dir=state_dir,
        cluster=cluster,
        local=local,
        user_header=user_header,
        user_prefix=user_prefix,
        groups_header=groups_header,
    )
    with reported_errors():
        built = build(settings, say)
        asyncio.run(run(built, address, port, say))
