"""The JobSet controller beside envtest, as a cluster with JobSet installed runs it.

JobSet (``sigs.k8s.io/jobset``) is the engine Kubeflow Trainer v2 builds a TrainJob on: a JobSet becomes one
batch Job per replicated job and replica, a headless Service for its pods' subdomain, and a status the
TrainJob's is derived from. Its controller is built from the release pinned in ``tools/jobset`` (cached in
``~/.cache/kubetrain/jobset/<version>/``) and runs as a host process recorded in the run directory, so
``kubetrain envtest stop`` stops it with the rest. It runs as its Deployment would, less the cluster around
it: the release's CRD; its webhooks (JobSet defaulting and validation, and the pod webhooks that place a
JobSet's pods) served on 127.0.0.1 with a certificate from envtest's CA, its internal cert manager off (it
needs a Secret and a Service to write and point at), the release's webhook configurations pointing at it by
URL; no leader election, no metrics. With the fake nodes the pod driver then plays the kubelet for its
pods; with a real node they run.
"""

from __future__ import annotations

import fcntl
import socket
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import yaml

from kubetrain.envtest import processes, webhooks
from kubetrain.envtest.crds import install_crd_files
from kubetrain.envtest.gotool import GoTool, GoToolError, required_version
from kubetrain.envtest.kubeapi import ApiError, KubeApi, KubeObject
from kubetrain.envtest.pki import issue_serving_certificate, load_pki

CHECKOUT = Path(__file__).resolve().parents[3]
MODULE = CHECKOUT / "tools" / "jobset"
UPSTREAM = "sigs.k8s.io/jobset"
PROCESS = "jobset-controller"
BINARY_ENV = "KUBETRAIN_JOBSET"
CRD_NAME = "jobsets.jobset.x-k8s.io"
API = "/apis/jobset.x-k8s.io/v1alpha2"
NAME_PREFIX = "jobset-"
"""The release's ``config/default`` names its webhook configurations with this prefix (kustomize's
``namePrefix``)."""
START_TIMEOUT = 60.0


class JobSetError(RuntimeError):
    """The JobSet controller could not be built or started; the message says why."""


def version() -> str:
    found = required_version(MODULE / "go.mod", UPSTREAM)
    if found is None:
        raise JobSetError(f"{MODULE / 'go.mod'}: no 'require {UPSTREAM} vX.Y.Z' line")
    return found


def tool() -> GoTool:
    """The controller manager: the release module's root package, its version stamped as the release's
    Makefile does (it is in its User-Agent, so in audit logs)."""
    stamp = f"-s -w -X {UPSTREAM}/pkg/version.GitVersion={version()}"
    flags = ("-trimpath", "-ldflags", stamp)
    return GoTool("jobset", MODULE, UPSTREAM, "jobset-controller", version(), BINARY_ENV, flags)


def ensure_built() -> Path:
    if not (MODULE / "go.mod").is_file():
        raise JobSetError(
            f"{MODULE}/go.mod not found: the JobSet controller is built from a kubetrain checkout"
        )
    try:
        return tool().ensure_built()
    except GoToolError as error:
        raise JobSetError(str(error)) from error


def source() -> Path:
    """The release's source as Go's module cache has it (downloaded when it is not there)."""
    return tool().module_dir(UPSTREAM)


def crd_path() -> Path:
    return source() / "config" / "components" / "crd" / "bases" / "jobset.x-k8s.io_jobsets.yaml"


def webhook_configurations(port: int, ca_bundle: bytes) -> list[KubeObject]:
    """The release's webhook configurations (``config/components/webhook``: the pod webhooks only for pods
    of a JobSet, by its patches), sent to the controller on ``127.0.0.1:port``."""
    directory = source() / "config" / "components" / "webhook"
    patched = webhooks.read_configurations(
        directory / "manifests.yaml",
        [
            ("MutatingWebhookConfiguration", None, directory / "patches" / "mutating-patch.yaml"),
            ("ValidatingWebhookConfiguration", None, directory / "patches" / "validating-patch.yaml"),
        ],
    )
    return [
        webhooks.on_loopback(c, f"https://127.0.0.1:{port}", ca_bundle, NAME_PREFIX + c["metadata"]["name"])
        for c in patched
    ]


def configuration(webhook_port: int, health_port: int, cert_dir: Path) -> str:
    """The controller's Configuration (``config.jobset.x-k8s.io/v1alpha1``)."""
    return yaml.safe_dump(
        {
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
            "metrics": {"bindAddress": "0"},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
        },
        sort_keys=False,
    )


def running(run_dir: Path) -> bool:
    record = processes.read_record(run_dir, PROCESS)
    return record is not None and record.is_running()


def start(run_dir: Path, kubeconfig: Path, timeout: float = START_TIMEOUT) -> float:
    """Install the CRD and start the controller against the envtest in ``run_dir`` unless it runs there
    already; return once a JobSet passes its webhooks through the API server. Returns the seconds taken."""
    started = time.monotonic()
    # The controller runs in a directory of its own: its arguments must not be relative paths.
    run_dir, kubeconfig = run_dir.resolve(), kubeconfig.resolve()
    binary = ensure_built()
    with KubeApi.from_kubeconfig(kubeconfig) as api:
        install_crd_files(api, [crd_path()])
        # Sessions sharing a run directory start it once: two controllers would each make a JobSet's Jobs.
        with (run_dir / f"{PROCESS}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not running(run_dir):
                _spawn(run_dir, kubeconfig, binary, api, timeout)
        _wait(f"{PROCESS} admitting a JobSet", lambda: _admits(api), timeout, run_dir)
    return time.monotonic() - started


def _spawn(run_dir: Path, kubeconfig: Path, binary: Path, api: KubeApi, timeout: float) -> None:
    directory = run_dir / "jobset"
    cert_dir = issue_serving_certificate(load_pki(run_dir / "pki"), directory / "certs")
    webhook_port, health_port = free_ports(2)
    (directory / "config.yaml").write_text(configuration(webhook_port, health_port, cert_dir))
    argv = [str(binary), f"--config={directory / 'config.yaml'}", f"--kubeconfig={kubeconfig}"]
    record = processes.spawn(run_dir, PROCESS, argv)
    # readyz answers once the certificates are there and the webhook server listens.
    _wait(
        f"{PROCESS} ready",
        lambda: record.is_running() and _ok(f"http://127.0.0.1:{health_port}/readyz"),
        timeout,
        run_dir,
    )
    webhooks.install(api, webhook_configurations(webhook_port, (cert_dir / "ca.crt").read_bytes()))


def _admits(api: KubeApi) -> bool:
    """A JobSet created with ``dryRun`` passes the mutating and validating webhooks (the API server reaches
    the controller)."""
    probe = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"generateName": "envtest-probe-"},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "probe",
                    "template": {
                        "spec": {
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [{"name": "probe", "image": "probe"}],
                                }
                            }
                        }
                    },
                }
            ]
        },
    }
    try:
        api.create(f"{API}/namespaces/default/jobsets?dryRun=All", probe)
    except ApiError:
        return False
    return True


def stop(run_dir: Path) -> bool:
    """Stop the controller; True when it was running. Its webhook configurations stay, as they would with
    its Deployment scaled to zero: JobSets are then refused until it runs again."""
    return processes.terminate(run_dir, PROCESS)


def free_ports(count: int) -> list[int]:
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            probe = socket.socket()
            probe.bind(("127.0.0.1", 0))
            sockets.append(probe)
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for probe in sockets:
            probe.close()


def _ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def _wait(what: str, done: Callable[[], bool], timeout: float, run_dir: Path) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        record = processes.read_record(run_dir, PROCESS)
        log = record.log if record is not None else run_dir / "logs" / f"{PROCESS}.log"
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
        if record is not None and not record.is_running():
            raise JobSetError(f"{what}: {PROCESS} exited; the end of {log}:\n{tail}")
        if time.monotonic() > deadline:
            raise JobSetError(f"{what}: not within {timeout:.0f} s; the end of {log}:\n{tail}")
        time.sleep(0.1)


if __name__ == "__main__":  # `make jobset-build`
    print(ensure_built())
