"""Putting the Jobs view together: which sources it shows, who decides access, where it listens; and running
it until Ctrl-C (or SIGTERM, in a pod), after which nothing of it is left running."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kubetrain.dashboard.access import Access, OwnCredentials, ReviewedAccess
from kubetrain.dashboard.server import Dashboard, serve
from kubetrain.dashboard.sources import Source
from kubetrain.sdk.errors import AccessDeniedError, BackendUnavailableError, TrainingApiError

if TYPE_CHECKING:
    from kubetrain.sdk.client import TrainingClient

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


@dataclass(frozen=True)
class Settings:
    address: str = "127.0.0.1"
    port: int = 8080
    namespace: str | None = None
    """The only namespace to watch; None: every namespace the user may list, else the context's."""
    kubeconfig: Path | None = None
    context: str | None = None
    state_dir: Path | None = None
    cluster: bool = True
    local: bool = True
    user_header: str | None = None
    """Set: in-cluster mode behind a gateway that sends the user's name in this header."""
    user_prefix: str = ""
    groups_header: str | None = None


def build(settings: Settings, say: Callable[[str], None]) -> Dashboard:
    """The dashboard's sources and access policy; ``say`` tells the person starting it what it found."""
    from kubetrain.sdk import TrainingClient

    sources: dict[str, Source] = {}
    access: Access = OwnCredentials()
    if settings.cluster:
        try:
            client = TrainingClient(
                config_file=str(settings.kubeconfig) if settings.kubeconfig else None,
                context=settings.context,
                namespace=settings.namespace,
            )
        except BackendUnavailableError as error:
            if settings.user_header:
                raise
            say(f"no cluster: {error}; showing local runs only")
        else:
            namespace = settings.namespace
            if namespace is None and settings.user_header is None:
                namespace = _listable_namespace(client, say)
            sources["cluster"] = Source("cluster", client, namespace)
            from kubetrain.sdk.backends.kubernetes import KubernetesBackend

            if settings.user_header is not None:
                assert isinstance(client.backend, KubernetesBackend)
                access = ReviewedAccess(
                    client.backend, settings.user_header, settings.user_prefix, settings.groups_header
                )
    if settings.local and settings.user_header is None:
        local = TrainingClient(backend="local", state_dir=settings.state_dir)
        sources["local"] = Source("local", local, None)
    if not sources:
        raise ValueError("nothing to show: both the cluster and the local runs are turned off")
    loopback = _is_loopback(settings.address)
    if not loopback and settings.user_header is None:
        say(
            f"warning: listening on {settings.address}: anyone who reaches it acts with your kubeconfig's "
            "credentials; --user-header is for serving others behind an authenticating gateway"
        )
    return Dashboard(sources, access, allowed_hosts=None, working_dir=Path.cwd())


def _listable_namespace(client: TrainingClient, say: Callable[[str], None]) -> str | None:
    """None when the user may list jobs in every namespace; else the context's namespace, said so."""
    from kubetrain.sdk.backends.kubernetes import KubernetesBackend

    backend = client.backend
    if not isinstance(backend, KubernetesBackend):
        return None
    try:
        backend.raw_get("Failed to list PyTorchJobs", "/apis/kubeflow.org/v1/pytorchjobs", {"limit": "1"})
    except AccessDeniedError:
        say(
            f"you may not list jobs in every namespace: showing namespace {client.namespace} "
            "(--namespace chooses another)"
        )
        return client.namespace
    except TrainingApiError as error:
        say(f"the cluster does not answer yet ({error}); its jobs appear when it does")
    return None


def _is_loopback(address: str) -> bool:
    if address in LOOPBACK_NAMES:
        return True
    with contextlib.suppress(ValueError):
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    return False


def allowed_hosts(address: str, port: int) -> frozenset[str] | None:
    """The Host headers a dashboard on ``address`` answers: its loopback names (a page from another site
    that resolves its own name to 127.0.0.1 is refused), or any when it serves other machines."""
    if not _is_loopback(address):
        return None
    return frozenset(f"{name}:{port}" for name in (*LOOPBACK_NAMES, address))


async def run(dashboard: Dashboard, address: str, port: int, say: Callable[[str], None]) -> None:
    """Serve until SIGINT or SIGTERM; then stop the watches and close every connection."""
    app = dashboard.application()
    try:
        runner, bound = await serve(app, address, port)
    except OSError as error:
        raise ValueError(
            f"cannot listen on {address}:{port}: {error.strerror or error}; pass --port"
        ) from None
    if dashboard.allowed_hosts is None and _is_loopback(address):
        dashboard.allowed_hosts = allowed_hosts(address, bound)
    host = f"[{address}]" if ":" in address else address
    shown = ", ".join(
        f"{name} ({source.namespace or 'every namespace'})" if name == "cluster" else name
        for name, source in dashboard.sources.items()
    )
    say(f"Jobs view of {shown} at http://{host}:{bound}/ (Ctrl-C stops it)")
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopped.set)
    try:
        await stopped.wait()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        await runner.cleanup()
