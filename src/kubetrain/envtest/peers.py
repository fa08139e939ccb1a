"""The operators kubetrain is held to, run beside it on an envtest: its peers.

Two peers, each built from its Go module pinned in ``tools/<name>`` of the checkout (``envtest.gotool``,
cached in ``~/.cache/kubetrain/<name>/<version>/``):

- upstream's **training-operator** (``kubeflow.org/v1``: PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob and
  the v1 MPIJob);
- the **mpi-operator**, which defines MPIJob ``kubeflow.org/v2beta1``.

Each runs out of cluster as its Deployment would run it, less the kubelet, watching one namespace. The
training-operator needs what its Pod would have: its namespace (``MY_POD_NAMESPACE``), an empty Secret
``training-operator-webhook-cert`` that its cert rotator fills, a ValidatingWebhookConfiguration whose one
webhook matches no resource (the rotator injects its CA there; the API server never calls it, as there is no
Service to reach the operator through), and the Secret's certificate in
``/tmp/k8s-webhook-server/serving-certs/`` as a volume mount would put it (a path upstream does not let one
change: starts are serialised under a lock so two at once never swap certificates). The mpi-operator takes a
leader-election Lease in a namespace of its own and always serves its health check on port 8080 (a constant
in v0.6.0): one runs on a machine at a time, under a lock.

The conformance tier (``tests/peers``) and ``bench/operator_side_by_side.py`` run the peers through this
module. ``python -m kubetrain.envtest.peers build`` builds both (``make peers-build``).
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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from kubetrain.envtest.gotool import GoTool, GoToolError
from kubetrain.envtest.kubeapi import ApiError, KubeApi, KubeObject

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
LOCKS = Path("/tmp")

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
        pattern = re.compile(
            rf"^\s*(?:require\s+)?{re.escape(self.module)}\s+(v\d+\.\d+\.\d+)\s*$", re.MULTILINE
        )
        match = pattern.search(go_mod.read_text())
        if match is None:
            raise PeerError(f"{go_mod}: no 'require {self.module} vX.Y.Z' line")
        return match.group(1)

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
PEERS = (TRAINING_OPERATOR, MPI_OPERATOR)


# --- running ---------------------------------------------------------------------------------------------


@dataclass
class PeerProcess:
    """A peer operator running in the background, its output in ``log_path``."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    _held: list[IO[str]] = field(default_factory=list)
    """Locks held while it runs (the mpi-operator's port)."""

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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def _locked(name: str) -> Iterator[IO[str]]:
    with (LOCKS / name).open("w") as lock:
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


def _mount_certificates(api: KubeApi, namespace: str, process: PeerProcess, timeout: float = 60) -> None:
    """Copy the Secret the rotator filled to the directory upstream reads its certificate from, as the kubelet
    would mount it."""
    path = f"/api/v1/namespaces/{namespace}/secrets/{WEBHOOK_SECRET}"

    def filled() -> bool:
        data = api.get(path).get("data") or {}
        if not (data.get("tls.crt") and data.get("tls.key")):
            return False
        CERT_DIR.mkdir(parents=True, exist_ok=True)
        for key in ("tls.crt", "tls.key", "ca.crt"):
            if key in data:
                (CERT_DIR / key).write_bytes(base64.b64decode(data[key]))
        return True

    _wait_for(filled, timeout, "upstream's cert rotator filling its Secret", process)


def _started_workers(log: str, controllers: Sequence[str]) -> bool:
    """Whether the log says each controller's workers run (controller-runtime's ``Starting workers`` line)."""
    lines = [line for line in log.splitlines() if "Starting workers" in line]
    return all(any(f'"controller": "{name}"' in line for line in lines) for name in controllers)


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
    # The certificate directory is one for the machine: one start at a time, until its rotator has checked it.
    with _locked("kubetrain-training-operator-certs.lock"):
        for stale in CERT_DIR.glob("*"):
            stale.unlink()
        with log_path.open("wb") as log:
            popen = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        process = PeerProcess("training-operator", popen, log_path)
        _mount_certificates(api, namespace, process)
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
    lock = (LOCKS / "kubetrain-mpi-operator-8080.lock").open("w")
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
