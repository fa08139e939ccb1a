"""One real node for the envtest control plane: containerd + runc + CNI bridge, CoreDNS and a kubelet.

Everything runs as plain host processes recorded like the control plane's (``pids/``, ``logs/``), and every
piece of host state it makes is named here so ``teardown`` removes exactly that:

- the bridge ``kt0`` with the node address 10.244.0.1/24: the pods' gateway and the node's InternalIP. It is
  made before the API server starts, because in real-node mode the API server listens there (pods cannot
  reach the host's 127.0.0.1). No address outside the machine is involved: the pod network is this bridge.
- one iptables DNAT rule (nat PREROUTING, from the pod subnet): the ``kubernetes`` Service ClusterIP
  10.0.0.1:443 to the API server. In-cluster clients (the operator) find the API server through that
  ClusterIP; it is the only ClusterIP anything here needs (training jobs use headless services, which are
  DNS only), so one rule does what kube-proxy would, without its chains to clean up or a binary to build.
- CoreDNS on 10.244.0.1:53 as a host process (the kubelet's ``clusterDNS``): a pod of its own would need
  the pod network to exist before DNS does, and the node's address is stable where a pod IP is not.
- containerd's root, state (network namespaces included), runc's state, the kubelet's root and pod logs,
  CNI config and IPAM state: all under ``<run dir>/node``; the mounts under it are unmounted on stop.
- the kubelet's cgroups (``kubepods`` in each cgroup v1 hierarchy): emptied and removed on stop.
"""

from __future__ import annotations

import contextlib
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

from kubetrain.envtest import imagecache, processes
from kubetrain.envtest.binaries import NodeBinaries
from kubetrain.envtest.pki import SERVICE_IP, Pki, issue_client_certificate

NODE_NAME = "real-node-0"
REAL_NODE_LABEL = "kubetrain.dev/real-node"
BRIDGE = "kt0"
POD_SUBNET = "10.244.0.0/24"
NODE_IP = "10.244.0.1"
NODE_PREFIX = 24
KUBELET_PORT = 10250
CLUSTER_DOMAIN = "cluster.local"
PAUSE_IMAGE = "localhost/kubetrain/pause:3.10"
# Start order; stop goes in reverse.
NODE_COMPONENTS = ("containerd", "coredns", "kubelet")
CGROUP_ROOT = Path("/sys/fs/cgroup")
IPTABLES_COMMENT = "kubetrain envtest real node: kubernetes Service"
CHECKOUT = Path(__file__).resolve().parents[3]
REQUIRED_COMMANDS = ("containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "ip", "podman")
CNI_PLUGINS = Path("/usr/lib/cni")


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


def node_paths(run_dir: Path) -> NodePaths:
    return NodePaths(run_dir / "node")


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


BRIDGE_SYSFS = Path("/sys/class/net") / BRIDGE


def _bridge_holder() -> Path | None:
    """The run directory that made the bridge: ``setup_network`` writes it as the bridge's alias."""
    with contextlib.suppress(OSError):
        alias = (BRIDGE_SYSFS / "ifalias").read_text().strip()
        if alias:
            return Path(alias)
    return None


def _holder_alive(holder: Path | None) -> bool:
    """Whether the node that made the bridge still runs: any process its run directory recorded, or, for a
    bridge without an alias, a kubelet started with the node's address."""
    if holder is not None:
        return any(
            record is not None and record.is_running()
            for record in (processes.read_record(holder, name) for name in processes.recorded(holder))
        )
    for process in psutil.process_iter(["cmdline"]):
        if f"--node-ip={NODE_IP}" in (process.info["cmdline"] or []):
            return True
    return False


def clear_stale_node(log: Callable[[str], None]) -> None:
    """One real node per machine: its bridge name and addresses are fixed. A bridge whose node still runs
    stops this start (before anything is made, so the failed start's cleanup never touches the other node);
    one whose node is gone (a crash, a machine restart that kept the network namespace) is torn down."""
    if not BRIDGE_SYSFS.exists():
        return
    holder = _bridge_holder()
    if _holder_alive(holder):
        where = f" from {holder}" if holder is not None else ""
        raise RealNodeError(
            f"the bridge {BRIDGE} belongs to a real node that is still running{where} (one per machine): "
            f"stop it first (`kubetrain envtest stop --dir {holder or '<its run directory>'}`)"
        )
    log(f"removing what a real node no longer running left behind ({holder or 'run directory unknown'})")
    if holder is not None:
        teardown(holder)
        remove_network(holder)
    else:
        _kill_cgroup_processes()
        _remove_cgroups()
        _remove_iptables_rules()
        _run("ip", "link", "del", BRIDGE, check=False)


def setup_network(run_dir: Path) -> None:
    """The node's address on the pod bridge (made here, before the API server binds to it). The CNI bridge
    plugin later finds the bridge and its gateway address already there and attaches pods to it. The alias
    names the run directory, so a later start can tell a live node's bridge from a dead one's."""
    _run("ip", "link", "add", BRIDGE, "type", "bridge")
    _run("ip", "link", "set", BRIDGE, "alias", str(run_dir))
    _run("ip", "addr", "add", f"{NODE_IP}/{NODE_PREFIX}", "dev", BRIDGE)
    _run("ip", "link", "set", BRIDGE, "up")


def _iptables_rule(apiserver_port: int) -> list[str]:
    return [
        "PREROUTING",
        "-s",
        POD_SUBNET,
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
    """Every rule carrying our comment, whatever port it names (a crashed start's included)."""
    listing = _run("iptables", "-t", "nat", "-S", "PREROUTING", check=False).stdout
    for line in listing.splitlines():
        if IPTABLES_COMMENT in line and line.startswith("-A "):
            # `-S` prints the rule as it was added; quoted comment words come back as one argument.
            _run("iptables", "-t", "nat", "-D", *shlex.split(line[3:]), check=False)


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


def cni_config(paths: NodePaths) -> dict[str, Any]:
    return {
        "cniVersion": "1.0.0",
        "name": "kubetrain",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_SUBNET, "gateway": NODE_IP}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(paths.root / "cni" / "ipam"),
                },
            },
        ],
    }


def kubelet_config(paths: NodePaths, pki: Pki) -> dict[str, Any]:
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
        "address": NODE_IP,
        "port": KUBELET_PORT,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "readOnlyPort": 0,
        "cgroupDriver": "cgroupfs",
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


@dataclass(frozen=True)
class ReadyCheck:
    what: str
    ready: Callable[[], bool]
    record: processes.ProcessRecord | None


def start(
    run_dir: Path,
    binaries: NodeBinaries,
    pki: Pki,
    server: str,
    admin_kubeconfig: Path,
    wait: Callable[[str, Callable[[], bool], processes.ProcessRecord | None], float],
    node_ready: Callable[[], bool],
    log: Callable[[str], None],
) -> dict[str, float]:
    """Clone the image cache (the pause image at least) into containerd's root, start containerd, CoreDNS and
    the kubelet; wait until the Node is Ready.
    The network (bridge, DNAT) is set up by the caller before the API server starts."""
    paths = node_paths(run_dir)
    paths.root.mkdir(parents=True, exist_ok=True)
    paths.socket_dir.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    paths.containerd_config.write_text(containerd_config(paths))
    paths.cni_conf_dir.mkdir(parents=True, exist_ok=True)
    (paths.cni_conf_dir / "10-kubetrain.conflist").write_text(json.dumps(cni_config(paths), indent=1) + "\n")
    clock = time.monotonic()
    imagecache.update(["pause"], log)
    imagecache.clone_into(paths.containerd_root)
    timings["image-cache"] = time.monotonic() - clock
    containerd = processes.spawn(
        run_dir, "containerd", ["containerd", "--config", str(paths.containerd_config)]
    )
    timings["containerd"] = wait(
        "containerd answering on its socket",
        lambda: (
            _run("ctr", "--address", str(paths.containerd_socket), "version", check=False).returncode == 0
        ),
        containerd,
    )
    if not _has_image(paths, PAUSE_IMAGE):
        raise RealNodeError(f"{PAUSE_IMAGE} is not in the node's containerd after the image cache's clone")

    cert, key = issue_client_certificate(pki, "coredns", "kubetrain:coredns", ("system:masters",))
    coredns_kubeconfig = paths.root / "coredns.kubeconfig"
    _kubeconfig(coredns_kubeconfig, server, pki, cert, key, "kubetrain:coredns")
    ready_port = _free_port()
    paths.corefile.write_text(corefile(coredns_kubeconfig, ready_port))
    coredns = processes.spawn(run_dir, "coredns", [str(binaries.coredns), "-conf", str(paths.corefile)])

    cert, key = issue_client_certificate(pki, "kubelet", f"system:node:{NODE_NAME}", ("system:nodes",))
    _kubeconfig(paths.kubelet_kubeconfig, server, pki, cert, key, f"system:node:{NODE_NAME}")
    paths.kubelet_config.write_text(yaml.safe_dump(kubelet_config(paths, pki), sort_keys=False))
    paths.kubelet_root.mkdir(parents=True, exist_ok=True)
    clock = time.monotonic()
    kubelet = processes.spawn(
        run_dir,
        "kubelet",
        [
            str(binaries.kubelet),
            f"--kubeconfig={paths.kubelet_kubeconfig}",
            f"--config={paths.kubelet_config}",
            f"--root-dir={paths.kubelet_root}",
            f"--hostname-override={NODE_NAME}",
            f"--node-ip={NODE_IP}",
            f"--node-labels={REAL_NODE_LABEL}=true",
            "--v=1",
        ],
    )
    timings["coredns"] = wait(
        "CoreDNS /ready", lambda: _http_ok(f"http://127.0.0.1:{ready_port}/ready"), coredns
    )
    wait(f"node {NODE_NAME} Ready", node_ready, kubelet)
    timings["kubelet-to-node-ready"] = time.monotonic() - clock
    return timings


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


def _kill_cgroup_processes() -> None:
    """SIGKILL every process in the kubelet's pod cgroups (containers, pause processes), twice over: a
    process forking while we read the list is caught the second time."""
    for _ in range(3):
        found = False
        for hierarchy in _kubepods_dirs():
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


def _kubepods_dirs() -> list[Path]:
    if not CGROUP_ROOT.is_dir():
        return []
    return [path for path in CGROUP_ROOT.glob("*/kubepods") if path.is_dir()] + (
        [CGROUP_ROOT / "kubepods"] if (CGROUP_ROOT / "kubepods").is_dir() else []
    )


def _cgroup_tree(hierarchy: Path) -> list[Path]:
    """Every cgroup directory under ``hierarchy``, itself included. os.walk, not Path.rglob: the kubelet and
    runc remove cgroups while we walk, and rglob raises when a directory vanishes under it."""
    return [Path(directory) for directory, _, _ in os.walk(hierarchy)]


def _remove_cgroups() -> None:
    for hierarchy in _kubepods_dirs():
        # Deepest first: a cgroup directory is removed with rmdir once it has no children and no tasks.
        for directory in sorted(_cgroup_tree(hierarchy), key=lambda p: len(p.parts), reverse=True):
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


def teardown(run_dir: Path) -> list[str]:
    """Stop the node's processes and remove what they left on the host (then ``remove_network``); return
    the names of the processes that were running. Safe to call when nothing was started."""
    paths = node_paths(run_dir)
    stopped = [name for name in ("kubelet", "coredns") if processes.terminate(run_dir, name)]
    _kill_cgroup_processes()
    if processes.terminate(run_dir, "containerd"):
        stopped.append("containerd")
    _kill_shims(paths)
    _kill_cgroup_processes()
    _remove_cgroups()
    _unmount_all(paths.root)
    _remove_container_log_links(paths)
    shutil.rmtree(paths.socket_dir, ignore_errors=True)
    return stopped


def remove_network(run_dir: Path) -> None:
    """The DNAT rule, the bridge and the node directory: after the control plane has stopped, because the
    API server listens on the bridge's address and its shutdown hangs (until killed) once that is gone."""
    paths = node_paths(run_dir)
    _remove_iptables_rules()
    if _run("ip", "link", "show", BRIDGE, check=False).returncode == 0:
        _run("ip", "link", "del", BRIDGE, check=False)
    if not mounts_under(paths.root):
        shutil.rmtree(paths.root, ignore_errors=True)


def leftovers(run_dir: Path) -> list[str]:
    """What a stopped node would have left behind (empty after ``teardown``): for status and the tests."""
    paths = node_paths(run_dir)
    found: list[str] = []
    for name in NODE_COMPONENTS:
        record = processes.read_record(run_dir, name)
        if record is not None and record.is_running():
            found.append(f"process {name} ({record.pid})")
    found += [f"mount {m}" for m in mounts_under(paths.root)]
    if _run("ip", "link", "show", BRIDGE, check=False).returncode == 0:
        found.append(f"bridge {BRIDGE}")
    if IPTABLES_COMMENT in _run("iptables", "-t", "nat", "-S", "PREROUTING", check=False).stdout:
        found.append("iptables DNAT rule")
    found += [f"cgroup {path}" for path in _kubepods_dirs()]
    found += [f"directory {path}" for path in (paths.root, paths.socket_dir) if path.exists()]
    return found
