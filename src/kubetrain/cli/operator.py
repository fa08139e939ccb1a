"""``kubetrain operator``: reconcile kubeflow.org training jobs on a cluster (upstream's flags, §6.1)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import typer

from kubetrain.api.crd import MAX_REPLICAS_CEILING
from kubetrain.engine.types import DEFAULT_MAX_REPLICAS_PER_JOB, DEFAULT_MAX_REPLICAS_PER_TYPE, ReplicaLimits
from kubetrain.frameworks.base import Framework, InitSettings
from kubetrain.frameworks.crds import DEFAULT_MPI_API, MpiApi, frameworks_for
from kubetrain.frameworks.registry import framework_by_name
from kubetrain.kube import logs
from kubetrain.kube.health import parse_bind_address
from kubetrain.kube.init_template import (
    DEFAULT_TEMPLATE_PATH,
    InitContainerTemplateFile,
    InitTemplateError,
    load_template,
)
from kubetrain.kube.operator import DEFAULT_LEASE_NAME, MissingCrdError, Operator, OperatorSettings
from kubetrain.kube.render import RenderSettings
from kubetrain.kube.runtime.client import DEFAULT_BURST, DEFAULT_QPS, connect
from kubetrain.kube.runtime.collector import DEFAULT_YOUNG_THRESHOLD

V1 = "kubeflow.org/v1"
CLUSTER_DOMAIN_ENV = "CUSTOM_CLUSTER_DOMAIN"
"""Suffix for service names in TF_CONFIG and MPI hostfiles (``<svc>.<ns>.svc.<domain>``)."""
EXIT_BAD_FLAGS = 2
DEFAULT_CONTROLLER_THREADS = 32
"""Upstream runs 1. Workers are asyncio tasks here, not threads, so 32 cost next to nothing; each holds its
job while the status write is answered, so with 8 a burst of 100 reactions queued behind those writes (p99
1.7 to 6.0 s against envtest, ``docs/benchmarks.md``). Writes in flight stay capped by ``act.MAX_IN_FLIGHT``
and the request rate by ``--kube-api-qps``, so more workers add no load on the API server."""


def enabled_frameworks(names: list[str], mpi_api: MpiApi = DEFAULT_MPI_API) -> list[Framework[Any]]:
    """The named kinds; by default every kind, with the MPIJob of ``mpi_api``.

    Both MPIJob versions share one CRD name, so a cluster serves one of them; a named scheme keeps
    its meaning (``mpijob`` is kubeflow.org/v1, ``mpijob-v2beta1`` the mpi-operator API).
    """
    if not names:
        return frameworks_for(mpi_api)
    chosen: list[Framework[Any]] = []
    for name in names:
        try:
            framework = framework_by_name(name)
        except ValueError as error:
            raise typer.BadParameter(str(error), param_hint="--enable-scheme") from None
        if framework not in chosen:
            chosen.append(framework)
    return chosen


def _address(value: str, flag: str) -> tuple[str, int] | None:
    try:
        return parse_bind_address(value)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint=flag) from None


def _init_template(path: Path | None) -> InitContainerTemplateFile | None:
    try:
        return load_template(path)
    except InitTemplateError as error:
        raise typer.BadParameter(str(error), param_hint="--pytorch-init-container-template-file") from None


def operator(
    enable_scheme: list[str] = typer.Option(
        [],
        "--enable-scheme",
        help="A kind to reconcile (repeatable, any case: pytorchjob, tfjob, mpijob-v2beta1, ...); "
        "default every kind whose CRD is installed, with the MPIJob of --mpi-api.",
    ),
    mpi_api: MpiApi = typer.Option(
        DEFAULT_MPI_API,
        "--mpi-api",
        help="Which MPIJob the default kinds include: v2beta1 (mpi-operator, SSH) or v1 (kubectl exec). "
        "Both share the CRD name mpijobs.kubeflow.org; install the matching one from manifests/.",
    ),
    namespace: str | None = typer.Option(
        None, "--namespace", envvar="KUBEFLOW_NAMESPACE", help="Watch only this namespace (default: all)."
    ),
    gang_scheduler_name: str | None = typer.Option(
        None, "--gang-scheduler-name", help="volcano, or a scheduler-plugins scheduler name; off when empty."
    ),
    controller_threads: int = typer.Option(
        DEFAULT_CONTROLLER_THREADS, "--controller-threads", min=1, help="Workers per kind."
    ),
    kube_api_qps: float = typer.Option(
        DEFAULT_QPS,
        "--kube-api-qps",
        help="API requests per second (0: unlimited); Events have a budget of the same size of their own.",
    ),
    kube_api_burst: int = typer.Option(DEFAULT_BURST, "--kube-api-burst", min=1, help="API request burst."),
    metrics_bind_address: str = typer.Option(":8080", "--metrics-bind-address", help="/metrics; 0 disables."),
    health_probe_bind_address: str = typer.Option(
        ":8081", "--health-probe-bind-address", help="/healthz and /readyz; 0 disables."
    ),
    leader_elect: bool = typer.Option(
        False, "--leader-elect", help="Reconcile only while holding the Lease."
    ),
    leader_election_id: str = typer.Option(
        DEFAULT_LEASE_NAME, "--leader-election-id", help="The Lease's name."
    ),
    leader_election_namespace: str = typer.Option(
        "kubeflow", "--leader-election-namespace", envvar="MY_POD_NAMESPACE", help="The Lease's namespace."
    ),
    kubeconfig: Path | None = typer.Option(
        None, "--kubeconfig", help="Cluster to manage; default in-cluster config, then $KUBECONFIG."
    ),
    pytorch_init_container_image: str = typer.Option(
        "alpine:3.10", "--pytorch-init-container-image", help="Image of the wait-for-master init container."
    ),
    pytorch_init_container_max_tries: int = typer.Option(
        100,
        "--pytorch-init-container-max-tries",
        min=1,
        help="DNS look-ups before the init container gives up.",
    ),
    pytorch_init_container_template_file: Path | None = typer.Option(
        None,
        "--pytorch-init-container-template-file",
        help="A YAML list of init containers replacing the built-in one; a Go-style template using only "
        "{{.MasterAddr}}, {{.InitContainerImage}} and {{.MaxTries}}. "
        f"Default: {DEFAULT_TEMPLATE_PATH} when that file exists.",
        show_default=False,
    ),
    mpi_kubectl_delivery_image: str = typer.Option(
        "kubeflow/kubectl-delivery:latest",
        "--mpi-kubectl-delivery-image",
        help="MPIJob v1 launcher init image.",
    ),
    resync_period: float = typer.Option(
        300.0, "--resync-period", min=1.0, help="Seconds between reconciles of every job, changed or not."
    ),
    max_replicas_per_type: int = typer.Option(
        DEFAULT_MAX_REPLICAS_PER_TYPE,
        "--max-replicas-per-type",
        min=1,
        max=MAX_REPLICAS_CEILING,
        help="Most replicas of one type a job may ask for; more fails it (InvalidSpec).",
    ),
    max_replicas_per_job: int = typer.Option(
        DEFAULT_MAX_REPLICAS_PER_JOB,
        "--max-replicas-per-job",
        min=1,
        help="Most replicas of all types together a job may ask for; more fails it (InvalidSpec).",
    ),
    gc_young_threshold: int = typer.Option(
        DEFAULT_YOUNG_THRESHOLD,
        "--gc-young-threshold",
        min=0,
        help="Allocations between young garbage collections, and what is alive once the caches have synced "
        "is frozen out of full ones; 0 leaves Python's collector as it is (700, nothing frozen).",
    ),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning or error."),
) -> None:
    """Run the operator: reconcile PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob, MXJob and MPIJob.

    Exits 0 on SIGTERM/SIGINT (after releasing the leader Lease), 1 when the Lease is lost.
    Environment: CUSTOM_CLUSTER_DOMAIN suffixes the service names in TF_CONFIG and MPI hostfiles.

    Example: kubetrain operator --kubeconfig ~/.kube/config --enable-scheme pytorchjob --leader-elect
    """
    init = InitSettings(
        pytorch_init_image=pytorch_init_container_image,
        pytorch_init_max_tries=pytorch_init_container_max_tries,
        pytorch_init_template=_init_template(pytorch_init_container_template_file),
        mpi_kubectl_delivery_image=mpi_kubectl_delivery_image,
    )
    settings = OperatorSettings(
        frameworks=enabled_frameworks(enable_scheme, mpi_api),
        frameworks_required=bool(enable_scheme),
        namespace=namespace or None,
        render=RenderSettings(gang_scheduler=gang_scheduler_name or None, init=init),
        threads=controller_threads,
        leader_elect=leader_elect,
        lease_namespace=leader_election_namespace,
        lease_name=leader_election_id,
        resync_period=resync_period,
        metrics_address=_address(metrics_bind_address, "--metrics-bind-address"),
        health_address=_address(health_probe_bind_address, "--health-probe-bind-address"),
        # Upstream's training operator reads this from its environment only (no flag).
        cluster_domain=os.environ.get(CLUSTER_DOMAIN_ENV) or None,
        limits=ReplicaLimits(per_type=max_replicas_per_type, per_job=max_replicas_per_job),
        gc_young_threshold=gc_young_threshold,
    )
    # After every flag is read: a refused flag leaves the caller's logging (a test runner's) as it was.
    logs.configure(log_level)
    try:
        code = asyncio.run(_run(kubeconfig, kube_api_qps, kube_api_burst, settings))
    except MissingCrdError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(EXIT_BAD_FLAGS) from None
    raise typer.Exit(code)


async def _run(kubeconfig: Path | None, qps: float, burst: int, settings: OperatorSettings) -> int:
    client = connect(kubeconfig, qps=qps, burst=burst)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        return await Operator(client, settings).run(stop)
    finally:
        await client.aclose()
