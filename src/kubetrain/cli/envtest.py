"""``kubetrain envtest``: a real Kubernetes control plane on loopback, to develop and test the operator."""

from __future__ import annotations

import shlex
from pathlib import Path

import typer

from kubetrain.envtest import binaries, controlplane
from kubetrain.envtest.nodes import NodeShape

app = typer.Typer(
    name="envtest",
    help="A real Kubernetes control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager) "
    "with fake GPU nodes, as plain processes on 127.0.0.1.\n\n"
    "Example: kubetrain envtest start && export KUBECONFIG=$(kubetrain envtest kubeconfig)",
    no_args_is_help=True,
)

DIR_OPTION = typer.Option(
    None,
    "--dir",
    help="Run directory (state, logs, kubeconfigs); default $KUBETRAIN_ENVTEST_DIR or "
    "~/.local/state/kubetrain/envtest.",
)


def _run_dir(directory: Path | None) -> Path:
    return (directory or controlplane.default_run_dir()).resolve()


def _say(message: str) -> None:
    typer.echo(message, err=True)


@app.command()
def build(
    force: bool = typer.Option(False, "--force", help="Rebuild even if the cached binaries are current."),
) -> None:
    """Build (once per version) kube-apiserver, kube-scheduler, kube-controller-manager, kubectl and etcd.

    Binaries go to ~/.cache/kubetrain/envtest/<version>/ (or $KUBETRAIN_ENVTEST_BIN_DIR); a second build is
    instant. Prints the directory.

    Example: kubetrain envtest build
    """
    try:
        built = binaries.ensure_built(log=_say, force=force)
    except binaries.BuildError as error:
        _say(f"error: {error}")
        raise typer.Exit(1) from error
    typer.echo(built.directory)


@app.command()
def start(
    directory: Path | None = DIR_OPTION,
    nodes: int = typer.Option(2, "--nodes", min=0, help="Fake nodes to register."),
    gpus_per_node: int = typer.Option(4, "--gpus-per-node", min=0, help="nvidia.com/gpu on each fake node."),
    cpu_per_node: str = typer.Option("8", "--cpu-per-node", help="CPU capacity of each fake node."),
    memory_per_node: str = typer.Option(
        "32Gi", "--memory-per-node", help="Memory capacity of each fake node."
    ),
) -> None:
    """Start envtest (building it first if needed) and print the path of its admin kubeconfig.

    Returns once the API server is ready, the controllers work and the fake nodes are schedulable. Already
    running in that directory: prints its kubeconfig and leaves it be.

    Example: kubetrain envtest start --nodes 3 --gpus-per-node 8
    """
    run_dir = _run_dir(directory)
    options = controlplane.EnvtestOptions(
        nodes=nodes, node_shape=NodeShape(cpu=cpu_per_node, memory=memory_per_node, gpus=gpus_per_node)
    )
    try:
        state = controlplane.start(run_dir, options, log=_say)
    except (controlplane.EnvtestError, binaries.BuildError) as error:
        _say(f"error: {error}")
        raise typer.Exit(1) from error
    timings = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in state.start_seconds.items())
    _say(f"envtest {state.version} ready at {state.server} ({timings})")
    _say(f"nodes: {', '.join(state.nodes)}; stop with: kubetrain envtest stop --dir {run_dir}")
    typer.echo(state.kubeconfig)


@app.command()
def stop(directory: Path | None = DIR_OPTION) -> None:
    """Stop every process envtest started in the run directory (by recorded pid).

    Example: kubetrain envtest stop
    """
    run_dir = _run_dir(directory)
    stopped = controlplane.stop(run_dir)
    _say(f"stopped {', '.join(stopped)}" if stopped else f"nothing was running in {run_dir}")


@app.command()
def status(directory: Path | None = DIR_OPTION) -> None:
    """Report each process (pid, peak memory) and whether the API server is ready; exit 1 unless all run.

    Example: kubetrain envtest status --dir .state/envtest
    """
    run_dir = _run_dir(directory)
    current = controlplane.status(run_dir)
    if current.state is not None:
        typer.echo(f"version:    {current.state.version}")
        typer.echo(f"server:     {current.state.server}")
        typer.echo(f"kubeconfig: {current.state.kubeconfig}")
        typer.echo(f"nodes:      {', '.join(current.state.nodes)}")
    typer.echo(f"api ready:  {'yes' if current.api_ready else 'no'}")
    for component in current.components:
        if component.pid is None:
            typer.echo(f"{component.name:<24} not started")
            continue
        rss = f"{component.peak_rss_bytes / 2**20:.0f} MiB peak" if component.peak_rss_bytes else ""
        state = "running" if component.running else "exited"
        typer.echo(f"{component.name:<24} pid {component.pid:<8} {state:<8} {rss}")
    if not current.running:
        raise typer.Exit(1)


@app.command()
def kubeconfig(directory: Path | None = DIR_OPTION) -> None:
    """Print the admin kubeconfig path of the running envtest; exit 1 if none runs.

    Example: export KUBECONFIG=$(kubetrain envtest kubeconfig)
    """
    run_dir = _run_dir(directory)
    current = controlplane.status(run_dir)
    if current.state is None or not current.running:
        _say(f"no envtest is running in {run_dir}; start one with: kubetrain envtest start --dir {run_dir}")
        raise typer.Exit(1)
    typer.echo(current.state.kubeconfig)


@app.command()
def env(directory: Path | None = DIR_OPTION) -> None:
    """Print shell exports for the running envtest: KUBECONFIG, and PATH with its kubectl first.

    Example: eval "$(kubetrain envtest env)" && kubectl get nodes
    """
    run_dir = _run_dir(directory)
    current = controlplane.status(run_dir)
    if current.state is None or not current.running:
        _say(f"no envtest is running in {run_dir}; start one with: kubetrain envtest start --dir {run_dir}")
        raise typer.Exit(1)
    bin_dir = binaries.locate().directory
    typer.echo(f"export KUBECONFIG={shlex.quote(str(current.state.kubeconfig))}")
    typer.echo(f'export PATH={shlex.quote(str(bin_dir))}:"$PATH"')
