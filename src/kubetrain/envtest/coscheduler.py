"""A real gang scheduler beside envtest's: scheduler-plugins' kube-scheduler with its Coscheduling plugin.

It is the scheduler a cluster with ``--gang-scheduler-name=scheduler-plugins-scheduler`` runs (upstream's
name for it): the operator then gives every pod that ``schedulerName`` and a ``scheduling.x-k8s.io``
PodGroup, and this scheduler binds a job's pods only once ``minMember`` of them fit at the same time; the
others wait in its queue, Pending. Beside it runs scheduler-plugins' controller, which writes each
PodGroup's status (``phase``, ``running``...) as a cluster with that scheduler installed has it: the
PodGroup of a gang that cannot fit says ``Scheduling`` with nothing running. Both are built from the Go
module pinned in ``tools/scheduler-plugins`` (Kubernetes held at envtest's release) and run as host
processes recorded in the run directory, so ``kubetrain envtest stop`` stops them with the rest.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import httpx
import yaml

from kubetrain.envtest import controlplane, processes
from kubetrain.envtest.gotool import GoTool, required_version
from kubetrain.envtest.kubeapi import ApiError, KubeApi

CHECKOUT = Path(__file__).resolve().parents[3]
MODULE = CHECKOUT / "tools" / "scheduler-plugins"
UPSTREAM = "sigs.k8s.io/scheduler-plugins"
SCHEDULER_NAME = "scheduler-plugins-scheduler"
PROCESS = "coscheduler"
CONTROLLER_PROCESS = "coscheduler-controller"
CRD_NAMES = ("podgroups.scheduling.x-k8s.io", "elasticquotas.scheduling.x-k8s.io")
"""The release's CRDs: the controller watches ElasticQuotas too and does not start without theirs."""
PERMIT_WAITING_SECONDS = 10
"""How long pods of a gang that reached Permit wait for the rest before the scheduler gives them up
(upstream's example configuration)."""


class CoschedulerError(RuntimeError):
    """What went wrong, said in the message."""


def _version() -> str:
    found = required_version(MODULE / "go.mod", UPSTREAM)
    if found is None:
        raise CoschedulerError(f"{MODULE / 'go.mod'}: no 'require {UPSTREAM} vX.Y.Z' line")
    return found


# envtest's build tags and no -trimpath (binaries.kubernetes_build_command says why), so Go's build cache
# serves the Kubernetes packages both compile.
_FLAGS = ("-tags", "providerless", "-ldflags", "-s -w")


def tool() -> GoTool:
    """The scheduler: upstream's kube-scheduler with scheduler-plugins' plugins registered."""
    return GoTool(
        "scheduler-plugins",
        MODULE,
        f"{UPSTREAM}/cmd/scheduler",
        "kube-scheduler",
        _version(),
        "KUBETRAIN_SCHEDULER_PLUGINS",
        _FLAGS,
    )


def controller_tool() -> GoTool:
    """The controller that keeps PodGroup status; its own cache directory, as a GoTool holds one binary."""
    return GoTool(
        "scheduler-plugins-controller",
        MODULE,
        f"{UPSTREAM}/cmd/controller",
        "controller",
        _version(),
        "KUBETRAIN_SCHEDULER_PLUGINS_CONTROLLER",
        _FLAGS,
    )


def crd_paths() -> list[Path]:
    """The PodGroup and ElasticQuota CRDs as the pinned release generates them (``config/crd/bases``)."""
    bases = tool().module_dir(UPSTREAM) / "config" / "crd" / "bases"
    return [bases / f"{name.split('.', 1)[1]}_{name.split('.', 1)[0]}.yaml" for name in CRD_NAMES]


def ensure_built() -> list[Path]:
    return [tool().ensure_built(), controller_tool().ensure_built()]


def config(kubeconfig: Path) -> str:
    """The scheduler's configuration: only ``SCHEDULER_NAME``, with Coscheduling (upstream's example)."""
    return yaml.safe_dump(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False},
            "clientConnection": {"kubeconfig": str(kubeconfig)},
            "profiles": [
                {
                    "schedulerName": SCHEDULER_NAME,
                    "plugins": {
                        "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                        "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
                    },
                    "pluginConfig": [
                        {"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": PERMIT_WAITING_SECONDS}}
                    ],
                }
            ],
        },
        sort_keys=False,
    )


def install_crds(api: KubeApi) -> None:
    for path, name in zip(crd_paths(), CRD_NAMES, strict=True):
        try:
            api.create(
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", yaml.safe_load(path.read_text())
            )
        except ApiError as error:
            if error.code != 409:
                raise
        _wait(f"the {name} CRD established", partial(_established, api, name), 30.0)


def _established(api: KubeApi, name: str) -> bool:
    crd = api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
    # A CRD just created may carry the manifest's own ``status`` (conditions null) until the server fills it.
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def running(run_dir: Path) -> bool:
    return all(_running(run_dir, name) for name in (PROCESS, CONTROLLER_PROCESS))


def _running(run_dir: Path, name: str) -> bool:
    record = processes.read_record(run_dir, name)
    return record is not None and record.is_running()


def start(run_dir: Path) -> None:
    """Install the CRDs and start whichever of the scheduler and its controller is not running against the
    envtest in ``run_dir``; each healthy when it answers /healthz."""
    scheduler, controller = ensure_built()
    kubeconfig = run_dir / controlplane.ADMIN_KUBECONFIG
    with KubeApi.from_kubeconfig(kubeconfig) as api:
        install_crds(api)
    # Sessions sharing a run directory start it once: two schedulers of one name would each bind half a gang.
    with (run_dir / f"{PROCESS}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _start_missing(run_dir, kubeconfig, scheduler, controller)


def _start_missing(run_dir: Path, kubeconfig: Path, scheduler: Path, controller: Path) -> None:
    if not _running(run_dir, PROCESS):
        directory = run_dir / PROCESS
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "config.yaml").write_text(config(kubeconfig))
        port = controlplane.free_port()
        argv = [
            str(scheduler),
            f"--config={directory / 'config.yaml'}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
        ]
        _spawn_healthy(run_dir, PROCESS, argv, f"https://127.0.0.1:{port}/healthz")
    if not _running(run_dir, CONTROLLER_PROCESS):
        port = controlplane.free_port()
        argv = [
            str(controller),
            f"--kubeconfig={kubeconfig}",
            "--metricsAddr=0",  # off: upstream's :8080 default is anyone's port on a shared host
            f"--probeAddr=127.0.0.1:{port}",
        ]
        _spawn_healthy(run_dir, CONTROLLER_PROCESS, argv, f"http://127.0.0.1:{port}/healthz")


def _spawn_healthy(run_dir: Path, name: str, argv: list[str], health_url: str) -> None:
    record = processes.spawn(run_dir, name, argv)
    _wait(f"{name} healthy", lambda: record.is_running() and _healthy(health_url), 60.0, record.log)


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url, verify=False, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def stop(run_dir: Path) -> bool:
    """Stop both; True when either was running."""
    return any([processes.terminate(run_dir, name) for name in (CONTROLLER_PROCESS, PROCESS)])


def _wait(what: str, done: Callable[[], bool], timeout: float, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            tail = log.read_text()[-3000:] if log is not None and log.exists() else ""
            raise CoschedulerError(f"{what}: not within {timeout:.0f} s\n{tail}")
        time.sleep(0.3)


if __name__ == "__main__":  # `make test-e2e` builds both before the tier runs
    print(*ensure_built(), sep="\n")
