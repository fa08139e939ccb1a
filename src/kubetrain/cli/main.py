"""Entry point of the ``kubetrain`` command: one typer app, one module per command group."""

from __future__ import annotations

import typer

from kubetrain import __version__
from kubetrain.cli import describe, get, logs, manage, manifests, operator, plan, run, submit, wait
from kubetrain.cli.envtest import app as envtest_app

app = typer.Typer(
    name="kubetrain",
    help="Run Kubeflow training jobs (PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob, MXJob, "
    "MPIJob) on Kubernetes or on this machine.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def main() -> None:
    """kubetrain: Kubeflow training jobs on Kubernetes or on this machine."""


@app.command()
def version() -> None:
    """Print kubetrain's version.

    Example: kubetrain version
    """
    typer.echo(__version__)


app.command("plan")(plan.plan)
app.command("run")(run.run_command)
app.command("operator")(operator.operator)
app.command("submit")(submit.submit)
app.command("get")(get.get)
app.command("describe")(describe.describe)
app.command("logs")(logs.logs)
app.command("wait")(wait.wait)
app.command("delete")(manage.delete)
app.command("suspend")(manage.suspend)
app.command("resume")(manage.resume)
app.command("scale")(manage.scale)
app.add_typer(envtest_app)
app.add_typer(manifests.app)
