"""``kubetrain envtest``: a real Kubernetes control plane on loopback, to develop and test the operator."""

from __future__ import annotations

import shlex
from pathlib import Path

import typer

from kubetrain.envtest import audit, binaries, controlplane, jobset, realnode
from kubetrain.envtest.nodes import NodeShape

app = typer.Typer(
    name="envtest",
    help="A real Kubernetes control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager) "
    "with fake GPU nodes, as plain processes on 127.0.0.1; --real-node adds a kubelet that runs real "
    "containers.\n\n"
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
    real_node: bool = typer.Option(
        False, "--real-node", help="Also build the real node's kubelet and CoreDNS (<version>-node/)."
    ),
    with_jobset: bool = typer.Option(
        False, "--jobset", help="Also build the JobSet controller (~/.cache/kubetrain/jobset/<version>/)."
    ),
) -> None:
    """Build (once per version) kube-apiserver, kube-scheduler, kube-controller-manager, kubectl and etcd.

    Binaries go to ~/.cache/kubetrain/envtest/<version>/ (or $KUBETRAIN_ENVTEST_BIN_DIR); a second build is
    instant. Prints the directory.

    Example: kubetrain envtest build
    """
    try:
        built = binaries.ensure_built(log=_say, force=force)
        node = binaries.ensure_node_built(log=_say, force=force) if real_node else None
        controller = jobset.ensure_built() if with_jobset else None
    except (binaries.BuildError, jobset.JobSetError) as error:
        _say(f"error: {error}")
        raise typer.Exit(1) from error
    typer.echo(built.directory)
    if node is not None:
        typer.echo(node.directory)
    if controller is not None:
        typer.echo(controller.parent)


@app.command()
def start(
    directory: Path | None = DIR_OPTION,
    nodes: int | None = typer.Option(
        None, "--nodes", min=0, help="Fake nodes to register [default: 2, or 0 with real nodes]."
    ),
    gpus_per_node: int = typer.Option(4, "--gpus-per-node", min=0, help="nvidia.com/gpu on each fake node."),
    cpu_per_node: str = typer.Option("8", "--cpu-per-node", help="CPU capacity of each fake node."),
    memory_per_node: str = typer.Option(
        "32Gi", "--memory-per-node", help="Memory capacity of each fake node."
    ),
    real_node: bool = typer.Option(
        False,
        "--real-node",
        help=f"Also run one real node, {realnode.NODE_NAME} (kubelet, containerd, CoreDNS; root only), "
        f"labelled {realnode.REAL_NODE_LABEL}=true. Without fake nodes (the default then) every pod runs "
        "there.",
    ),
    real_nodes: int = typer.Option(
        0,
        "--real-nodes",
        min=0,
        max=realnode.MAX_REAL_NODES,
        help="Run this many real nodes, real-node-0… (each its own kubelet, containerd, bridge kt<i> and pod "
        "subnet 10.244.<i>.0/24; one CoreDNS); --real-node is --real-nodes 1.",
    ),
    with_jobset: bool = typer.Option(
        False,
        "--jobset",
        help="Also run the JobSet controller (built once from tools/jobset) with its CRD and webhooks, so a "
        "JobSet (and a TrainJob's) gets its Jobs, Service and pods.",
    ),
    audit_log: bool = typer.Option(
        False,
        "--audit-log",
        help="Have kube-apiserver log every write (who, User-Agent, object, answer, when) in "
        "logs/audit.log, Lease writes with their bodies.",
    ),
) -> None:
    """Start envtest (building it first if needed) and print the path of its admin kubeconfig.

    Returns once the API server is ready, the controllers work and the fake nodes are schedulable. Already
    running in that directory: prints its kubeconfig and leaves it be.

    Example: kubetrain envtest start --nodes 3 --gpus-per-node 8

    Example: kubetrain envtest start --real-node

    Example: kubetrain envtest start --real-nodes 2

    Example: kubetrain envtest start --jobset
    """
    run_dir = _run_dir(directory)
    real_node_count = max(real_nodes, 1 if real_node else 0)
    options = controlplane.EnvtestOptions(
        nodes=nodes if nodes is not None else (0 if real_node_count else 2),
        node_shape=NodeShape(cpu=cpu_per_node, memory=memory_per_node, gpus=gpus_per_node),
        real_nodes=real_node_count,
        audit_policy=audit.WRITES if audit_log else None,
        jobset=with_jobset,
    )
    try:
        state = controlplane.start(run_dir, options, log=_say)
    except (
        controlplane.EnvtestError,
        binaries.BuildError,
        realnode.RealNodeError,
        jobset.JobSetError,
    ) as error:
        _say(f"error: {error}")
        raise typer.Exit(1) from error
    timings = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in state.start_seconds.items())
    _say(f"envtest {state.version} ready at {state.server} ({timings})")
    all_nodes = [*state.nodes, *state.real_nodes]
    _say(f"nodes: {', '.join(all_nodes) or 'none'}; stop with: kubetrain envtest stop --dir {run_dir}")
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
        if current.state.real_nodes:
            stopped = current.state.stopped_nodes
            typer.echo(
                f"real nodes: {', '.join(current.state.real_nodes)}"
                + (f" (stopped: {', '.join(stopped)})" if stopped else "")
            )
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


node_app = typer.Typer(
    name="node",
    help="Lose a real node and bring it back (fault injection on `envtest start --real-nodes N`).",
    no_args_is_help=True,
)
app.add_typer(node_app)


@node_app.command("stop")
def node_stop(
    name: str = typer.Argument(..., help="A real node: real-node-<i>."), directory: Path | None = DIR_OPTION
) -> None:
    """Lose a real node: its kubelet and containerd stop and its pods' processes are killed; the Node object
    stays, so the node controller marks it NotReady (Unknown) after the 50 s grace period and taints it
    unreachable.

    Example: kubetrain envtest node stop real-node-1 --dir /tmp/rn2
    """
    run_dir = _run_dir(directory)
    try:
        stopped = controlplane.stop_node(run_dir, name)
    except (controlplane.EnvtestError, realnode.RealNodeError) as error:
        _say(f"error: {error}")
        raise typer.Exit(1) from error
    _say(f"{name} lost: stopped {', '.join(stopped) or 'nothing (it was not running)'}")


@node_app.command("start")
def node_start(
    name: str = typer.Argument(..., help="A real node: real-node-<i>."), directory: Path | None = DIR_OPTION
) -> None:
    """Bring a stopped real node back (its containerd and kubelet on the same directories, as after a
    reboot); returns once its Node is Ready again and its unreachable taints are lifted.

    Example: kubetrain envtest node start real-node-1 --dir /tmp/rn2
    """
    run_dir = _run_dir(directory)
    try:
        seconds = controlplane.start_node(run_dir, name)
    except (controlplane.EnvtestError, realnode.RealNodeError) as error:
        _say(f"error: {error}")
        raise typer.Exit(1) from error
    _say(f"{name} Ready and schedulable again after {seconds:.1f} s")
