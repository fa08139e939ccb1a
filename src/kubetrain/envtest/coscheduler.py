"""A real gang scheduler beside envtest's: scheduler-plugins' kube-scheduler with its Coscheduling plugin.

It is the scheduler a cluster with ``--gang-scheduler-name=scheduler-plugins-scheduler`` runs (upstream's
name for it): the operator then gives every pod that ``schedulerName`` and a ``scheduling.x-k8s.io``
PodGroup, and this scheduler binds a job's pods only once ``minMember`` of them fit at the same time; the
others wait in its queue, Pending. Built from the Go module pinned in ``tools/scheduler-plugins``
(Kubernetes held at envtest's release), run as a host process recorded in the run directory, so
``kubetrain envtest stop`` stops it with the rest.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
import yaml

from kubetrain.envtest import controlplane, processes
from kubetrain.envtest.gotool import GoTool
from kubetrain.envtest.kubeapi import ApiError, KubeApi

CHECKOUT = Path(__file__).resolve().parents[3]
MODULE = CHECKOUT / "tools" / "scheduler-plugins"
UPSTREAM = "sigs.k8s.io/scheduler-plugins"
SCHEDULER_NAME = "scheduler-plugins-scheduler"
PROCESS = "coscheduler"
CRD_NAME = "podgroups.scheduling.x-k8s.io"
PERMIT_WAITING_SECONDS = 10
"""How long pods of a gang that reached Permit wait for the rest before the scheduler gives them up
(upstream's example configuration)."""

_REQUIRE = re.compile(
    r"^\s*(?:require\s+)?sigs\.k8s\.io/scheduler-plugins\s+(v\d+\.\d+\.\d+)\s*$", re.MULTILINE
)


class CoschedulerError(RuntimeError):
    pass


def tool() -> GoTool:
    match = _REQUIRE.search((MODULE / "go.mod").read_text())
    if match is None:
        raise CoschedulerError(f"{MODULE / 'go.mod'}: no 'require {UPSTREAM} vX.Y.Z' line")
    # envtest's build tags, so Go's build cache serves the Kubernetes packages both compile.
    flags = ("-tags", "providerless", "-trimpath", "-ldflags", "-s -w")
    return GoTool(
        "scheduler-plugins",
        MODULE,
        f"{UPSTREAM}/cmd/scheduler",
        "kube-scheduler",
        match.group(1),
        "KUBETRAIN_SCHEDULER_PLUGINS",
        flags,
    )


def crd_path() -> Path:
    """The PodGroup CRD as the pinned release ships it for the Coscheduling plugin."""
    return tool().module_dir(UPSTREAM) / "manifests" / "coscheduling" / "crd.yaml"


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


def install_crd(api: KubeApi) -> None:
    body = yaml.safe_load(crd_path().read_text())
    try:
        api.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body)
    except ApiError as error:
        if error.code != 409:
            raise
    _wait(
        "the PodGroup CRD established",
        lambda: any(
            c["type"] == "Established" and c["status"] == "True"
            for c in api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}")
            .get("status", {})
            .get("conditions", [])
        ),
        30.0,
    )


def running(run_dir: Path) -> bool:
    record = processes.read_record(run_dir, PROCESS)
    return record is not None and record.is_running()


def start(run_dir: Path) -> processes.ProcessRecord:
    """Install the PodGroup CRD and start the scheduler against the envtest in ``run_dir``; healthy when it
    answers /healthz."""
    binary = tool().ensure_built()
    kubeconfig = run_dir / controlplane.ADMIN_KUBECONFIG
    with KubeApi.from_kubeconfig(kubeconfig) as api:
        install_crd(api)
    directory = run_dir / PROCESS
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.yaml").write_text(config(kubeconfig))
    port = controlplane.free_port()
    record = processes.spawn(
        run_dir,
        PROCESS,
        [
            str(binary),
            f"--config={directory / 'config.yaml'}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
        ],
    )
    _wait("the gang scheduler healthy", lambda: record.is_running() and _healthy(port), 60.0, record.log)
    return record


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"https://127.0.0.1:{port}/healthz", verify=False, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def stop(run_dir: Path) -> bool:
    return processes.terminate(run_dir, PROCESS)


def _wait(what: str, done: object, timeout: float, log: Path | None = None) -> None:
    assert callable(done)
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            tail = log.read_text()[-3000:] if log is not None and log.exists() else ""
            raise CoschedulerError(f"{what}: not within {timeout:.0f} s\n{tail}")
        time.sleep(0.3)


if __name__ == "__main__":  # `make test-e2e` builds it before the tier runs
    print(tool().ensure_built())
