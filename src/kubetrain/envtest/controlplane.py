"""Start, stop and inspect one envtest control plane living in a run directory.

A run directory holds everything of one instance: ``pki/``, ``etcd-data/``, ``logs/``, ``pids/``, one
kubeconfig per identity and ``state.json`` (ports, nodes, version). Ports are free loopback ports chosen at
start, so several instances (one per run directory) coexist on a machine. Processes are detached and recorded
by pid, so ``start`` can return while the control plane keeps running, and ``stop`` (any later process) ends
exactly those processes.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime
import functools
import json
import os
import re
import shutil
import socket
import ssl
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from kubetrain.envtest import audit, jobset, processes, realnode
from kubetrain.envtest.binaries import Binaries, ensure_built, ensure_node_built
from kubetrain.envtest.kubeapi import ApiError, KubeApi
from kubetrain.envtest.nodes import NodeShape, is_schedulable, register_nodes
from kubetrain.envtest.pki import ADMIN, CONTROLLER_MANAGER, SCHEDULER, Identity, Pki, generate_pki

RUN_DIR_ENV = "KUBETRAIN_ENVTEST_DIR"
STATE_FILE = "state.json"
ADMIN_KUBECONFIG = "admin.kubeconfig"
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
# Start order; stop goes in reverse, so the API server's clients go first and etcd last.
COMPONENT_ORDER = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "node-heartbeat")
LOG_TAIL_LINES = 20
# Below this a component may fail to write its files; an exit's message then says how little is left.
LOW_DISK_BYTES = 1 << 30
KLOG_FATAL = re.compile(r"F\d{4} \d\d:\d\d:\d\d")


class EnvtestError(RuntimeError):
    """The control plane did not start or is not running; the message says why and where the logs are."""


def default_run_dir() -> Path:
    """``KUBETRAIN_ENVTEST_DIR`` made absolute (the controllers started there run in directories of their
    own, so a relative path in their arguments would name nothing), else the user's state directory."""
    override = os.environ.get(RUN_DIR_ENV)
    if override:
        return Path(override).resolve()
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "kubetrain" / "envtest"


@dataclass(frozen=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int


@dataclass(frozen=True)
class EnvtestOptions:
    nodes: int = 2
    node_shape: NodeShape = field(default_factory=NodeShape)
    ready_timeout_seconds: float = 60.0
    real_node: bool = False
    """Add one real node (kubelet, containerd, CoreDNS; see realnode.py) beside the fake ones."""
    real_nodes: int = 0
    """Add this many real nodes (``real-node-0``…), each with its own containerd, kubelet, bridge and pod
    subnet; ``real_node`` is the same as 1."""
    admission_plugins: tuple[str, ...] = ()
    """Admission plugins kube-apiserver enables beyond its defaults (e.g.
    OwnerReferencesPermissionEnforcement, on by default in OpenShift)."""
    audit_policy: str | None = None
    """An audit policy (YAML): kube-apiserver then logs what it selects in ``logs/audit.log`` (see audit.py;
    ``audit.WRITES`` logs every write)."""
    jobset: bool = False
    """Run the JobSet controller (see jobset.py) with its CRD and webhooks, as a cluster with JobSet has."""

    @property
    def real_node_count(self) -> int:
        return max(self.real_nodes, 1 if self.real_node else 0)


@dataclass(frozen=True)
class EnvtestState:
    """What ``start`` wrote to ``state.json``: enough for ``status``, ``stop`` and the test fixtures."""

    run_dir: Path
    version: str
    server: str
    ports: Ports
    nodes: list[str]
    started_at: float
    start_seconds: dict[str, float]
    real_nodes: list[str] = field(default_factory=list)
    jobset: bool = False
    stopped_nodes: list[str] = field(default_factory=list)
    """Real nodes ``envtest node stop`` stopped (a node loss) and no ``node start`` brought back yet."""

    @property
    def real_node(self) -> str | None:
        """The first real node (the one of ``--real-node``), if any."""
        return self.real_nodes[0] if self.real_nodes else None

    @property
    def components(self) -> tuple[str, ...]:
        control_plane = tuple(name for name in COMPONENT_ORDER if self.nodes or name != "node-heartbeat")
        node: tuple[str, ...] = ()
        for name in self.real_nodes:
            if name not in self.stopped_nodes:
                node += tuple(map(realnode.RealNode.named(name).process, realnode.NODE_COMPONENTS))
        if self.real_nodes:
            node += (realnode.COREDNS,)
        return control_plane + node + ((jobset.PROCESS,) if self.jobset else ())

    @property
    def kubeconfig(self) -> Path:
        return self.run_dir / ADMIN_KUBECONFIG

    def to_json(self) -> str:
        data = asdict(self)
        data["run_dir"] = str(self.run_dir)
        return json.dumps(data, indent=2) + "\n"

    @classmethod
    def read(cls, run_dir: Path) -> EnvtestState | None:
        try:
            data = json.loads((run_dir / STATE_FILE).read_text())
        except (OSError, ValueError):
            return None
        return cls(
            run_dir=Path(data["run_dir"]),
            version=data["version"],
            server=data["server"],
            ports=Ports(**data["ports"]),
            nodes=list(data["nodes"]),
            started_at=float(data["started_at"]),
            start_seconds=dict(data["start_seconds"]),
            # A state.json from before several real nodes names one as "real_node".
            real_nodes=list(data.get("real_nodes") or ([data["real_node"]] if data.get("real_node") else [])),
            jobset=bool(data.get("jobset", False)),
            stopped_nodes=list(data.get("stopped_nodes", [])),
        )


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    pid: int | None
    running: bool
    peak_rss_bytes: int | None
    log: Path | None


@dataclass(frozen=True)
class EnvtestStatus:
    run_dir: Path
    state: EnvtestState | None
    components: list[ComponentStatus]
    api_ready: bool

    @property
    def running(self) -> bool:
        return self.state is not None and self.api_ready and all(c.running for c in self.components)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def choose_ports() -> Ports:
    chosen: set[int] = set()
    while len(chosen) < 5:
        chosen.add(free_port())
    etcd_client, etcd_peer, apiserver, controller_manager, scheduler = sorted(chosen)
    return Ports(etcd_client, etcd_peer, apiserver, controller_manager, scheduler)


def write_kubeconfig(path: Path, server: str, pki: Pki, identity: Identity) -> None:
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "envtest",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(pki.ca_cert.read_bytes()).decode(),
                },
            }
        ],
        "users": [{"name": identity.name, "user": {"token": pki.token(identity)}}],
        "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": identity.name}}],
        "current-context": "envtest",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)


def etcd_args(binaries: Binaries, run_dir: Path, ports: Ports) -> list[str]:
    client = f"http://127.0.0.1:{ports.etcd_client}"
    peer = f"http://127.0.0.1:{ports.etcd_peer}"
    return [
        str(binaries.etcd),
        "--name=envtest",
        f"--data-dir={run_dir / 'etcd-data'}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=envtest={peer}",
        "--initial-cluster-state=new",
        # A throwaway test store: durability buys nothing and fsync dominates write latency.
        "--unsafe-no-fsync",
        "--logger=zap",
        "--log-level=warn",
    ]


def apiserver_args(binaries: Binaries, pki: Pki, ports: Ports, real_node: bool = False) -> list[str]:
    host = realnode.NODE_IP if real_node else "127.0.0.1"
    server = f"https://{host}:{ports.apiserver}"
    args = [
        str(binaries.kube_apiserver),
        f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
        f"--bind-address={host}",
        f"--secure-port={ports.apiserver}",
        f"--advertise-address={host}",
        # The "kubernetes" Endpoints may not hold a loopback address; nothing in the tests needs them.
        "--endpoint-reconciler-type=none",
        f"--tls-cert-file={pki.serving_cert}",
        f"--tls-private-key-file={pki.serving_key}",
        f"--client-ca-file={pki.ca_cert}",
        f"--token-auth-file={pki.token_file}",
        "--authorization-mode=RBAC",
        f"--service-account-issuer={server}",
        f"--api-audiences={server}",
        f"--service-account-key-file={pki.service_account_pub}",
        f"--service-account-signing-key-file={pki.service_account_key}",
        f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
        "--allow-privileged=true",
        # ServiceAccount: pods would otherwise race the controller-manager creating each new namespace's
        # default ServiceAccount. TaintNodesByCondition: it taints every new Node not-ready until the
        # node-lifecycle controller notices it is Ready (seconds); the fake nodes are Ready from the start.
        "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
    ]
    if real_node:
        kubelet_cert, kubelet_key = realnode.apiserver_kubelet_client(pki)
        args = [arg for arg in args if not arg.startswith(("--disable-admission-plugins", "--authorization"))]
        args += [
            # Real pods mount a projected ServiceAccount token (the operator runs in-cluster), and the
            # kubelet authenticates as system:node:<name>, which the Node authorizer (not RBAC) admits.
            "--authorization-mode=Node,RBAC",
            "--disable-admission-plugins=TaintNodesByCondition",
            f"--kubelet-client-certificate={kubelet_cert}",
            f"--kubelet-client-key={kubelet_key}",
            "--kubelet-preferred-address-types=InternalIP",
        ]
    return args


# Real nodes are watched as upstream watches them (kube-controller-manager's default since v1.32): a stopped
# node's Ready turns Unknown this long after its kubelet's last lease renewal (every 10 s).
REAL_NODE_MONITOR_GRACE = "50s"
# Fake nodes only: belt and braces with the lease heartbeat, a node whose heartbeat lapses under load is not
# tainted away for an hour.
FAKE_NODE_MONITOR_GRACE = "1h"


def controller_manager_args(
    binaries: Binaries, run_dir: Path, pki: Pki, ports: Ports, real_nodes: bool = False
) -> list[str]:
    return [
        str(binaries.kube_controller_manager),
        f"--kubeconfig={run_dir / 'controller-manager.kubeconfig'}",
        "--bind-address=127.0.0.1",
        f"--secure-port={ports.controller_manager}",
        "--leader-elect=false",
        # With the default client rate limit (20 qps) starting ~40 controllers, each first fetching its own
        # ServiceAccount token, takes about 5 s; loopback has no one to protect.
        "--kube-api-qps=500",
        "--kube-api-burst=1000",
        # Each controller gets its own ServiceAccount; the shared controller-manager identity may only
        # list/watch.
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki.service_account_key}",
        f"--root-ca-file={pki.ca_cert}",
        f"--node-monitor-grace-period={REAL_NODE_MONITOR_GRACE if real_nodes else FAKE_NODE_MONITOR_GRACE}",
        # Notice Ready fake nodes quickly, to lift the not-ready taint new nodes are created with.
        "--node-monitor-period=1s",
    ]


def scheduler_args(binaries: Binaries, run_dir: Path, ports: Ports) -> list[str]:
    return [
        str(binaries.kube_scheduler),
        f"--kubeconfig={run_dir / 'scheduler.kubeconfig'}",
        "--bind-address=127.0.0.1",
        f"--secure-port={ports.scheduler}",
        "--leader-elect=false",
    ]


def heartbeat_args(run_dir: Path, nodes: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "kubetrain.envtest.nodes",
        f"--kubeconfig={run_dir / ADMIN_KUBECONFIG}",
        *nodes,
    ]


def _log_tail(log: Path) -> str:
    """The log's last lines, after the lines that say why a Go process died when they came earlier (a panic's
    stack trace outgrows the tail: CI once showed etcd's without the message), and the free space where the
    log is when that is nearly none (what made etcd panic creating its write-ahead log)."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    tail = lines[-LOG_TAIL_LINES:]
    causes = [line for line in lines[:-LOG_TAIL_LINES] if _is_fatal(line)]
    text = "\n".join([*causes, *(["..."] if causes else []), *tail])
    free = shutil.disk_usage(log.parent).free
    if free < LOW_DISK_BYTES:
        text += f"\n(only {free // 2**20} MiB free on the filesystem of {log.parent})"
    return text


def _is_fatal(line: str) -> bool:
    """A Go runtime panic or fatal error, zap's panic or fatal entry (etcd), klog's fatal line (``F1128``)."""
    return (
        line.startswith(("panic:", "fatal error:"))
        or any(f'"level":"{level}"' in line for level in ("panic", "fatal"))
        or KLOG_FATAL.match(line) is not None
    )


def _wait_for(
    what: str, ready: Callable[[], bool], record: processes.ProcessRecord | None, timeout: float
) -> float:
    """Poll ``ready`` until true; fail early, with the log tail, if the process died. Returns the seconds
    taken."""
    started = time.monotonic()
    deadline = started + timeout
    while True:
        # Not answering yet (connection refused, 5xx) just means "not ready"; keep polling.
        with contextlib.suppress(httpx.HTTPError, ApiError, OSError):
            if ready():
                return time.monotonic() - started
        if record is not None and not record.is_running():
            raise EnvtestError(
                f"{what}: the process exited; last lines of {record.log}:\n{_log_tail(record.log)}"
            )
        if time.monotonic() > deadline:
            detail = f"; last lines of {record.log}:\n{_log_tail(record.log)}" if record else ""
            raise EnvtestError(f"{what}: not ready after {timeout:.0f} s{detail}")
        time.sleep(0.05)


def _http_ok(url: str, **kwargs: Any) -> bool:
    return httpx.get(url, timeout=2.0, **kwargs).status_code == 200


def start(
    run_dir: Path,
    options: EnvtestOptions | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> EnvtestState:
    """Start a fresh control plane in ``run_dir`` (building binaries first if needed) and wait until it is
    usable: API ready, controllers working, nodes schedulable. An instance already running there is
    returned as it is."""
    options = options or EnvtestOptions()
    current = status(run_dir)
    if current.running and current.state is not None:
        log(f"envtest already running in {run_dir}")
        if options.jobset and not current.state.jobset:
            jobset.start(run_dir, current.state.kubeconfig, options.ready_timeout_seconds)
            added = dataclasses.replace(current.state, jobset=True)
            (run_dir / STATE_FILE).write_text(added.to_json())
            return added
        return current.state
    stop(run_dir)  # leftovers of a crashed or half-started instance

    real_nodes = realnode.real_nodes(options.real_node_count) if options.real_node_count else []
    if real_nodes:
        reasons = realnode.cannot_run_reasons()
        if reasons:
            raise EnvtestError("a real node cannot run on this machine: " + "; ".join(reasons))
    binaries = ensure_built(log=log)
    node_binaries = ensure_node_built(log=log) if real_nodes else None
    if options.jobset:
        jobset.ensure_built()
    started_at = time.time()
    clock = time.monotonic()
    _reset_run_dir(run_dir)
    host = "127.0.0.1"
    if real_nodes:
        try:
            for node in real_nodes:
                realnode.clear_stale_node(log, node)
        except realnode.RealNodeError as error:
            raise EnvtestError(str(error)) from error
        for node in real_nodes:
            node.paths(run_dir).root.mkdir(parents=True)  # stop tears the node down when this exists
        try:
            realnode.setup_network(run_dir, real_nodes)
        except BaseException:
            stop(run_dir)
            raise
        host = realnode.NODE_IP
    pki = generate_pki(run_dir / "pki", extra_ips=(realnode.NODE_IP,) if real_nodes else ())
    ports = choose_ports()
    server = f"https://{host}:{ports.apiserver}"
    for identity, filename in (
        (ADMIN, ADMIN_KUBECONFIG),
        (SCHEDULER, "scheduler.kubeconfig"),
        (CONTROLLER_MANAGER, "controller-manager.kubeconfig"),
    ):
        write_kubeconfig(run_dir / filename, server, pki, identity)
    timings: dict[str, float] = {}
    try:
        timings.update(_start_components(run_dir, binaries, pki, ports, options, host))
        with KubeApi.from_kubeconfig(run_dir / ADMIN_KUBECONFIG) as api:
            if node_binaries is not None:
                realnode.route_kubernetes_service(ports.apiserver)
                timings.update(
                    realnode.start(
                        run_dir,
                        real_nodes,
                        node_binaries,
                        pki,
                        server,
                        lambda what, ready, record: _wait_for(
                            what, ready, record, options.ready_timeout_seconds
                        ),
                        lambda name: _node_ready(api.get(f"/api/v1/nodes/{name}")),
                        log,
                    )
                )
                for node in real_nodes:
                    # What the node IPAM controller would set: the subnet its bridge hands out.
                    api.patch(
                        f"/api/v1/nodes/{node.name}",
                        {"spec": {"podCIDR": node.pod_subnet, "podCIDRs": [node.pod_subnet]}},
                    )
            nodes = register_nodes(api, options.nodes, options.node_shape, binaries.version)
            # Nothing to renew without fake nodes (--real-node alone): no heartbeat process then.
            heartbeat = (
                processes.spawn(run_dir, "node-heartbeat", heartbeat_args(run_dir, nodes)) if nodes else None
            )
            timings["nodes-schedulable"] = _wait_for(
                "fake nodes Ready and untainted",
                lambda: all(is_schedulable(api.get(f"/api/v1/nodes/{name}")) for name in nodes),
                heartbeat,
                options.ready_timeout_seconds,
            )
            timings["controllers-working"] = _wait_for(
                "controller-manager creating the default ServiceAccount",
                lambda: api.exists("/api/v1/namespaces/default/serviceaccounts/default"),
                processes.read_record(run_dir, "kube-controller-manager"),
                options.ready_timeout_seconds,
            )
        if options.jobset:
            timings["jobset"] = jobset.start(
                run_dir, run_dir / ADMIN_KUBECONFIG, options.ready_timeout_seconds
            )
    except BaseException:
        stop(run_dir)
        raise
    timings["total"] = time.monotonic() - clock
    state = EnvtestState(
        run_dir=run_dir,
        version=binaries.version,
        server=server,
        ports=ports,
        nodes=nodes,
        started_at=started_at,
        start_seconds={name: round(seconds, 3) for name, seconds in timings.items()},
        real_nodes=[node.name for node in real_nodes],
        jobset=options.jobset,
    )
    (run_dir / STATE_FILE).write_text(state.to_json())
    return state


def _node_ready(node: dict[str, Any], since: datetime.datetime | None = None) -> bool:
    """Whether the Node's Ready condition is True (with a heartbeat at ``since`` or later, when given)."""
    conditions = node.get("status", {}).get("conditions") or []
    return any(
        c["type"] == "Ready"
        and c["status"] == "True"
        and (since is None or datetime.datetime.fromisoformat(c["lastHeartbeatTime"]) >= since)
        for c in conditions
    )


def _back(node: dict[str, Any], since: datetime.datetime) -> bool:
    return _node_ready(node, since) and is_schedulable(node)


def _reset_run_dir(run_dir: Path) -> None:
    for name in ("etcd-data", "pki", "pids", "commands", "logs", STATE_FILE, audit.POLICY_FILE):
        path = run_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "etcd-data").mkdir(mode=0o700)


def _start_components(
    run_dir: Path, binaries: Binaries, pki: Pki, ports: Ports, options: EnvtestOptions, host: str
) -> dict[str, float]:
    timeout = options.ready_timeout_seconds
    timings: dict[str, float] = {}
    etcd = processes.spawn(run_dir, "etcd", etcd_args(binaries, run_dir, ports))
    timings["etcd"] = _wait_for(
        "etcd /health", lambda: _http_ok(f"http://127.0.0.1:{ports.etcd_client}/health"), etcd, timeout
    )

    apiserver_argv = apiserver_args(binaries, pki, ports, options.real_node_count > 0)
    if options.admission_plugins:
        apiserver_argv.append(f"--enable-admission-plugins={','.join(options.admission_plugins)}")
    if options.audit_policy is not None:
        apiserver_argv += audit.apiserver_args(run_dir, options.audit_policy)
    apiserver = processes.spawn(run_dir, "kube-apiserver", apiserver_argv)
    admin = {"Authorization": f"Bearer {pki.token(ADMIN)}"}
    timings["kube-apiserver"] = _wait_for(
        "kube-apiserver /readyz",
        lambda: _http_ok(
            f"https://{host}:{ports.apiserver}/readyz",
            headers=admin,
            verify=ssl.create_default_context(cafile=pki.ca_cert),
        ),
        apiserver,
        timeout,
    )

    # Both only need the API server; start them together and wait for each.
    manager = processes.spawn(
        run_dir,
        "kube-controller-manager",
        controller_manager_args(binaries, run_dir, pki, ports, options.real_node_count > 0),
    )
    scheduler = processes.spawn(run_dir, "kube-scheduler", scheduler_args(binaries, run_dir, ports))
    # They serve /healthz with a self-signed certificate of their own; only liveness matters here.
    timings["kube-controller-manager"] = _wait_for(
        "kube-controller-manager /healthz",
        lambda: _http_ok(f"https://127.0.0.1:{ports.controller_manager}/healthz", verify=False),
        manager,
        timeout,
    )
    timings["kube-scheduler"] = _wait_for(
        "kube-scheduler /healthz",
        lambda: _http_ok(f"https://127.0.0.1:{ports.scheduler}/healthz", verify=False),
        scheduler,
        timeout,
    )
    return timings


def stop(run_dir: Path) -> list[str]:
    """Stop every process this run directory recorded, clients first; return the names of those that were
    running."""
    stopped: list[str] = []
    # The node first (its kubelet is an API client); only a run directory that started one owns the
    # host's bridge and DNAT rule.
    real_node = bool(realnode.started_nodes(run_dir))
    if real_node:
        stopped += realnode.teardown(run_dir)
    # Processes started beside the control plane (a second scheduler) are its clients too.
    add_ons = [name for name in processes.recorded(run_dir) if name not in COMPONENT_ORDER]
    stopped += [name for name in add_ons if processes.terminate(run_dir, name)]
    stopped += [name for name in reversed(COMPONENT_ORDER) if processes.terminate(run_dir, name)]
    if real_node:
        realnode.remove_network(run_dir)
    (run_dir / STATE_FILE).unlink(missing_ok=True)
    return stopped


def _real_node_of(run_dir: Path, name: str) -> tuple[EnvtestState, realnode.RealNode]:
    state = EnvtestState.read(run_dir)
    if state is None:
        raise EnvtestError(f"no envtest was started in {run_dir}")
    if name not in state.real_nodes:
        have = ", ".join(state.real_nodes) or "none (start with --real-nodes N)"
        raise EnvtestError(f"{name} is not a real node of the envtest in {run_dir}; its real nodes: {have}")
    return state, realnode.RealNode.named(name)


def stop_node(run_dir: Path, name: str) -> list[str]:
    """Fault injection: lose one real node (see ``realnode.stop_node``). Its Node object stays, so the node
    lifecycle controller marks it ``Unknown`` (NotReady) once ``REAL_NODE_MONITOR_GRACE`` has passed without
    a lease renewal, and taints it unreachable. Returns the processes that were running."""
    state, node = _real_node_of(run_dir, name)
    stopped = realnode.stop_node(run_dir, node)
    if name not in state.stopped_nodes:
        changed = dataclasses.replace(state, stopped_nodes=[*state.stopped_nodes, name])
        (run_dir / STATE_FILE).write_text(changed.to_json())
    return stopped


def start_node(run_dir: Path, name: str, timeout: float = 60.0) -> float:
    """Bring a stopped real node back (same directories, as after a reboot) and wait until its Node is Ready
    again; returns the seconds that took."""
    state, node = _real_node_of(run_dir, name)
    if name not in state.stopped_nodes:
        raise EnvtestError(f"{name} is running; stop it first (`kubetrain envtest node stop {name}`)")
    # Whole seconds, as the kubelet's heartbeat times are: only a heartbeat of the restarted kubelet counts
    # (a node stopped moments ago still shows the Ready its old kubelet posted).
    since = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    with KubeApi.from_kubeconfig(state.kubeconfig) as api:
        seconds = realnode.restart_node(
            run_dir,
            node,
            lambda what, ready, record: _wait_for(what, ready, record, timeout),
            # Back means schedulable: Ready, and the unreachable taints the node controller put on it lifted.
            lambda node_name: _back(api.get(f"/api/v1/nodes/{node_name}"), since),
        )
    changed = dataclasses.replace(state, stopped_nodes=[n for n in state.stopped_nodes if n != name])
    (run_dir / STATE_FILE).write_text(changed.to_json())
    return seconds


def status(run_dir: Path) -> EnvtestStatus:
    state = EnvtestState.read(run_dir)
    components: list[ComponentStatus] = []
    for name in state.components if state is not None else COMPONENT_ORDER:
        record = processes.read_record(run_dir, name)
        if record is None:
            components.append(ComponentStatus(name, None, False, None, None))
        else:
            components.append(
                ComponentStatus(name, record.pid, record.is_running(), record.peak_rss_bytes(), record.log)
            )
    api_ready = False
    if state is not None:
        try:
            with KubeApi.from_kubeconfig(state.kubeconfig) as api:
                api_ready = api.is_ok("/readyz")
        except (httpx.HTTPError, ApiError, OSError, ValueError):
            api_ready = False
    return EnvtestStatus(run_dir, state, components, api_ready)


class GarbageCollectionProbe:
    """A readiness check for a restarted controller-manager: its garbage collector collects again (it needs
    a while to rediscover and resync every resource, longer than /healthz says)."""

    def __init__(self, kubeconfig: Path) -> None:
        self._kubeconfig = kubeconfig
        self._owned: str | None = None

    def __call__(self) -> bool:
        configmaps = "/api/v1/namespaces/kube-system/configmaps"
        with KubeApi.from_kubeconfig(self._kubeconfig) as api:
            if self._owned is None:
                owner = api.create(configmaps, {"metadata": {"generateName": "envtest-gc-probe-"}})
                owned = api.create(
                    configmaps,
                    {
                        "metadata": {
                            "generateName": "envtest-gc-probe-owned-",
                            "ownerReferences": [
                                {
                                    "apiVersion": "v1",
                                    "kind": "ConfigMap",
                                    "name": owner["metadata"]["name"],
                                    "uid": owner["metadata"]["uid"],
                                }
                            ],
                        }
                    },
                )
                self._owned = f"{configmaps}/{owned['metadata']['name']}"
                api.delete(f"{configmaps}/{owner['metadata']['name']}")
            return not api.exists(self._owned)


def _component_ready(run_dir: Path, state: EnvtestState, name: str) -> Callable[[], bool]:
    ports = state.ports
    if name == "etcd":
        return lambda: _http_ok(f"http://127.0.0.1:{ports.etcd_client}/health")
    if name == "kube-apiserver":

        def api_ready() -> bool:
            with KubeApi.from_kubeconfig(state.kubeconfig) as api:
                return api.is_ok("/readyz")

        return api_ready
    if name == "kube-controller-manager":
        probe = GarbageCollectionProbe(state.kubeconfig)
        return lambda: (
            _http_ok(f"https://127.0.0.1:{ports.controller_manager}/healthz", verify=False) and probe()
        )
    if name == "kube-scheduler":
        return lambda: _http_ok(f"https://127.0.0.1:{ports.scheduler}/healthz", verify=False)
    if name == "node-heartbeat":
        return lambda: True
    raise ValueError(f"unknown component {name!r}; one of {', '.join(COMPONENT_ORDER)}")


def _listening_ports(ports: Ports, name: str) -> list[int]:
    return {
        "etcd": [ports.etcd_client, ports.etcd_peer],
        "kube-apiserver": [ports.apiserver],
        "kube-controller-manager": [ports.controller_manager],
        "kube-scheduler": [ports.scheduler],
    }.get(name, [])


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As Go's listeners do: connections of the previous process lingering in TIME_WAIT do not count.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def stop_component(run_dir: Path, name: str, crash: bool = False) -> bool:
    """Fault injection: stop one component; True if it ran. ``crash`` kills it at once (SIGKILL), as a crash
    would; otherwise it shuts down gracefully (an API server with open watches takes up to 10 s)."""
    if name not in COMPONENT_ORDER:
        raise ValueError(f"unknown component {name!r}; one of {', '.join(COMPONENT_ORDER)}")
    processes.remember_command(run_dir, name)
    return processes.terminate(run_dir, name, grace_seconds=0 if crash else 10.0)


def start_component(run_dir: Path, name: str, timeout: float = 60.0) -> float:
    """Start a stopped component again, same flags and ports, and wait until it is ready; returns seconds.
    etcd keeps its data, so objects survive an etcd or API server restart."""
    state = EnvtestState.read(run_dir)
    if state is None:
        raise EnvtestError(f"no envtest was started in {run_dir}")
    ready = _component_ready(run_dir, state, name)
    for port in _listening_ports(state.ports, name):
        _wait_for(f"port {port} of {name} to be free", functools.partial(_port_free, port), None, timeout)
    record = processes.respawn(run_dir, name)
    return _wait_for(f"{name} after a restart", ready, record, timeout)


def restart_component(run_dir: Path, name: str, crash: bool = False, timeout: float = 60.0) -> float:
    """Fault injection: stop (or crash) and start one component; returns the seconds until it was ready."""
    stop_component(run_dir, name, crash)
    return start_component(run_dir, name, timeout)


def restart_controllers(run_dir: Path, timeout: float = 60.0) -> float:
    """Fresh kube-scheduler and controller-manager, ready (the garbage collector collecting) in seconds.

    After an API server outage both recover only through their clients' backoff: seen here, the scheduler
    bound nothing for over 30 s (its watches were refused while the new API server's RBAC warmed up) and
    the garbage collector stalled until its 30-s resync. Tests that restart the API server call this
    afterwards so later tests do not inherit that."""
    started = time.monotonic()
    for name in ("kube-scheduler", "kube-controller-manager"):
        restart_component(run_dir, name, timeout=timeout)
    return time.monotonic() - started
