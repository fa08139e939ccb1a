"""``kubetrain operator``: reconcile kubeflow.org training jobs on a cluster (upstream's flags, §6.1)."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import typer

from kubetrain import __version__
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
from kubetrain.kube.status.endpoint import StatusEndpointError
from kubetrain.kube.status.settings import (
    DEFAULT_PORT,
    DEFAULT_SECRET,
    DEFAULT_SERVICE,
    StatusServerSettings,
    StatusUrlError,
    default_base_url,
    parse_base_url,
)

log = logging.getLogger(__name__)

V1 = "kubeflow.org/v1"
CLUSTER_DOMAIN_ENV = "CUSTOM_CLUSTER_DOMAIN"
"""Suffix for service names in TF_CONFIG and MPI hostfiles (``<svc>.<ns>.svc.<domain>``)."""
EXIT_BAD_FLAGS = 2
EXIT_STATUS_ENDPOINT = 3
"""The status endpoint could not start (its Secret, its port): the message says how to fix or turn it off."""
DEFAULT_CONTROLLER_THREADS = 32
"""Upstream runs 1. Workers are asyncio tasks here, not threads, so 32 cost next to nothing; each holds its
job while the status write is answered, so with 8 a burst of 100 reactions queued behind those writes (p99
1.7 to 6.0 s against envtest, ``docs/benchmarks.md``). Writes in flight stay capped by ``act.MAX_IN_FLIGHT``
and the request rate by ``--kube-api-qps``, so more workers add no load on the API server."""


TRAINJOB_SCHEMES = frozenset({"trainjob", "trainjob/v1alpha1", "trainjob.trainer.kubeflow.org/v1alpha1"})
"""``--enable-scheme`` names of Kubeflow Trainer v2's TrainJob."""


def trainer_api_enabled(names: list[str]) -> bool:
    """TrainJobs are served by default, and when named among the enabled kinds."""
    return not names or any(name.strip().lower() in TRAINJOB_SCHEMES for name in names)


def enabled_frameworks(names: list[str], mpi_api: MpiApi = DEFAULT_MPI_API) -> list[Framework[Any]]:
    """The named v1 kinds; by default every kind, with the MPIJob of ``mpi_api``.

    Both MPIJob versions share one CRD name, so a cluster serves one of them; a named scheme keeps
    its meaning (``mpijob`` is kubeflow.org/v1, ``mpijob-v2beta1`` the mpi-operator API). ``trainjob``
    names Trainer v2's TrainJob (``trainer_api_enabled``), not a v1 kind.
    """
    if not names:
        return frameworks_for(mpi_api)
    chosen: list[Framework[Any]] = []
    for name in names:
        if name.strip().lower() in TRAINJOB_SCHEMES:
            continue
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


SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def in_cluster(kubeconfig: Path | None) -> bool:
    """Whether the operator runs in a pod (and talks to its own cluster)."""
    return (
        kubeconfig is None
        and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
        and SERVICE_ACCOUNT_TOKEN.exists()
    )


def _name(value: str, flag: str, pattern: re.Pattern[str], what: str) -> str:
    if not pattern.match(value):
        raise typer.BadParameter(
            f"{value!r} is not a valid {what} (lowercase letters, digits and '-')", param_hint=flag
        )
    return value


def status_server_settings(
    *,
    bind_address: str,
    url: str,
    service: str,
    secret: str,
    namespace: str,
    cluster_domain: str | None,
    running_in_cluster: bool,
) -> tuple[StatusServerSettings | None, str | None]:
    """The endpoint's settings from its flags, or None when it is off, with why it is off when that was not
    asked for (a line to log)."""
    address = _address(bind_address, "--status-server-bind-address")
    _name(service, "--status-server-service", _DNS_LABEL, "Service name")
    _name(secret, "--status-server-secret", _DNS_SUBDOMAIN, "Secret name")
    _name(namespace, "--status-server-namespace", _DNS_LABEL, "namespace")
    if address is None:
        return None, None
    host, port = address
    if url:
        try:
            base_url = parse_base_url(url)
        except StatusUrlError as error:
            raise typer.BadParameter(str(error), param_hint="--status-server-url") from None
    elif running_in_cluster:
        if port == 0:
            raise typer.BadParameter(
                "port 0 picks a free port, which the Service cannot name; give one, e.g. :8443",
                param_hint="--status-server-bind-address",
            )
        base_url = default_base_url(service, namespace, port)
    else:
        return None, (
            "status endpoint off: outside the cluster, pods cannot reach this process at its Service; pass "
            "--status-server-url with the address they reach it at (https://HOST:PORT) to turn it on"
        )
    settings = StatusServerSettings(
        host=host,
        port=port,
        base_url=base_url,
        namespace=namespace,
        service=service,
        secret=secret,
        cluster_domain=cluster_domain,
    )
    return settings, None


def _init_template(path: Path | None) -> InitContainerTemplateFile | None:
    try:
        return load_template(path)
    except InitTemplateError as error:
        raise typer.BadParameter(str(error), param_hint="--pytorch-init-container-template-file") from None


def operator(
    enable_scheme: list[str] = typer.Option(
        [],
        "--enable-scheme",
        help="A kind to reconcile (repeatable, any case: pytorchjob, tfjob, mpijob-v2beta1, trainjob, ...); "
        "default every kind whose CRD is installed, with the MPIJob of --mpi-api, and Trainer v2's TrainJob.",
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
    install_builtin_runtimes: bool = typer.Option(
        True,
        "--install-builtin-runtimes/--no-install-builtin-runtimes",
        help="Create Kubeflow Trainer v2.3.0's built-in ClusterTrainingRuntimes (torch-distributed, ...) "
        "when missing, as the leader starts; one edited or deleted later is left so.",
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
    status_server_bind_address: str = typer.Option(
        f":{DEFAULT_PORT}",
        "--status-server-bind-address",
        help="The status endpoint: HTTPS, where training pods POST their progress (Kubeflow Trainer v2's "
        "protocol); 0 turns it off, and pods are then rendered exactly as upstream's.",
    ),
    status_server_url: str = typer.Option(
        "",
        "--status-server-url",
        help="The URL pods reach the status endpoint at, https://HOST[:PORT]; its host goes in the "
        "endpoint's certificate. Default in-cluster: https://SERVICE.NAMESPACE.svc:PORT (the flags below); "
        "outside the cluster the endpoint is on only when this is given.",
        show_default=False,
    ),
    status_server_service: str = typer.Option(
        DEFAULT_SERVICE,
        "--status-server-service",
        help="The Service in front of the status endpoint: its DNS names go in the certificate and the "
        "default URL.",
    ),
    status_server_secret: str = typer.Option(
        DEFAULT_SECRET,
        "--status-server-secret",
        help="The Secret holding the status endpoint's CA and certificate, created if absent and renewed "
        "before expiry.",
    ),
    status_server_namespace: str = typer.Option(
        "kubeflow",
        "--status-server-namespace",
        envvar="MY_POD_NAMESPACE",
        help="The namespace of that Secret and Service: the operator's own.",
    ),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning or error."),
) -> None:
    """Run the operator: reconcile PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob, MXJob and MPIJob.

    Exits 0 on SIGTERM/SIGINT (after releasing the leader Lease), 1 when the Lease is lost.
    Environment: CUSTOM_CLUSTER_DOMAIN suffixes the service names in TF_CONFIG and MPI hostfiles.

    Example: kubetrain operator --kubeconfig ~/.kube/config --enable-scheme pytorchjob --leader-elect
    """
    cluster_domain = os.environ.get(CLUSTER_DOMAIN_ENV) or None
    status, status_off = status_server_settings(
        bind_address=status_server_bind_address,
        url=status_server_url,
        service=status_server_service,
        secret=status_server_secret,
        namespace=status_server_namespace,
        cluster_domain=cluster_domain,
        running_in_cluster=in_cluster(kubeconfig),
    )
    init = InitSettings(
        pytorch_init_image=pytorch_init_container_image,
        pytorch_init_max_tries=pytorch_init_container_max_tries,
        pytorch_init_template=_init_template(pytorch_init_container_template_file),
        mpi_kubectl_delivery_image=mpi_kubectl_delivery_image,
    )
    settings = OperatorSettings(
        frameworks=enabled_frameworks(enable_scheme, mpi_api),
        frameworks_required=bool(enable_scheme),
        trainer_api=trainer_api_enabled(enable_scheme),
        install_builtin_runtimes=install_builtin_runtimes,
        namespace=namespace or None,
        render=RenderSettings(
            gang_scheduler=gang_scheduler_name or None,
            init=init,
            status=status.injection if status is not None else None,
        ),
        threads=controller_threads,
        leader_elect=leader_elect,
        lease_namespace=leader_election_namespace,
        lease_name=leader_election_id,
        resync_period=resync_period,
        metrics_address=_address(metrics_bind_address, "--metrics-bind-address"),
        health_address=_address(health_probe_bind_address, "--health-probe-bind-address"),
        # Upstream's training operator reads this from its environment only (no flag).
        cluster_domain=cluster_domain,
        limits=ReplicaLimits(per_type=max_replicas_per_type, per_job=max_replicas_per_job),
        gc_young_threshold=gc_young_threshold,
        status=status,
        pod=own_pod(os.environ),
    )
    # After every flag is read: a refused flag leaves the caller's logging (a test runner's) as it was.
    logs.configure(log_level)
    if status_off is not None:
        log.warning("%s", status_off)
    try:
        code = asyncio.run(_run(kubeconfig, kube_api_qps, kube_api_burst, settings))
    except MissingCrdError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(EXIT_BAD_FLAGS) from None
    except StatusEndpointError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(EXIT_STATUS_ENDPOINT) from None
    raise typer.Exit(code)


def own_pod(environ: Mapping[str, str]) -> tuple[str, str] | None:
    """The operator's own pod, ``(namespace, name)``, from the downward API's variables the install sets
    (MY_POD_NAMESPACE, as upstream's, and MY_POD_NAME); None for a host process."""
    namespace, name = environ.get("MY_POD_NAMESPACE"), environ.get("MY_POD_NAME")
    return (namespace, name) if namespace and name else None


def user_agent(identity: str) -> str:
    """``kubetrain-operator/<version> (<leader election identity>)``: the API server's audit log then says
    which replica made each request (the identity is ``<hostname>_<uuid>``, the pod's name first)."""
    return f"kubetrain-operator/{__version__} ({identity})"


async def _run(kubeconfig: Path | None, qps: float, burst: int, settings: OperatorSettings) -> int:
    client = connect(kubeconfig, qps=qps, burst=burst, user_agent=user_agent(settings.identity))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        return await Operator(client, settings).run(stop)
    finally:
        await client.aclose()
