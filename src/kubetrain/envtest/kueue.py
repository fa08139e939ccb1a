"""Kueue beside envtest, for the cluster tier's queueing tests: its controller manager built from the release
pinned in ``tools/kueue`` (cached in ``~/.cache/kubetrain/kueue/<version>/``), run as a host process recorded
in the run directory (``kubetrain envtest stop`` stops it with the rest).

It runs as its Deployment would, less the cluster around it: the release's CRDs (``config/components/crd/
bases``, without the conversion webhooks its kustomization adds: only ``v1beta2``, the storage version, is
used), its integrations chosen (TrainJob's, ``trainer.kubeflow.org/trainjob``, by default: Kueue then admits a
TrainJob labelled ``kueue.x-k8s.io/queue-name`` by unsuspending it and suspends it when it loses its quota),
its webhooks served on 127.0.0.1 with a certificate from envtest's CA, its internal cert manager off, no
leader election, no metrics, and its visibility API server (the ``VisibilityOnDemand`` gate) off. Only the
webhooks of Kueue's own kinds and of the chosen integrations are installed, and they are deleted when it stops
(each is ``failurePolicy: Fail``: left behind, they would refuse those kinds). Kueue also needs the CRDs of
the kinds it integrates installed before it starts (TrainJob's integration watches TrainJobs and their
JobSets).

v0.17.0 reads a metrics certificate from ``/etc/kueue/metrics/certs`` whenever its cert manager is off (a
constant, even with metrics off), so Kueue runs in a mount namespace of its own where its serving
certificate's directory is bound there (``envtest.private_mounts``): a directory made on the host would
outlive the run. Starting Kueue needs root.
"""

from __future__ import annotations

import fcntl
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx
import yaml

from kubetrain.envtest import processes, webhooks
from kubetrain.envtest.crds import install_crd_files
from kubetrain.envtest.gotool import GoTool, GoToolError, required_version
from kubetrain.envtest.jobset import free_ports
from kubetrain.envtest.kubeapi import ApiError, KubeApi, KubeObject
from kubetrain.envtest.pki import issue_serving_certificate, load_pki
from kubetrain.envtest.private_mounts import in_private_mounts

CHECKOUT = Path(__file__).resolve().parents[3]
MODULE = CHECKOUT / "tools" / "kueue"
UPSTREAM = "sigs.k8s.io/kueue"
PROCESS = "kueue"
BINARY_ENV = "KUBETRAIN_KUEUE"
NAMESPACE = "kueue-system"
TRAINJOB_FRAMEWORK = "trainer.kubeflow.org/trainjob"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
METRICS_CERTS = Path("/etc/kueue/metrics/certs")
"""Where v0.17.0 reads its metrics certificate when its cert manager is off (``cmd/kueue/main.go``)."""
NAME_PREFIX = "kueue-"
"""The release's ``config/default`` names its webhook configurations with this prefix."""
START_TIMEOUT = 90.0

FRAMEWORK_RESOURCES = {
    "batch/job": ("batch", "jobs"),
    "jobset.x-k8s.io/jobset": ("jobset.x-k8s.io", "jobsets"),
    "kubeflow.org/mpijob": ("kubeflow.org", "mpijobs"),
    "kubeflow.org/pytorchjob": ("kubeflow.org", "pytorchjobs"),
    "kubeflow.org/tfjob": ("kubeflow.org", "tfjobs"),
    "kubeflow.org/xgboostjob": ("kubeflow.org", "xgboostjobs"),
    "kubeflow.org/paddlejob": ("kubeflow.org", "paddlejobs"),
    "kubeflow.org/jaxjob": ("kubeflow.org", "jaxjobs"),
    TRAINJOB_FRAMEWORK: ("trainer.kubeflow.org", "trainjobs"),
}
"""The integrations this runner can turn on, each with the group and resource its webhooks admit."""

QUEUEING_CONTROLLERS = ("clusterqueue-reconciler", "localqueue-reconciler", "workload-reconciler")
FRAMEWORK_CONTROLLERS = {TRAINJOB_FRAMEWORK: "trainjob"}
"""The logger name each integration's controller logs ``Starting workers`` under (Kueue names it so; its log
lines have no ``controller`` key)."""
_STARTED = re.compile(r'"logger":"([^"]+)".*"msg":"Starting workers"')


class KueueError(RuntimeError):
    """Kueue could not be built or started; the message says why."""


def version() -> str:
    found = required_version(MODULE / "go.mod", UPSTREAM)
    if found is None:
        raise KueueError(f"{MODULE / 'go.mod'}: no 'require {UPSTREAM} vX.Y.Z' line")
    return found


def tool() -> GoTool:
    return GoTool("kueue", MODULE, f"{UPSTREAM}/cmd/kueue", "kueue", version(), BINARY_ENV)


def ensure_built() -> Path:
    try:
        return tool().ensure_built()
    except GoToolError as error:
        raise KueueError(str(error)) from error


def source() -> Path:
    return tool().module_dir(UPSTREAM)


def crd_paths() -> list[Path]:
    return sorted((source() / "config" / "components" / "crd" / "bases").glob("*.yaml"))


def configuration(frameworks: Sequence[str], webhook_port: int, health_port: int, cert_dir: Path) -> str:
    """Kueue's Configuration (``config.kueue.x-k8s.io/v1beta2``): the release's
    ``controller_manager_config.yaml`` with ``frameworks`` integrated and its servers on loopback."""
    unknown = sorted(set(frameworks) - set(FRAMEWORK_RESOURCES))
    if unknown:
        raise KueueError(
            f"integrations {unknown} are not supported here; choose from {sorted(FRAMEWORK_RESOURCES)}"
        )
    return yaml.safe_dump(
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "controller": {
                "groupKindConcurrency": {
                    "Job.batch": 5,
                    "Pod": 5,
                    "Workload.kueue.x-k8s.io": 5,
                    "LocalQueue.kueue.x-k8s.io": 1,
                    "Cohort.kueue.x-k8s.io": 1,
                    "ClusterQueue.kueue.x-k8s.io": 1,
                    "ResourceFlavor.kueue.x-k8s.io": 1,
                }
            },
            "clientConnection": {"qps": 50, "burst": 100},
            "integrations": {"frameworks": list(frameworks)},
            "featureGates": {"VisibilityOnDemand": False},
        },
        sort_keys=False,
    )


def _admits(webhook: KubeObject, resources: set[tuple[str, str]]) -> bool:
    return any(
        (group, resource) in resources
        for rule in webhook.get("rules") or []
        for group in rule.get("apiGroups") or []
        for resource in rule.get("resources") or []
    )


def webhook_configurations(frameworks: Sequence[str], port: int, ca_bundle: bytes) -> list[KubeObject]:
    """The release's webhook configurations, only the webhooks of Kueue's own kinds and of ``frameworks``,
    sent to 127.0.0.1:``port``."""
    manifests = source() / "config" / "components" / "webhook" / "manifests.yaml"
    wanted = {FRAMEWORK_RESOURCES[f] for f in frameworks}
    configurations = []
    for configuration in webhooks.read_configurations(manifests):
        kept = [
            w
            for w in configuration["webhooks"]
            if _admits(w, wanted)
            or any("kueue.x-k8s.io" in r.get("apiGroups", []) for r in w.get("rules") or [])
        ]
        if kept:
            name = NAME_PREFIX + configuration["metadata"]["name"]
            configurations.append(
                webhooks.on_loopback(
                    {**configuration, "webhooks": kept}, f"https://127.0.0.1:{port}", ca_bundle, name
                )
            )
    return configurations


def started_controllers(log: str) -> set[str]:
    """The controllers whose workers run, by Kueue's log."""
    return set(_STARTED.findall(log))


def running(run_dir: Path) -> bool:
    record = processes.read_record(run_dir, PROCESS)
    return record is not None and record.is_running()


def start(
    run_dir: Path,
    kubeconfig: Path,
    frameworks: Sequence[str] = (TRAINJOB_FRAMEWORK,),
    timeout: float = START_TIMEOUT,
) -> float:
    """Install Kueue's CRDs and start it against the envtest in ``run_dir`` (unless it runs there already),
    integrating ``frameworks``, whose CRDs must be installed; returns the seconds taken, once its webhooks
    answer through the API server and its queueing and integration controllers run their workers."""
    started = time.monotonic()
    # The controller runs in a directory of its own: its arguments must not be relative paths.
    run_dir, kubeconfig = run_dir.resolve(), kubeconfig.resolve()
    binary = ensure_built()
    with KubeApi.from_kubeconfig(kubeconfig) as api:
        install_crd_files(api, crd_paths())
        with (run_dir / f"{PROCESS}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not running(run_dir):
                _spawn(run_dir, kubeconfig, binary, api, frameworks, timeout)
        _wait("Kueue's webhooks answering", lambda: _answers(api), timeout, run_dir)
    wanted = {
        *QUEUEING_CONTROLLERS,
        *(FRAMEWORK_CONTROLLERS[f] for f in frameworks if f in FRAMEWORK_CONTROLLERS),
    }
    log = run_dir / "logs" / f"{PROCESS}.log"
    _wait(
        "Kueue's controllers running",
        lambda: wanted <= started_controllers(log.read_text()),
        timeout,
        run_dir,
    )
    return time.monotonic() - started


def _spawn(
    run_dir: Path, kubeconfig: Path, binary: Path, api: KubeApi, frameworks: Sequence[str], timeout: float
) -> None:
    directory = run_dir / PROCESS
    certificates = issue_serving_certificate(load_pki(run_dir / "pki"), directory / "certs")
    try:
        api.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
    except ApiError as error:
        if error.code != 409:
            raise
    webhook_port, health_port = free_ports(2)
    (directory / "config.yaml").write_text(configuration(frameworks, webhook_port, health_port, certificates))
    argv = [str(binary), f"--config={directory / 'config.yaml'}", f"--kubeconfig={kubeconfig}"]
    # Its serving certificate (tls.crt, tls.key) is the metrics one too, bound where Kueue reads it.
    argv = in_private_mounts(argv, {METRICS_CERTS: certificates})
    record = processes.spawn(run_dir, PROCESS, argv)
    _wait(
        "Kueue ready",
        lambda: record.is_running() and _ok(f"http://127.0.0.1:{health_port}/readyz"),
        timeout,
        run_dir,
    )
    configurations = webhook_configurations(frameworks, webhook_port, (certificates / "ca.crt").read_bytes())
    (directory / "webhooks.yaml").write_text(yaml.safe_dump_all(configurations))
    webhooks.install(api, configurations)


def _answers(api: KubeApi) -> bool:
    """A ResourceFlavor created with ``dryRun`` passes Kueue's webhooks (the API server reaches it)."""
    probe = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"generateName": "envtest-probe-"},
    }
    try:
        api.create("/apis/kueue.x-k8s.io/v1beta2/resourceflavors?dryRun=All", probe)
    except ApiError:
        return False
    return True


def stop(run_dir: Path, kubeconfig: Path) -> bool:
    """Stop Kueue and delete the webhook configurations it was given; True when it was running."""
    was_running = processes.terminate(run_dir, PROCESS)
    installed = run_dir / PROCESS / "webhooks.yaml"
    if installed.is_file():
        with KubeApi.from_kubeconfig(kubeconfig) as api:
            webhooks.remove(api, [c for c in yaml.safe_load_all(installed.read_text()) if c])
        installed.unlink()
    return was_running


def _ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def _wait(what: str, done: Callable[[], bool], timeout: float, run_dir: Path) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        record = processes.read_record(run_dir, PROCESS)
        log = run_dir / "logs" / f"{PROCESS}.log"
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
        if record is not None and not record.is_running():
            raise KueueError(f"{what}: Kueue exited; the end of {log}:\n{tail}")
        if time.monotonic() > deadline:
            raise KueueError(f"{what}: not within {timeout:.0f} s; the end of {log}:\n{tail}")
        time.sleep(0.2)


if __name__ == "__main__":  # `make kueue-build`
    print(ensure_built())
