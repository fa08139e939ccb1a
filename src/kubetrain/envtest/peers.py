"""The operators kubetrain is held to, run beside it on an envtest: its peers.

Three peers, each built from its Go module pinned in ``tools/<name>`` of the checkout (``envtest.gotool``,
cached in ``~/.cache/kubetrain/<name>/<version>/``):

- upstream's **training-operator** (``kubeflow.org/v1``: PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob and
  the v1 MPIJob);
- the **mpi-operator**, which defines MPIJob ``kubeflow.org/v2beta1``;
- **Kubeflow Trainer** v2 (``trainer.kubeflow.org/v1alpha1``: TrainJob, TrainingRuntime,
  ClusterTrainingRuntime), whose TrainJobs become JobSets: the JobSet controller (``envtest.jobset``) makes
  their Jobs and pods.

Each runs out of cluster as its Deployment would run it, less the kubelet, watching one namespace. The
training-operator needs what its Pod would have: its namespace (``MY_POD_NAMESPACE``), an empty Secret
``training-operator-webhook-cert`` that its cert rotator fills, a ValidatingWebhookConfiguration whose one
webhook matches no resource (the rotator injects its CA there; the API server never calls it, as there is no
Service to reach the operator through), and the Secret's certificate in
``/tmp/k8s-webhook-server/serving-certs/`` as a volume mount would put it (a path upstream does not let one
change: as root, each start binds a directory of its own there in a mount namespace of its own, so the
machine keeps no such path; otherwise starts are serialised under a lock so two never swap certificates).
The mpi-operator takes a leader-election Lease in a namespace of its own and always serves its health check
on port 8080 (a constant in v0.6.0): one runs on a machine at a time, under a lock.

Trainer has no namespace option: it reconciles the TrainJobs of every namespace (each one whose ``managedBy``
is unset or its own; the CRD's CEL allows only that or ``kueue.x-k8s.io/multikueue``), so no second TrainJob
controller can share an API server with it at the same time; the conformance tier runs them one after the
other. It runs with its Config API's ``certManagement.enable: false``: its webhook server reads a certificate
from a CA of the peer's own in ``$TMPDIR/k8s-webhook-server/serving-certs`` (``TMPDIR`` is per start), and its
webhook configurations (the release's, from ``manifests/base/webhook``) name it on 127.0.0.1 and only the
namespace its jobs are made in; they are deleted when it stops. It takes its own namespace to be
``kubeflow-system``, where the Secret ``kubeflow-trainer-webhook-cert`` holds that CA for the TrainJobStatus
plugin's ``<job>-tls-config`` ConfigMap. With the ``TrainJobStatus`` gate on (off by default, as in the
release) its status server needs what only a pod has at fixed paths: a ServiceAccount token (whose issuer it
verifies pods' tokens against) and a certificate in ``/tmp/k8s-webhook-server/serving-certs``; Trainer then
runs in a mount namespace of its own (root only) where both are bound, and on the release's port 10443, one at
a time per machine.

The conformance tier (``tests/peers``) and ``bench/operator_side_by_side.py`` run the peers through this
module. ``python -m kubetrain.envtest.peers build`` builds them all (``make peers-build``).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx
import yaml

from kubetrain.envtest import jobset, webhooks
from kubetrain.envtest.crds import install_crd_files
from kubetrain.envtest.gotool import GoTool, GoToolError, required_version
from kubetrain.envtest.kubeapi import ApiError, KubeApi, KubeObject
from kubetrain.envtest.pki import generate_pki, issue_serving_certificate
from kubetrain.envtest.private_mounts import in_private_mounts

CHECKOUT = Path(__file__).resolve().parents[3]
TOOLS = CHECKOUT / "tools"

CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
"""Where upstream's webhook server reads its certificate (a constant of training-operator v1.9.0)."""
WEBHOOK_SECRET = "training-operator-webhook-cert"
WEBHOOK_CONFIGURATION = "validator.training-operator.kubeflow.org"
MPI_OPERATOR_HEALTH_PORT = 8080
"""The mpi-operator's health check listens on ``:8080`` whatever its flags (a constant of v0.6.0)."""
TEST_CLIENT_LIMIT = (200, 400)
"""The client-side limit the conformance tier runs the mpi-operator with (QPS, burst): its own default of QPS
5 would make each case wait on the peer's client for nothing the comparison reads. Not its shipped setting:
``bench/operator_side_by_side.py`` passes ``client_limit=None`` for the peer as it ships."""

TRAINING_OPERATOR_SCHEMES = ("pytorchjob", "tfjob", "xgboostjob", "paddlejob", "jaxjob", "mpijob")
"""What ``--enable-scheme`` takes; each scheme's controller is ``<scheme>-controller``."""


class PeerError(RuntimeError):
    """A peer could not be built or started; the message says why and what to do."""


@dataclass(frozen=True)
class Peer:
    """One peer operator: where its Go module is pinned and what its release ships."""

    name: str
    """``tools/<name>`` and the cache directory's name."""
    module: str
    """The Go module path of the release."""
    command: str
    """The package of its ``main``, inside ``module``."""
    binary_env: str
    """Names a binary to use instead of building one."""
    crds: str
    """Where its release keeps its CRDs, inside the module."""
    examples: str
    """Where its release keeps its example jobs, inside the module."""

    @property
    def directory(self) -> Path:
        return TOOLS / self.name

    def version(self) -> str:
        go_mod = self.directory / "go.mod"
        found = required_version(go_mod, self.module)
        if found is None:
            raise PeerError(f"{go_mod}: no 'require {self.module} vX.Y.Z' line")
        return found

    def tool(self) -> GoTool:
        return GoTool(
            self.name,
            self.directory,
            f"{self.module}/{self.command}",
            self.name,
            self.version(),
            self.binary_env,
        )

    def ensure_built(self) -> Path:
        try:
            return self.tool().ensure_built()
        except GoToolError as error:
            raise PeerError(str(error)) from error

    def source(self) -> Path:
        """The release's source as Go's module cache has it (downloaded when it is not there)."""
        return self.tool().module_dir(self.module)

    def crds_dir(self) -> Path:
        return self.source() / self.crds

    def examples_dir(self) -> Path:
        return self.source() / self.examples


TRAINING_OPERATOR = Peer(
    name="training-operator",
    module="github.com/kubeflow/training-operator",
    command="cmd/training-operator.v1",
    binary_env="KUBETRAIN_TRAINING_OPERATOR",
    crds="manifests/base/crds",
    examples="examples",
)
MPI_OPERATOR = Peer(
    name="mpi-operator",
    module="github.com/kubeflow/mpi-operator",
    command="cmd/mpi-operator",
    binary_env="KUBETRAIN_MPI_OPERATOR",
    crds="manifests/base",
    examples="examples/v2beta1",
)
TRAINER = Peer(
    name="trainer",
    module="github.com/kubeflow/trainer/v2",
    command="cmd/trainer-controller-manager",
    binary_env="KUBETRAIN_TRAINER",
    crds="manifests/base/crds",
    examples="examples",
)
PEERS = (TRAINING_OPERATOR, MPI_OPERATOR, TRAINER)

TRAINER_NAMESPACE = "kubeflow-system"
"""Trainer's own namespace out of cluster (``pkg/util/cert.GetOperatorNamespace``: no ServiceAccount file)."""
TRAINER_SECRET = "kubeflow-trainer-webhook-cert"
TRAINER_SERVICE = "kubeflow-trainer-controller-manager"
TRAINER_CONTROLLERS = (
    "trainjob_controller",
    "trainingruntime_controller",
    "clustertrainingruntime_controller",
)
TRAINER_FEATURE_GATES: Mapping[str, bool] = {}
"""What the peer runs with by default: the release's gates, ``TrainJobStatus`` (alpha) off. With it on
(``{"TrainJobStatus": True}``, what kubetrain always does) Trainer gives the trainer pods a projected
ServiceAccount token volume and no ``serviceAccountName``, which only the ServiceAccount admission plugin
fills in: envtest's fake-node API server runs without it, so the Job controller's pods are refused there
(``serviceAccountToken: Forbidden: must not be specified when serviceAccountName is not set``); the JobSet,
its Jobs and the ``<job>-tls-config`` ConfigMap are made all the same. Its status server also needs root (see
above)."""
TRAINER_RUNTIMES_OVERLAY = "manifests/overlays/runtimes"
"""The built-in ClusterTrainingRuntimes as the release installs them: the base, images tagged with the release
and labelled ``trainer.kubeflow.org/webhook-validation: disabled``."""


# --- running ---------------------------------------------------------------------------------------------


@dataclass
class PeerProcess:
    """A peer operator running in the background, its output in ``log_path``."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    _held: list[IO[str]] = field(default_factory=list)
    """Locks held while it runs (the mpi-operator's port)."""
    _on_stop: list[Callable[[], None]] = field(default_factory=list)
    """What to undo once it has stopped (Trainer's webhook configurations)."""

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; the locks it held are released."""
        try:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGTERM)
                try:
                    self.process.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(10)
        finally:
            for lock in self._held:
                lock.close()
            self._held.clear()
            while self._on_stop:
                self._on_stop.pop()()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def locks_dir() -> Path:
    """Where the locks on the machine's fixed ports and paths live, shared by every run of this user: the
    project's cache (``~/.cache/kubetrain/locks``), which a run may leave, not ``/tmp``, where each lock file
    outlived the run."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    directory = Path(base) / "kubetrain" / "locks"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@contextlib.contextmanager
def _locked(name: str) -> Iterator[IO[str]]:
    with (locks_dir() / name).open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield lock


def _wait_for(probe: Callable[[], bool], timeout: float, what: str, process: PeerProcess) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if process.process.poll() is not None:
            raise PeerError(
                f"{what}: {process.name} exited with {process.process.returncode}:\n{process.log[-3000:]}"
            )
        if time.monotonic() > deadline:
            process.stop()
            raise PeerError(f"{what} did not happen within {timeout:.0f} s:\n{process.log[-3000:]}")
        time.sleep(0.1)


def _create_or_keep(api: KubeApi, collection: str, body: KubeObject) -> None:
    try:
        api.create(collection, body)
    except ApiError as error:
        if error.code != 409:
            raise


def noop_webhook_configuration(namespace: str) -> KubeObject:
    """The configuration upstream's cert rotator keeps the CA of; its webhook matches no resource, so the API
    server never calls it."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": WEBHOOK_CONFIGURATION},
        "webhooks": [
            {
                "name": "noop.training-operator.kubeflow.org",
                "clientConfig": {"service": {"name": "training-operator", "namespace": namespace}},
                "rules": [
                    {
                        "apiGroups": ["peers.kubetrain.invalid"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["nothing"],
                    }
                ],
                "failurePolicy": "Ignore",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }
        ],
    }


def _mount_certificates(
    api: KubeApi, namespace: str, process: PeerProcess, directory: Path, timeout: float = 60
) -> None:
    """Copy the Secret the rotator filled to ``directory``, which upstream sees as its certificate directory,
    as the kubelet would mount it."""
    path = f"/api/v1/namespaces/{namespace}/secrets/{WEBHOOK_SECRET}"

    def filled() -> bool:
        data = api.get(path).get("data") or {}
        if not (data.get("tls.crt") and data.get("tls.key")):
            return False
        directory.mkdir(parents=True, exist_ok=True)
        for key in ("tls.crt", "tls.key", "ca.crt"):
            if key in data:
                (directory / key).write_bytes(base64.b64decode(data[key]))
        return True

    _wait_for(filled, timeout, "upstream's cert rotator filling its Secret", process)


def _started_workers(log: str, controllers: Sequence[str]) -> bool:
    """Whether the log says each controller's workers run (controller-runtime's ``Starting workers`` line, in
    zap's console encoding or its JSON)."""
    lines = [line for line in log.splitlines() if "Starting workers" in line]
    named = [re.compile(rf'"controller":\s*"{re.escape(name)}"') for name in controllers]
    return all(any(pattern.search(line) for line in lines) for pattern in named)


def start_training_operator(
    api: KubeApi,
    kubeconfig: Path,
    namespace: str,
    log_path: Path,
    schemes: Sequence[str] = TRAINING_OPERATOR_SCHEMES,
    flags: Sequence[str] = (),
    binary: Path | None = None,
    timeout: float = 120.0,
    metrics_port: int | None = None,
) -> PeerProcess:
    """Upstream's training-operator watching ``namespace`` (its own namespace too) with ``schemes`` enabled,
    returned once every scheme's controller runs its workers; its /metrics on ``metrics_port`` (none when
    None)."""
    binary = binary or TRAINING_OPERATOR.ensure_built()
    unknown = sorted(set(schemes) - set(TRAINING_OPERATOR_SCHEMES))
    if unknown:
        raise PeerError(
            f"training-operator has no scheme {unknown}; it has {list(TRAINING_OPERATOR_SCHEMES)}"
        )
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": WEBHOOK_SECRET}}
    _create_or_keep(api, f"/api/v1/namespaces/{namespace}/secrets", secret)
    _create_or_keep(
        api,
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        noop_webhook_configuration(namespace),
    )
    command = [str(binary), "--namespace", namespace, *(f"--enable-scheme={s}" for s in schemes)]
    metrics = f"127.0.0.1:{metrics_port}" if metrics_port else "0"
    command += ["--metrics-bind-address", metrics, "--health-probe-bind-address", "0"]
    command += ["--webhook-server-port", str(free_port()), *flags]
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "MY_POD_NAMESPACE": namespace}
    # As root, the operator runs in a mount namespace where CERT_DIR is this start's own directory, and
    # nothing is left on the machine. Otherwise CERT_DIR is the machine's: one start at a time, until its
    # rotator has checked it.
    certificates = log_path.with_suffix(".d") / "serving-certs" if os.geteuid() == 0 else CERT_DIR
    if certificates != CERT_DIR:
        certificates.mkdir(parents=True, exist_ok=True)
        command = in_private_mounts(command, {CERT_DIR: certificates})
    with _locked("kubetrain-training-operator-certs.lock"):
        for stale in certificates.glob("*"):
            stale.unlink()
        with log_path.open("wb") as log:
            popen = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        process = PeerProcess("training-operator", popen, log_path)
        _mount_certificates(api, namespace, process, certificates)
        controllers = [f"{scheme}-controller" for scheme in schemes]
        _wait_for(
            lambda: _started_workers(process.log, controllers), timeout, "training-operator start", process
        )
    return process


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("", port))
        except OSError:
            return False
    return True


def start_mpi_operator(
    api: KubeApi,
    kubeconfig: Path,
    namespace: str,
    log_path: Path,
    flags: Sequence[str] = (),
    binary: Path | None = None,
    timeout: float = 120.0,
    lock_timeout: float = 600.0,
    client_limit: tuple[int, int] | None = TEST_CLIENT_LIMIT,
) -> PeerProcess:
    """The mpi-operator watching ``namespace``, its leader-election Lease there too, returned once its workers
    run. Holds the machine's port 8080 (under a lock other starts wait on) until stopped.

    ``client_limit`` is the ``--kube-api-qps`` and ``--kube-api-burst`` it is given ahead of ``flags``; None
    gives neither, so it runs at its own defaults (QPS 5, burst 10), as its release's Deployment runs it."""
    binary = binary or MPI_OPERATOR.ensure_built()
    lock = (locks_dir() / "kubetrain-mpi-operator-8080.lock").open("w")
    deadline = time.monotonic() + lock_timeout
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                lock.close()
                raise PeerError(
                    f"another mpi-operator held port {MPI_OPERATOR_HEALTH_PORT} for {lock_timeout:.0f} s"
                ) from None
            time.sleep(0.5)
    if not _port_free(MPI_OPERATOR_HEALTH_PORT):
        lock.close()
        raise PeerError(
            f"port {MPI_OPERATOR_HEALTH_PORT} is in use: the mpi-operator v0.6.0 always serves its health "
            "check there; stop what listens on it (`ss -ltnp | grep :8080`)"
        )
    command = [str(binary), "--namespace", namespace, "--lock-namespace", namespace]
    if client_limit is not None:
        qps, burst = client_limit
        command += ["--kube-api-qps", str(qps), "--kube-api-burst", str(burst)]
    command += [*flags]
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    with log_path.open("wb") as log:
        popen = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    process = PeerProcess("mpi-operator", popen, log_path, [lock])
    _wait_for(lambda: "Started workers" in process.log, timeout, "mpi-operator start", process)
    return process


def trainer_configuration(
    webhook_port: int,
    health_port: int,
    status_port: int,
    metrics_port: int | None,
    feature_gates: Mapping[str, bool],
) -> str:
    """Trainer's Configuration (``config.trainer.kubeflow.org/v1alpha1``): the release's
    ``manifests/base/manager/controller_manager_config.yaml`` with its ports on loopback, no leader election,
    plain-HTTP metrics (or none) and its cert management off."""
    return yaml.safe_dump(
        {
            "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
            "kind": "Configuration",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
            "metrics": {
                "bindAddress": f"127.0.0.1:{metrics_port}" if metrics_port else "0",
                "secureServing": False,
            },
            "webhook": {"port": webhook_port, "host": "127.0.0.1"},
            "leaderElection": {"leaderElect": False},
            "controller": {
                "groupKindConcurrency": {
                    "TrainJob.trainer.kubeflow.org": 5,
                    "TrainingRuntime.trainer.kubeflow.org": 1,
                    "ClusterTrainingRuntime.trainer.kubeflow.org": 1,
                }
            },
            "certManagement": {
                "enable": False,
                "webhookServiceName": TRAINER_SERVICE,
                "webhookSecretName": TRAINER_SECRET,
            },
            "clientConnection": {"qps": 50, "burst": 100},
            "statusServer": {"port": status_port, "qps": 5, "burst": 10},
            "featureGates": dict(feature_gates),
        },
        sort_keys=False,
    )


def trainer_webhook_configurations(port: int, ca_bundle: bytes, namespace: str) -> list[KubeObject]:
    """The release's webhook configurations (``manifests/base/webhook``, its patches naming them
    ``defaulter.trainer.kubeflow.org`` and ``validator.trainer.kubeflow.org``) sent to 127.0.0.1:``port``,
    for objects in ``namespace`` (and every ClusterTrainingRuntime)."""
    directory = TRAINER.source() / "manifests" / "base" / "webhook"
    configurations = webhooks.read_configurations(
        directory / "manifests.yaml",
        [
            ("MutatingWebhookConfiguration", None, directory / "patch_mutating.yaml"),
            ("ValidatingWebhookConfiguration", None, directory / "patch_validating.yaml"),
        ],
    )
    selector = webhooks.namespaces(namespace)
    url = f"https://127.0.0.1:{port}"
    return [webhooks.on_loopback(c, url, ca_bundle, namespace_selector=selector) for c in configurations]


def _webhooks_answer(api: KubeApi, namespace: str) -> bool:
    """Whether the API server reaches Trainer's webhooks: a TrainJob created with ``dryRun`` is admitted or
    refused by them, not failed by a call that did not get through."""
    probe = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"generateName": "peer-probe-"},
        "spec": {"runtimeRef": {"name": "peer-probe"}},
    }
    try:
        api.create(f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs?dryRun=All", probe)
    except ApiError as error:
        return "failed calling webhook" not in error.message
    return True


SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where Trainer's status server reads a ServiceAccount token (its issuer: the OIDC provider it checks pods'
tokens against) and Trainer its own namespace; constants of v2.3.0, as ``CERT_DIR`` is for its status server's
certificate."""
TRAINER_STATUS_PORT = 10443
"""The status server's port as the release configures it; it appears in the URL given to every pod."""


def _service_account_token(api: KubeApi) -> str:
    """A token of Trainer's ServiceAccount (``kubeflow-trainer-controller-manager``), as its pod has."""
    accounts = f"/api/v1/namespaces/{TRAINER_NAMESPACE}/serviceaccounts"
    _create_or_keep(
        api, accounts, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": TRAINER_SERVICE}}
    )
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 86400},
    }
    return str(api.create(f"{accounts}/{TRAINER_SERVICE}/token", request)["status"]["token"])


def _in_private_mounts(command: list[str], service_account: Path, certificates: Path) -> list[str]:
    """``command`` run in a mount namespace of its own where ``service_account`` is the ServiceAccount
    directory a pod has and ``certificates`` the status server's certificate directory: the paths are
    constants of Trainer, and binding them there leaves the machine's (and other peers') alone; where they
    are missing, they are made in that namespace only (``envtest.private_mounts``). Needs root."""
    if os.geteuid() != 0:
        raise PeerError(
            "Trainer's status server (the TrainJobStatus gate) reads a ServiceAccount token and a "
            f"certificate from fixed paths ({SERVICE_ACCOUNT_DIR}, {CERT_DIR}), bound into a mount namespace "
            "of its own, which needs root; start it with feature_gates={} (the release's defaults) instead"
        )
    return in_private_mounts(command, {SERVICE_ACCOUNT_DIR: service_account, CERT_DIR: certificates})


def _hold_port(port: int, timeout: float) -> IO[str]:
    """A machine-wide lock on ``port`` (one Trainer status server at a time), once the port is free."""
    lock = (locks_dir() / f"kubetrain-trainer-{port}.lock").open("w")
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                lock.close()
                raise PeerError(f"another Trainer held port {port} for {timeout:.0f} s") from None
            time.sleep(0.5)
    if not _port_free(port):
        lock.close()
        raise PeerError(f"port {port} is in use: Trainer's status server listens there; stop what does")
    return lock


def _trainer_secret(certificates: Path) -> KubeObject:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": TRAINER_SECRET, "namespace": TRAINER_NAMESPACE},
        "data": {
            name: base64.b64encode((certificates / name).read_bytes()).decode()
            for name in ("ca.crt", "tls.crt", "tls.key")
        },
    }


def _replace_or_create(api: KubeApi, collection: str, body: KubeObject) -> None:
    name = body["metadata"]["name"]
    existing = api.get_or_none(f"{collection}/{name}")
    if existing is None:
        api.create(collection, body)
        return
    metadata = {**body["metadata"], "resourceVersion": existing["metadata"]["resourceVersion"]}
    api.replace(f"{collection}/{name}", {**body, "metadata": metadata})


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def start_trainer(
    api: KubeApi,
    kubeconfig: Path,
    namespace: str,
    log_path: Path,
    feature_gates: Mapping[str, bool] = TRAINER_FEATURE_GATES,
    binary: Path | None = None,
    timeout: float = 120.0,
    metrics_port: int | None = None,
    lock_timeout: float = 600.0,
) -> PeerProcess:
    """Kubeflow Trainer's controller manager, its webhooks serving ``namespace``, returned once its
    controllers run their workers and the API server reaches its webhooks; its /metrics (plain HTTP) on
    ``metrics_port`` (none when None). It reconciles the TrainJobs of every namespace. Its CRDs are the
    caller's to install (``TRAINER.crds_dir()``); the JobSet CRD is installed here when missing, as Trainer
    needs it."""
    binary = binary or TRAINER.ensure_built()
    install_crd_files(api, [jobset.crd_path()])
    state = log_path.with_suffix(".d")
    certificates = issue_serving_certificate(generate_pki(state / "pki"), state / "certs")
    _create_or_keep(
        api,
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TRAINER_NAMESPACE}},
    )
    _replace_or_create(api, f"/api/v1/namespaces/{TRAINER_NAMESPACE}/secrets", _trainer_secret(certificates))
    temporary = state / "tmp"
    served = temporary / "k8s-webhook-server" / "serving-certs"
    served.mkdir(parents=True, exist_ok=True)
    for name in ("tls.crt", "tls.key", "ca.crt"):
        (served / name).write_bytes((certificates / name).read_bytes())
    webhook_port, health_port = free_port(), free_port()
    config = state / "config.yaml"
    config.write_text(
        trainer_configuration(webhook_port, health_port, TRAINER_STATUS_PORT, metrics_port, feature_gates)
    )
    command = [str(binary), f"--config={config}"]
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "TMPDIR": str(temporary)}
    held: list[IO[str]] = []
    if feature_gates.get("TrainJobStatus"):
        service_account = state / "serviceaccount"
        service_account.mkdir(parents=True, exist_ok=True)
        (service_account / "token").write_text(_service_account_token(api))
        (service_account / "namespace").write_text(TRAINER_NAMESPACE)
        command = _in_private_mounts(command, service_account, certificates)
        held.append(_hold_port(TRAINER_STATUS_PORT, lock_timeout))
    with log_path.open("wb") as log:
        popen = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    process = PeerProcess("trainer", popen, log_path, held)
    configurations = trainer_webhook_configurations(
        webhook_port, (certificates / "ca.crt").read_bytes(), namespace
    )
    process._on_stop.append(lambda: webhooks.remove(api, configurations))
    try:
        _wait_for(
            lambda: (
                _healthy(f"http://127.0.0.1:{health_port}/readyz")
                and _started_workers(process.log, TRAINER_CONTROLLERS)
            ),
            timeout,
            "Trainer start",
            process,
        )
        webhooks.install(api, configurations)
        _wait_for(lambda: _webhooks_answer(api, namespace), timeout, "Trainer's webhooks answering", process)
    except BaseException:
        process.stop()
        raise
    return process


def trainer_runtimes(kubectl: Path) -> list[KubeObject]:
    """The built-in ClusterTrainingRuntimes of the release (``manifests/overlays/runtimes``, rendered by
    ``kubectl kustomize``)."""
    rendered = subprocess.run(
        [str(kubectl), "kustomize", str(TRAINER.source() / TRAINER_RUNTIMES_OVERLAY)],
        capture_output=True,
        text=True,
        check=False,
    )
    if rendered.returncode != 0:
        raise PeerError(f"kubectl kustomize {TRAINER_RUNTIMES_OVERLAY} failed: {rendered.stderr.strip()}")
    return [d for d in yaml.safe_load_all(rendered.stdout) if d and d.get("kind") == "ClusterTrainingRuntime"]


def install_trainer_runtimes(api: KubeApi, kubectl: Path) -> list[str]:
    """Create or replace the built-in ClusterTrainingRuntimes; return their names."""
    collection = "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes"
    runtimes = trainer_runtimes(kubectl)
    for runtime in runtimes:
        _replace_or_create(api, collection, runtime)
    return [runtime["metadata"]["name"] for runtime in runtimes]


def kubernetes_version(api: KubeApi) -> str:
    return str(api.get("/version")["gitVersion"])


def _main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m kubetrain.envtest.peers", description=__doc__.split("\n\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build the peers (each once per version) and print their paths")
    build.add_argument(
        "peers", nargs="*", metavar="PEER", help=f"of {[p.name for p in PEERS]}; all when none"
    )
    where = commands.add_parser("crds", help="print the directory of a peer's CRDs")
    where.add_argument("peer", choices=[p.name for p in PEERS])
    args = parser.parse_args(argv)
    by_name = {peer.name: peer for peer in PEERS}
    unknown = sorted(set(getattr(args, "peers", ())) - set(by_name))
    if unknown:
        parser.error(f"no peer {unknown}: the peers are {list(by_name)}")
    try:
        if args.command == "build":
            for name in args.peers or list(by_name):
                print(by_name[name].ensure_built())
        else:
            print(by_name[args.peer].crds_dir())
    except PeerError as error:
        raise SystemExit(str(error)) from error


if __name__ == "__main__":
    _main()
