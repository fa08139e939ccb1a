"""Real nodes for the envtest control plane: per node containerd + runc + a CNI bridge and a kubelet; one
CoreDNS for them all.

Everything runs as plain host processes recorded like the control plane's (``pids/``, ``logs/``), and every
piece of host state it makes is named here so ``teardown`` removes exactly that. Node ``i``
(``real-node-i``, see ``RealNode``) gets:

- the bridge ``kt<i>`` with the node address 10.244.<i>.1/24: its pods' gateway and the node's InternalIP.
  Made before the API server starts, because in real-node mode the API server listens on node 0's address
  (pods cannot reach the host's 127.0.0.1). Pods of different nodes reach each other through the host's
  routing between the bridges (one iptables FORWARD rule lets pod-network traffic through whatever the
  chain's policy); no address outside the machine is involved.
- containerd's root, state (network namespaces included), runc's state, the kubelet's root and pod logs,
  CNI config and IPAM state: all under ``<run dir>/node`` (node 0) or ``<run dir>/node-<i>``; the mounts
  under it are unmounted on stop.
- a cgroup parent of its own, ``kubetrain-real-node-<i>`` in each cgroup v1 hierarchy (the kubelet's
  ``cgroupRoot``; its ``kubepods`` is under it): emptied and removed when that node stops, so stopping one
  node kills only that node's pods.

Once for all nodes, on node 0's address:

- one iptables DNAT rule (nat PREROUTING, from the pod network): the ``kubernetes`` Service ClusterIP
  10.0.0.1:443 to the API server. In-cluster clients (the operator) find the API server through that
  ClusterIP; it is the only ClusterIP anything here needs (training jobs use headless services, which are
  DNS only), so one rule does what kube-proxy would, without its chains to clean up or a binary to build.
- CoreDNS on 10.244.0.1:53 as a host process (every kubelet's ``clusterDNS``): a pod of its own would need
  the pod network to exist before DNS does, and the node's address is stable where a pod IP is not.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import yaml

from kubetrain.envtest import host_changes, imagecache, processes
from kubetrain.envtest.binaries import NodeBinaries, cache_root
from kubetrain.envtest.pki import SERVICE_IP, Pki, issue_client_certificate

REAL_NODE_LABEL = "kubetrain.dev/real-node"
POD_NETWORK = "10.244.0.0/16"
NODE_PREFIX = 24
MAX_REAL_NODES = 16
KUBELET_PORT = 10250
CLUSTER_DOMAIN = "cluster.local"
PAUSE_IMAGE = "localhost/kubetrain/pause:3.10"
# Per node, in start order; stop goes in reverse. CoreDNS (one for all) starts after node 0's containerd.
NODE_COMPONENTS = ("containerd", "kubelet")
COREDNS = "coredns"
CGROUP_ROOT = Path("/sys/fs/cgroup")
IPTABLES_COMMENT = "kubetrain envtest real node: kubernetes Service"
FORWARD_COMMENT = "kubetrain envtest real nodes: pod network"
CHECKOUT = Path(__file__).resolve().parents[3]
REQUIRED_COMMANDS = ("containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "ip", "podman")
CNI_PLUGINS = Path("/usr/lib/cni")
CNI_CACHE = Path("/var/lib/cni")
"""libcni's cache, a fixed path: each pod's results, named ``<network>-<sandbox id>-<interface>``."""


def host_record() -> Path:
    """The sysctls and fixed directories the nodes' components change, as they were before the start
    (``host_changes``), put back by ``remove_network``: one for the machine, not one per run directory, as
    real nodes run one cluster at a time and a directory one run's stop could not remove yet (a shim's
    socket directory) is the next run's to remove."""
    return cache_root().parent / "real-node-host-before.json"


@dataclass(frozen=True)
class RealNode:
    """Real node ``index``: its name, bridge, addresses, cgroup parent and process names, all derived from the
    index so that a stop (or a later start that finds them left behind) names exactly what a start made."""

    index: int

    @classmethod
    def named(cls, name: str) -> RealNode:
        prefix = "real-node-"
        number = name.removeprefix(prefix)
        if not name.startswith(prefix) or not number.isdigit() or not 0 <= int(number) < MAX_REAL_NODES:
            raise RealNodeError(
                f"{name!r} is not a real node's name: real-node-<i> with i from 0 to {MAX_REAL_NODES - 1}"
            )
        return cls(int(number))

    @property
    def name(self) -> str:
        return f"real-node-{self.index}"

    @property
    def bridge(self) -> str:
        return f"kt{self.index}"

    @property
    def pod_subnet(self) -> str:
        return f"10.244.{self.index}.0/{NODE_PREFIX}"

    @property
    def address(self) -> str:
        """The bridge's address: the node's InternalIP, its kubelet's, and its pods' gateway."""
        return f"10.244.{self.index}.1"

    @property
    def cgroup_parent(self) -> str:
        """The kubelet's ``cgroupRoot``: a directory of that name in every cgroup hierarchy."""
        return f"kubetrain-{self.name}"

    def process(self, component: str) -> str:
        """The recorded process name of one of the node's components: node 0's keep their plain names."""
        return component if self.index == 0 else f"{component}-{self.index}"

    def paths(self, run_dir: Path) -> NodePaths:
        return NodePaths(run_dir / ("node" if self.index == 0 else f"node-{self.index}"))


def real_nodes(count: int) -> list[RealNode]:
    if not 1 <= count <= MAX_REAL_NODES:
        raise RealNodeError(f"--real-nodes {count}: from 1 to {MAX_REAL_NODES} real nodes")
    return [RealNode(index) for index in range(count)]


FIRST = RealNode(0)
# Node 0 hosts what is one per cluster: the API server's address, CoreDNS, the kubernetes Service's target.
NODE_NAME = FIRST.name
BRIDGE = FIRST.bridge
POD_SUBNET = FIRST.pod_subnet
NODE_IP = FIRST.address


class RealNodeError(RuntimeError):
    """The real node cannot start here or did not come up; the message says why."""


@dataclass(frozen=True)
class NodePaths:
    root: Path

    @property
    def socket_dir(self) -> Path:
        """Unix socket paths are limited to 104 bytes (containerd adds ``.ttrpc``) and run directories under
        pytest's tmp_path exceed that: the sockets go to a short directory named after the run directory."""
        digest = hashlib.sha256(str(self.root).encode()).hexdigest()[:12]
        return Path("/run/kubetrain") / digest

    @property
    def containerd_socket(self) -> Path:
        return self.socket_dir / "containerd.sock"

    @property
    def containerd_root(self) -> Path:
        return self.root / "containerd" / "root"

    @property
    def containerd_config(self) -> Path:
        return self.root / "containerd.toml"

    @property
    def cni_conf_dir(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def kubelet_root(self) -> Path:
        return self.root / "kubelet"

    @property
    def pod_logs(self) -> Path:
        return self.root / "pods-logs"

    @property
    def kubelet_config(self) -> Path:
        return self.root / "kubelet-config.yaml"

    @property
    def kubelet_kubeconfig(self) -> Path:
        return self.root / "kubelet.kubeconfig"

    @property
    def corefile(self) -> Path:
        return self.root / "Corefile"


def node_paths(run_dir: Path, node: RealNode = FIRST) -> NodePaths:
    return node.paths(run_dir)


def started_nodes(run_dir: Path) -> list[RealNode]:
    """The nodes whose directories a start made in ``run_dir`` (a half-finished start's included)."""
    found = [RealNode(0)] if (run_dir / "node").is_dir() else []
    for directory in run_dir.glob("node-*"):
        number = directory.name.removeprefix("node-")
        if directory.is_dir() and number.isdigit():
            found.append(RealNode(int(number)))
    return sorted(found, key=lambda node: node.index)


def cannot_run_reasons() -> list[str]:
    """Why this machine cannot run a real node (empty when it can): root, the Debian packages, overlayfs,
    cgroups."""
    reasons: list[str] = []
    if os.geteuid() != 0:
        reasons.append("not root (containerd, network namespaces and cgroups need root)")
    missing = [name for name in REQUIRED_COMMANDS if shutil.which(name) is None]
    if missing:
        reasons.append(
            f"missing {', '.join(missing)} (`make node-packages`: apt-get install containerd runc "
            "containernetworking-plugins podman)"
        )
    if not (CNI_PLUGINS / "bridge").exists():
        reasons.append(f"no CNI bridge plugin in {CNI_PLUGINS} (Debian's containernetworking-plugins)")
    try:
        filesystems = Path("/proc/filesystems").read_text()
    except OSError:
        filesystems = ""
    if "overlay" not in filesystems:
        reasons.append("the kernel has no overlayfs (containerd's snapshotter)")
    if not (CGROUP_ROOT / "memory").is_dir() and not (CGROUP_ROOT / "cgroup.controllers").is_file():
        reasons.append(f"no cgroup hierarchy at {CGROUP_ROOT}")
    return reasons


def _run(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(command), capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise RealNodeError(f"`{' '.join(command)}` failed: {result.stderr.strip() or result.stdout.strip()}")
    return result


def _bridge_sysfs(node: RealNode) -> Path:
    return Path("/sys/class/net") / node.bridge


BRIDGE_SYSFS = _bridge_sysfs(FIRST)


def _bridge_holder(node: RealNode) -> Path | None:
    """The run directory that made the bridge: ``setup_network`` writes it as the bridge's alias."""
    with contextlib.suppress(OSError):
        alias = (_bridge_sysfs(node) / "ifalias").read_text().strip()
        if alias:
            return Path(alias)
    return None


def _holder_alive(node: RealNode, holder: Path | None) -> bool:
    """Whether the node that made the bridge still runs: any process its run directory recorded, or, for a
    bridge without an alias, a kubelet started with the node's address."""
    if holder is not None:
        return any(
            record is not None and record.is_running()
            for record in (processes.read_record(holder, name) for name in processes.recorded(holder))
        )
    for process in psutil.process_iter(["cmdline"]):
        if f"--node-ip={node.address}" in (process.info["cmdline"] or []):
            return True
    return False


def clear_stale_node(log: Callable[[str], None], node: RealNode = FIRST) -> None:
    """One real-node cluster per machine: bridge names and addresses are fixed. A bridge whose node still
    runs stops this start (before anything is made, so the failed start's cleanup never touches the other
    node); one whose node is gone (a crash, a machine restart that kept the network namespace) is torn
    down, with every node its run directory had."""
    if not _bridge_sysfs(node).exists():
        return
    holder = _bridge_holder(node)
    if _holder_alive(node, holder):
        where = f" from {holder}" if holder is not None else ""
        raise RealNodeError(
            f"the bridge {node.bridge} belongs to a real node that is still running{where} (one real-node "
            f"cluster per machine): stop it first (`kubetrain envtest stop --dir "
            f"{holder or '<its run directory>'}`)"
        )
    log(f"removing what a real node no longer running left behind ({holder or 'run directory unknown'})")
    if holder is not None:
        teardown(holder)
        remove_network(holder)
    _kill_cgroup_processes(node)
    _remove_cgroups(node)
    _run("ip", "link", "del", node.bridge, check=False)
    if holder is None:
        _remove_iptables_rules()


def setup_network(run_dir: Path, nodes: list[RealNode] | None = None) -> None:
    """Each node's address on its pod bridge (made here, before the API server binds to node 0's). The CNI
    bridge plugin later finds the bridge and its gateway address already there and attaches pods to it. The
    alias names the run directory, so a later start can tell a live node's bridge from a dead one's. The
    FORWARD rule lets pods of one node reach another's (routed between bridges) whatever the chain's policy
    (dockerd's default sets it to DROP). What the nodes' components will change on the host as a side
    effect is recorded first."""
    host_changes.record(host_record())
    for node in nodes or [FIRST]:
        _run("ip", "link", "add", node.bridge, "type", "bridge")
        _run("ip", "link", "set", node.bridge, "alias", str(run_dir))
        _run("ip", "addr", "add", f"{node.address}/{NODE_PREFIX}", "dev", node.bridge)
        _run("ip", "link", "set", node.bridge, "up")
    _run("iptables", "-I", *forward_rule())


def forward_rule() -> list[str]:
    return [
        "FORWARD",
        "-s",
        POD_NETWORK,
        "-d",
        POD_NETWORK,
        "-m",
        "comment",
        "--comment",
        FORWARD_COMMENT,
        "-j",
        "ACCEPT",
    ]


def _iptables_rule(apiserver_port: int) -> list[str]:
    return [
        "PREROUTING",
        "-s",
        POD_NETWORK,
        "-d",
        f"{SERVICE_IP}/32",
        "-p",
        "tcp",
        "--dport",
        "443",
        "-m",
        "comment",
        "--comment",
        IPTABLES_COMMENT,
        "-j",
        "DNAT",
        "--to-destination",
        f"{NODE_IP}:{apiserver_port}",
    ]


def route_kubernetes_service(apiserver_port: int) -> None:
    _run("iptables", "-t", "nat", "-A", *_iptables_rule(apiserver_port))


def _remove_iptables_rules() -> None:
    """Every rule carrying one of our comments, whatever it names (a crashed start's included)."""
    for table, chain, comment in (
        ("nat", "PREROUTING", IPTABLES_COMMENT),
        ("filter", "FORWARD", FORWARD_COMMENT),
    ):
        listing = _run("iptables", "-t", table, "-S", chain, check=False).stdout
        for line in listing.splitlines():
            if comment in line and line.startswith("-A "):
                # `-S` prints the rule as it was added; quoted comment words come back as one argument.
                _run("iptables", "-t", table, "-D", *shlex.split(line[3:]), check=False)


def containerd_config(paths: NodePaths) -> str:
    """containerd 1.6's config (version 2; what is not set keeps containerd's default). See the pitfalls in
    docs/development.md: oom_score_adj, cgroupfs, and every path under the run directory."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return "\n".join(
        [
            "version = 2",
            f'root = "{paths.containerd_root}"',
            f'state = "{paths.root / "containerd" / "state"}"',
            "[grpc]",
            f'  address = "{paths.containerd_socket}"',
            '[plugins."io.containerd.internal.v1.opt"]',
            f'  path = "{paths.root / "containerd" / "opt"}"',
            f"[{cri}]",
            f'  sandbox_image = "{PAUSE_IMAGE}"',
            # The kubelet asks for oom_score_adj -998 for the pause container; lowering it needs
            # CAP_SYS_RESOURCE, which this kind of VM does not grant, and runc then fails every sandbox.
            "  restrict_oom_score_adj = true",
            # Network namespaces under the state directory, so stop finds (and unmounts) every one.
            "  netns_mounts_under_state_dir = true",
            "  disable_tcp_service = true",
            '  stream_server_address = "127.0.0.1"',
            "  tolerate_missing_hugetlb_controller = true",
            "  disable_hugetlb_controller = true",
            f"[{cri}.cni]",
            f'  bin_dir = "{CNI_PLUGINS}"',
            f'  conf_dir = "{paths.cni_conf_dir}"',
            f"[{cri}.containerd]",
            '  snapshotter = "overlayfs"',
            '  default_runtime_name = "runc"',
            f"[{cri}.containerd.runtimes.runc]",
            '  runtime_type = "io.containerd.runc.v2"',
            f"[{cri}.containerd.runtimes.runc.options]",
            # No systemd here: the kubelet and runc use cgroupfs.
            "  SystemdCgroup = false",
            f'  Root = "{paths.root / "runc"}"',
            "",
        ]
    )


def cni_config(paths: NodePaths, node: RealNode = FIRST) -> dict[str, Any]:
    return {
        "cniVersion": "1.0.0",
        "name": "kubetrain",
        "plugins": [
            {
                "type": "bridge",
                "bridge": node.bridge,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": node.pod_subnet, "gateway": node.address}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(paths.root / "cni" / "ipam"),
                },
            },
        ],
    }


def kubelet_config(paths: NodePaths, pki: Pki, node: RealNode = FIRST) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # Only holders of an envtest-CA certificate (the API server, for logs and exec) reach the kubelet.
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(pki.ca_cert)},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "address": node.address,
        "port": KUBELET_PORT,
        # Each node's own address: the kubelets of several nodes share the machine's ports.
        "healthzBindAddress": node.address,
        "healthzPort": 10248,
        "readOnlyPort": 0,
        "cgroupDriver": "cgroupfs",
        # Its pods' cgroups under a parent of the node's own, so stopping one node kills only its pods.
        "cgroupRoot": f"/{node.cgroup_parent}",
        "failSwapOn": False,
        "failCgroupV1": False,
        "clusterDomain": CLUSTER_DOMAIN,
        "clusterDNS": [NODE_IP],
        "resolvConf": "/etc/resolv.conf",
        "containerRuntimeEndpoint": f"unix://{paths.containerd_socket}",
        "podLogsDir": str(paths.pod_logs),
        "volumePluginDir": str(paths.root / "volume-plugins"),
        "serializeImagePulls": False,
        # No disk signals: to reclaim disk the kubelet deletes every image no container uses, the sandbox
        # image among them, and no registry here can give them back. The disk is the machine's, shared with
        # image builds; one dip under 1% during a 4.4 GB import left the node without pause and PyTorch.
        "evictionHard": {"memory.available": "100Mi"},
        "evictionPressureTransitionPeriod": "30s",
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "protectKernelDefaults": False,
        "registerNode": True,
        "nodeStatusReportFrequency": "10s",
    }


def corefile(kubeconfig: Path, ready_port: int) -> str:
    return f"""\
.:53 {{
    bind {NODE_IP}
    errors
    ready 127.0.0.1:{ready_port}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig} envtest
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }}
    forward . /etc/resolv.conf
    cache 5
}}
"""


def _kubeconfig(path: Path, server: str, pki: Pki, cert: Path, key: Path, user: str) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "envtest", "cluster": {"server": server, "certificate-authority": str(pki.ca_cert)}}
        ],
        "users": [{"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
        "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": user}}],
        "current-context": "envtest",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)


def apiserver_kubelet_client(pki: Pki) -> tuple[Path, Path]:
    """The API server's client certificate towards the kubelet (logs, exec, port-forward)."""
    return issue_client_certificate(pki, "apiserver-kubelet-client", "kube-apiserver-kubelet-client")


Wait = Callable[[str, Callable[[], bool], processes.ProcessRecord | None], float]


def start(
    run_dir: Path,
    nodes: list[RealNode],
    binaries: NodeBinaries,
    pki: Pki,
    server: str,
    wait: Wait,
    node_ready: Callable[[str], bool],
    log: Callable[[str], None],
) -> dict[str, float]:
    """Per node: clone the image cache (the pause image at least) into its containerd's root, start its
    containerd and its kubelet; CoreDNS once, on node 0's address; wait until every Node is Ready.
    The network (bridges, DNAT) is set up by the caller before the API server starts."""
    timings: dict[str, float] = {}
    clock = time.monotonic()
    imagecache.update(["pause"], log)
    for node in nodes:
        paths = node.paths(run_dir)
        paths.root.mkdir(parents=True, exist_ok=True)
        paths.containerd_config.write_text(containerd_config(paths))
        paths.cni_conf_dir.mkdir(parents=True, exist_ok=True)
        conflist = json.dumps(cni_config(paths, node), indent=1) + "\n"
        (paths.cni_conf_dir / "10-kubetrain.conflist").write_text(conflist)
        imagecache.clone_into(paths.containerd_root)
        cert, key = issue_client_certificate(
            pki, node.process("kubelet"), f"system:node:{node.name}", ("system:nodes",)
        )
        _kubeconfig(paths.kubelet_kubeconfig, server, pki, cert, key, f"system:node:{node.name}")
        paths.kubelet_config.write_text(yaml.safe_dump(kubelet_config(paths, pki, node), sort_keys=False))
    timings["image-cache"] = time.monotonic() - clock
    for node in nodes:
        timings[node.process("containerd")] = _start_containerd(run_dir, node, wait)

    paths = FIRST.paths(run_dir)
    cert, key = issue_client_certificate(pki, "coredns", "kubetrain:coredns", ("system:masters",))
    coredns_kubeconfig = paths.root / "coredns.kubeconfig"
    _kubeconfig(coredns_kubeconfig, server, pki, cert, key, "kubetrain:coredns")
    ready_port = _free_port()
    paths.corefile.write_text(corefile(coredns_kubeconfig, ready_port))
    coredns = processes.spawn(run_dir, COREDNS, [str(binaries.coredns), "-conf", str(paths.corefile)])

    clock = time.monotonic()
    kubelets = [(node, _spawn_kubelet(run_dir, node, binaries)) for node in nodes]
    timings["coredns"] = wait(
        "CoreDNS /ready", lambda: _http_ok(f"http://127.0.0.1:{ready_port}/ready"), coredns
    )
    for node, kubelet in kubelets:
        _wait_ready(run_dir, node, kubelet, wait, node_ready)
    timings["kubelet-to-node-ready"] = time.monotonic() - clock
    return timings


CRI_NOT_INITIALIZED = "server is not initialized yet"
CRI_RETRIES = 20


def _wait_ready(
    run_dir: Path,
    node: RealNode,
    kubelet: processes.ProcessRecord,
    wait: Wait,
    node_ready: Callable[[str], bool],
) -> None:
    """Until the node is Ready. A kubelet started while its containerd's CRI service is still initializing
    (containerd answers ``ctr version`` before that, and a cloned store of gigabytes of images takes a while
    under load) exits at once with "server is not initialized yet" (seen in CI on the second of two nodes):
    it is started again, a second later, up to ``CRI_RETRIES`` times."""
    for attempt in range(CRI_RETRIES + 1):
        try:
            wait(f"node {node.name} Ready", functools.partial(node_ready, node.name), kubelet)
            return
        except Exception:
            if kubelet.is_running() or attempt == CRI_RETRIES or not _said(kubelet, CRI_NOT_INITIALIZED):
                raise
        time.sleep(1.0)
        kubelet = processes.respawn(run_dir, node.process("kubelet"))


def _said(process: processes.ProcessRecord, text: str) -> bool:
    """Whether the end of the process's log has ``text``."""
    try:
        with process.log.open("rb") as log:
            log.seek(0, 2)
            log.seek(max(log.tell() - 4096, 0))
            return text.encode() in log.read()
    except OSError:
        return False


def _start_containerd(run_dir: Path, node: RealNode, wait: Wait) -> float:
    paths = node.paths(run_dir)
    paths.socket_dir.mkdir(parents=True, exist_ok=True)
    containerd = processes.spawn(
        run_dir, node.process("containerd"), ["containerd", "--config", str(paths.containerd_config)]
    )
    seconds = wait(
        f"{node.name}'s containerd answering on its socket",
        lambda: (
            _run("ctr", "--address", str(paths.containerd_socket), "version", check=False).returncode == 0
        ),
        containerd,
    )
    if not _has_image(paths, PAUSE_IMAGE):
        raise RealNodeError(f"{PAUSE_IMAGE} is not in {node.name}'s containerd after the image cache's clone")
    return seconds


def _make_cgroup_parent(node: RealNode) -> None:
    """The kubelet refuses a ``cgroupRoot`` missing from any hierarchy. A new cpuset cgroup has no CPUs or
    memory nodes until given its parent's (the kubelet's own cgroups copy them, but this one it only
    checks)."""
    for hierarchy in _hierarchies():
        parent = hierarchy / node.cgroup_parent
        parent.mkdir(exist_ok=True)
        for name in ("cpuset.cpus", "cpuset.mems"):
            inherited = hierarchy / name
            own = parent / name
            if inherited.is_file() and own.is_file() and not own.read_text().strip():
                own.write_text(inherited.read_text())


def _spawn_kubelet(run_dir: Path, node: RealNode, binaries: NodeBinaries) -> processes.ProcessRecord:
    paths = node.paths(run_dir)
    paths.kubelet_root.mkdir(parents=True, exist_ok=True)
    _make_cgroup_parent(node)
    return processes.spawn(
        run_dir,
        node.process("kubelet"),
        [
            str(binaries.kubelet),
            f"--kubeconfig={paths.kubelet_kubeconfig}",
            f"--config={paths.kubelet_config}",
            f"--root-dir={paths.kubelet_root}",
            # Its self-signed serving certificate: else in /var/lib/kubelet/pki, whatever --root-dir says.
            f"--cert-dir={paths.kubelet_root / 'pki'}",
            f"--hostname-override={node.name}",
            f"--node-ip={node.address}",
            f"--node-labels={REAL_NODE_LABEL}=true",
            "--v=1",
        ],
    )


def restart_node(run_dir: Path, node: RealNode, wait: Wait, node_ready: Callable[[str], bool]) -> float:
    """The node back after ``stop_node``: its containerd and kubelet on the same directories, as after a
    reboot; the kubelet re-registers and cleans up the pods it finds (their containers died with the node).
    Returns the seconds until ``node_ready`` said so."""
    clock = time.monotonic()
    _start_containerd(run_dir, node, wait)
    _make_cgroup_parent(node)
    kubelet = processes.respawn(run_dir, node.process("kubelet"))
    _wait_ready(run_dir, node, kubelet, wait, node_ready)
    return time.monotonic() - clock


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _http_ok(url: str) -> bool:
    return httpx.get(url, timeout=2.0).status_code == 200


def _has_image(paths: NodePaths, reference: str) -> bool:
    listed = _run("ctr", "--address", str(paths.containerd_socket), "-n", "k8s.io", "images", "ls", "-q")
    return reference in listed.stdout.split()


def load_images(paths: NodePaths, names: list[str]) -> None:
    """Build (once, cached by recipe) the named images of tools/images, bring them into the image cache
    (``imagecache``: what the next node starts with) and into this running node, each skipped when it is
    there with its current recipe. An image the node did not start with is imported twice (cache, node):
    once per recipe, as the next node's clone has it."""
    imagecache.update(names)
    command = [
        sys.executable,
        str(CHECKOUT / "tools" / "images" / "build.py"),
        "--load-containerd",
        str(paths.containerd_socket),
        *names,
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RealNodeError(f"`{' '.join(command)}` failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")


def _kill_cgroup_processes(node: RealNode) -> None:
    """SIGKILL every process in the node's cgroups (containers, pause processes), twice over: a process
    forking while we read the list is caught the second time."""
    for _ in range(3):
        found = False
        for hierarchy in _node_cgroups(node):
            for directory in _cgroup_tree(hierarchy):
                procs = directory / "cgroup.procs"
                with contextlib.suppress(OSError):
                    for pid in procs.read_text().split():
                        found = True
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(int(pid), signal.SIGKILL)
        if not found:
            return
        time.sleep(0.2)


def _hierarchies() -> list[Path]:
    """The cgroup v1 hierarchies (a directory with ``cgroup.procs`` under /sys/fs/cgroup), or the v2 root."""
    if not CGROUP_ROOT.is_dir():
        return []
    if (CGROUP_ROOT / "cgroup.controllers").is_file():
        return [CGROUP_ROOT]
    return sorted(path for path in CGROUP_ROOT.iterdir() if (path / "cgroup.procs").is_file())


def _node_cgroups(node: RealNode) -> list[Path]:
    return [path for path in (h / node.cgroup_parent for h in _hierarchies()) if path.is_dir()]


def _cgroup_tree(hierarchy: Path) -> list[Path]:
    """Every cgroup directory under ``hierarchy``, itself included. os.walk, not Path.rglob: the kubelet and
    runc remove cgroups while we walk, and rglob raises when a directory vanishes under it."""
    return [Path(directory) for directory, _, _ in os.walk(hierarchy)]


def _remove_cgroups(node: RealNode) -> None:
    for parent in _node_cgroups(node):
        # Deepest first: a cgroup directory is removed with rmdir once it has no children and no tasks.
        for directory in sorted(_cgroup_tree(parent), key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                directory.rmdir()


def _kill_shims(paths: NodePaths) -> None:
    socket = str(paths.containerd_socket)
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info.get("cmdline") or []
        if cmdline and "containerd-shim" in cmdline[0] and socket in cmdline:
            with contextlib.suppress(psutil.Error):
                process.kill()


def mounts_under(root: Path) -> list[str]:
    prefix = str(root.resolve()) if root.exists() else str(root)
    found: list[str] = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            mount_point = line.split()[4].replace("\\040", " ")
            if mount_point == prefix or mount_point.startswith(prefix + "/"):
                found.append(mount_point)
    return found


def _unmount_all(root: Path) -> None:
    for _ in range(5):
        mounts = mounts_under(root)
        if not mounts:
            return
        for mount_point in sorted(mounts, key=lambda m: m.count("/"), reverse=True):
            _run("umount", "--lazy", mount_point, check=False)


def _remove_container_log_links(paths: NodePaths) -> None:
    """The kubelet links each container's log into /var/log/containers (a fixed path)."""
    links = Path("/var/log/containers")
    if not links.is_dir():
        return
    for link in links.iterdir():
        with contextlib.suppress(OSError):
            if link.is_symlink() and str(link.readlink()).startswith(str(paths.pod_logs)):
                link.unlink()


def stop_node(run_dir: Path, node: RealNode) -> list[str]:
    """A node lost: its kubelet and containerd stop, every process of its pods is killed, and what a reboot
    would lose goes (mounts, containerd's and runc's state, the node's cgroups); its containerd root
    (images, the metadata of its containers) and the kubelet's directory stay, as a disk would. Other nodes'
    pods are untouched: each node's live under a cgroup parent of its own. Returns the processes that ran."""
    paths = node.paths(run_dir)
    stopped = [node.process("kubelet")] if processes.terminate(run_dir, node.process("kubelet")) else []
    _kill_cgroup_processes(node)
    if processes.terminate(run_dir, node.process("containerd")):
        stopped.append(node.process("containerd"))
    _kill_shims(paths)
    _kill_cgroup_processes(node)
    _remove_cgroups(node)
    _unmount_all(paths.root)
    for volatile in (paths.root / "containerd" / "state", paths.root / "runc"):
        if not mounts_under(volatile):
            shutil.rmtree(volatile, ignore_errors=True)
    shutil.rmtree(paths.socket_dir, ignore_errors=True)
    return stopped


def teardown(run_dir: Path) -> list[str]:
    """Stop every node's processes and CoreDNS and remove what they left on the host (then
    ``remove_network``); return the names of the processes that were running. Safe to call when nothing was
    started."""
    nodes = started_nodes(run_dir)
    stopped = [COREDNS] if processes.terminate(run_dir, COREDNS) else []
    for node in nodes:
        stopped += stop_node(run_dir, node)
        _remove_container_log_links(node.paths(run_dir))
    return stopped


def remove_network(run_dir: Path) -> None:
    """The DNAT and FORWARD rules, the bridges, the node directories and the host's sysctls and fixed
    directories as they were before the start (``host_changes``): after the control plane has
    stopped, because the API server listens on node 0's bridge address and its shutdown hangs (until
    killed) once that is gone."""
    _remove_iptables_rules()
    for node in started_nodes(run_dir):
        if _run("ip", "link", "show", node.bridge, check=False).returncode == 0:
            _run("ip", "link", "del", node.bridge, check=False)
        paths = node.paths(run_dir)
        remove_cni_cache_entries(paths)
        if not mounts_under(paths.root):
            shutil.rmtree(paths.root, ignore_errors=True)
    host_changes.restore(host_record())


def remove_cni_cache_entries(paths: NodePaths, cache: Path = CNI_CACHE) -> list[Path]:
    """libcni's cached results of the node's pods (those its containerd has sandboxes of), which a stopped
    node never deletes (no CNI DEL for the pods it lost); returns the files removed. Another node's entries
    are left: its pods may still run."""
    sandboxes = paths.containerd_root / "io.containerd.grpc.v1.cri" / "sandboxes"
    results = cache / "results"
    if not sandboxes.is_dir() or not results.is_dir():
        return []
    ids = {sandbox.name for sandbox in sandboxes.iterdir()}
    removed = []
    for entry in results.iterdir():
        if any(f"-{sandbox}-" in entry.name for sandbox in ids):
            with contextlib.suppress(OSError):
                entry.unlink()
                removed.append(entry)
    return removed


def leftovers(run_dir: Path, nodes: list[RealNode] | None = None) -> list[str]:
    """What stopped nodes would have left behind (empty after ``teardown``): for status and the tests.
    ``nodes``: those the run had (their directories are gone after a stop); by default node 0."""
    found: list[str] = []
    record = processes.read_record(run_dir, COREDNS)
    if record is not None and record.is_running():
        found.append(f"process {COREDNS} ({record.pid})")
    for node in nodes or [FIRST]:
        paths = node.paths(run_dir)
        for name in map(node.process, NODE_COMPONENTS):
            record = processes.read_record(run_dir, name)
            if record is not None and record.is_running():
                found.append(f"process {name} ({record.pid})")
        found += [f"mount {m}" for m in mounts_under(paths.root)]
        if _run("ip", "link", "show", node.bridge, check=False).returncode == 0:
            found.append(f"bridge {node.bridge}")
        found += [f"cgroup {path}" for path in _node_cgroups(node)]
        found += [f"directory {path}" for path in (paths.root, paths.socket_dir) if path.exists()]
    if IPTABLES_COMMENT in _run("iptables", "-t", "nat", "-S", "PREROUTING", check=False).stdout:
        found.append("iptables DNAT rule")
    if FORWARD_COMMENT in _run("iptables", "-S", "FORWARD", check=False).stdout:
        found.append("iptables FORWARD rule")
    return found
