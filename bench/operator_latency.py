"""How soon the operator acts on what it sees, on envtest: the speeds the cluster tests do not assert.

The cluster tests check that these things happen, and in which order, from the objects' own timestamps
(tests/waiting.py: a test waits for an outcome, never for a speed). This measures how soon, ``--repeat``
times each, with one operator (two for the hand-over) watching a fresh namespace:

- report to status: from POSTing a replica's report to the operator's status endpoint until the job's
  ``status.trainerStatus`` shows it (a GET every 20 ms), each report 2 s after the previous one was shown,
  so that none waits for the previous one's write interval;
- lease hand-over: from SIGTERM to the leading operator until the standby holds the Lease, split by the
  Lease's own timestamps into SIGTERM to released (the release's ``renewTime``) and released to taken (the
  standby's ``acquireTime``): the standby's next retry (2 s, jittered up to 2.4 s), not the 15 s lease;
- cause to diagnosis: from the moment a job is seen half scheduled (its last pod Unschedulable for want of
  GPUs, the others bound) until its ``GangDeadlock`` Warning event is seen.

Usage (an envtest must be running: ``kubetrain envtest start``)::

    .venv/bin/python bench/operator_latency.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import contextlib
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubetrain.envtest.crds import install_crds
from kubetrain.envtest.kubeapi import KubeApi, KubeObject
from kubetrain.envtest.nodes import FAKE_NODE_LABEL
from kubetrain.envtest.poddriver import PodDriver
from kubetrain.kube.runtime.leader import parse_micro_time

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "cluster" / "operator"))

from operator_throughput import envtest_kubeconfig  # noqa: E402
from status_support import audience, ca_bundle, free_port, mint_token, post, wait_default_service_account  # noqa: E402

from operator_process import running_operator  # noqa: E402
from waiting import PATIENCE, eventually  # noqa: E402

GPU = "nvidia.com/gpu"
LEASE = "kubetrain-bench"
POLL = 0.02


def pytorch_job(name: str, workers: int, gpus: int = 0) -> KubeObject:
    container: dict[str, Any] = {"name": "pytorch", "image": "example.com/trainer:1"}
    if gpus:
        container["resources"] = {"limits": {GPU: str(gpus)}}
    replica = {"restartPolicy": "OnFailure", "template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {**replica, "replicas": 1},
                "Worker": {**replica, "replicas": workers},
            }
        },
    }


def seen_at(probe: Callable[[], Any], what: str) -> float:
    """The monotonic time ``probe`` was first seen to hold, polled every 20 ms: ``waiting.eventually``'s
    pauses grow to half a second, too coarse to time with."""
    deadline = time.monotonic() + PATIENCE
    while not probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not seen within {PATIENCE:g} s")
        time.sleep(POLL)
    return time.monotonic()


@contextlib.contextmanager
def fresh_namespace(api: KubeApi, purpose: str) -> Iterator[str]:
    name = f"bench-{purpose}-{secrets.token_hex(3)}"
    api.create("/api/v1/namespaces", {"metadata": {"name": name}})
    try:
        yield name
    finally:
        api.delete(f"/api/v1/namespaces/{name}")


def wait_synced(log: Path) -> None:
    eventually(lambda: "caches synced" in log.read_text(errors="replace"), f"caches synced ({log.name})")


def job_path(namespace: str, name: str) -> str:
    return f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/{name}"


def pods(api: KubeApi, namespace: str) -> list[KubeObject]:
    return list(api.get(f"/api/v1/namespaces/{namespace}/pods")["items"])


def report_to_status(api: KubeApi, kubeconfig: Path, logs: Path, repeat: int) -> list[float]:
    """Seconds from a report's POST to the job's status showing it, ``repeat`` times."""
    with fresh_namespace(api, "report") as namespace:
        port = free_port()
        flags = [
            "--status-server-bind-address",
            f"127.0.0.1:{port}",
            "--status-server-url",
            f"https://127.0.0.1:{port}",
            "--status-server-namespace",
            namespace,
        ]
        log = logs / "report.log"
        with running_operator(kubeconfig, namespace, log, flags, show_log=False):
            eventually(
                lambda: "caches synced" in log.read_text(errors="replace"), "the operator's caches synced"
            )
            wait_default_service_account(api, namespace)
            api.create(f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs", pytorch_job("bert", 1))
            master_path = f"/api/v1/namespaces/{namespace}/pods/bert-master-0"
            master = eventually(lambda: api.get_or_none(master_path), "bert's master pod")
            token = mint_token(api, master, audience(namespace, "bert"))
            ca = ca_bundle(api, namespace)
            url = f"https://127.0.0.1:{port}/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/bert/status"
            took = []
            for step in range(repeat):
                report = {"trainerStatus": {"progressPercentage": step + 1}}

                def shown(progress: int = step + 1) -> bool:
                    status = api.get(job_path(namespace, "bert")).get("status") or {}
                    return (status.get("trainerStatus") or {}).get("progressPercentage") == progress

                time.sleep(2)
                sent = time.monotonic()
                code, answer = post(url, ca, report, token)
                assert code == 200, answer
                took.append(seen_at(shown, "the report in the status") - sent)
    return took


def leases_path(namespace: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


def lease_path(namespace: str) -> str:
    return f"{leases_path(namespace)}/{LEASE}"


def released_version(api: KubeApi, namespace: str, since: str) -> KubeObject:
    """The Lease as its holder released it (an empty holder), read back from the API server's history."""
    for kind, lease in api.watch(leases_path(namespace), since, 60):
        released = not lease["spec"].get("holderIdentity")
        if kind == "MODIFIED" and lease["metadata"]["name"] == LEASE and released:
            return lease
    raise AssertionError("the Lease was not released")


def moment(lease: KubeObject, field: str) -> datetime:
    parsed = parse_micro_time(lease["spec"].get(field))
    assert parsed is not None, lease
    return parsed


def hand_over(api: KubeApi, kubeconfig: Path, logs: Path, repeat: int) -> list[tuple[float, float, float]]:
    """(SIGTERM to released, released to taken, SIGTERM to taken) in seconds, ``repeat`` times."""
    return [one_hand_over(api, kubeconfig, logs / f"lease-{round_}") for round_ in range(repeat)]


def one_hand_over(api: KubeApi, kubeconfig: Path, logs: Path) -> tuple[float, float, float]:
    logs.mkdir()
    with fresh_namespace(api, "lease") as namespace:
        flags = ["--leader-elect", "--leader-election-namespace", namespace, "--leader-election-id", LEASE]
        with contextlib.ExitStack() as standby, contextlib.ExitStack() as leader:
            leader.enter_context(
                running_operator(kubeconfig, namespace, logs / "leader.log", flags, show_log=False)
            )
            held = eventually(lambda: api.get_or_none(lease_path(namespace)), "the Lease")
            standby.enter_context(
                running_operator(kubeconfig, namespace, logs / "standby.log", flags, show_log=False)
            )
            wait_synced(logs / "standby.log")
            since = api.get(lease_path(namespace))["metadata"]["resourceVersion"]
            stopped = datetime.now(UTC)
            leader.close()  # SIGTERM, and the leader's graceful exit
            holder = held["spec"]["holderIdentity"]
            lease = eventually(
                lambda: held_by_another(api, namespace, holder), "the standby holding the Lease"
            )
            released = released_version(api, namespace, since)
    released_at, taken_at = moment(released, "renewTime"), moment(lease, "acquireTime")
    return (
        (released_at - stopped).total_seconds(),
        (taken_at - released_at).total_seconds(),
        (taken_at - stopped).total_seconds(),
    )


def held_by_another(api: KubeApi, namespace: str, holder: str) -> KubeObject | None:
    lease = api.get(lease_path(namespace))
    return lease if lease["spec"].get("holderIdentity") not in ("", None, holder) else None


def half_scheduled(api: KubeApi, namespace: str, count: int) -> bool:
    current = pods(api, namespace)
    if len(current) != count:
        return False
    unschedulable = [
        p
        for p in current
        if any(
            c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
            for c in (p.get("status") or {}).get("conditions") or []
        )
    ]
    bound = [p for p in current if p["spec"].get("nodeName")]
    return len(unschedulable) == 1 and len(bound) == count - 1


def gang_deadlock_seen(api: KubeApi, namespace: str) -> bool:
    selector = {"fieldSelector": "involvedObject.name=deadlock,reason=GangDeadlock,type=Warning"}
    return bool(api.get(f"/api/v1/namespaces/{namespace}/events", selector)["items"])


def cause_to_diagnosis(api: KubeApi, kubeconfig: Path, logs: Path, repeat: int) -> list[float]:
    """Seconds from a gang seen half scheduled to its GangDeadlock event seen, ``repeat`` times."""
    nodes = api.get("/api/v1/nodes", {"labelSelector": FAKE_NODE_LABEL})["items"]
    per_node = [int(node["status"]["allocatable"].get(GPU, "0")) for node in nodes]
    took = []
    with PodDriver(api):  # finishes the deletion of the bound pods, as their kubelet would
        for round_ in range(repeat):
            with fresh_namespace(api, "diagnosis") as namespace:
                log = logs / f"diagnosis-{round_}.log"
                with running_operator(kubeconfig, namespace, log, show_log=False):
                    wait_synced(log)
                    # Each pod asks for a node's GPUs: one more pod than there are nodes cannot be placed.
                    job = pytorch_job("deadlock", workers=len(per_node), gpus=min(per_node))
                    api.create(f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs", job)
                    caused = seen_at(lambda: half_scheduled(api, namespace, len(per_node) + 1), "the cause")
                    took.append(seen_at(lambda: gang_deadlock_seen(api, namespace), "the event") - caused)
                    api.delete(job_path(namespace, "deadlock"))
                    eventually(lambda: not pods(api, namespace), "the job's pods gone")
    return took


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s (min {min(values):.2f}, max {max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kubeconfig", type=Path, help="default: the running envtest's")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    kubeconfig = envtest_kubeconfig(args.kubeconfig)
    with KubeApi.from_kubeconfig(kubeconfig) as api, tempfile.TemporaryDirectory() as logs:
        install_crds(api, ROOT / "manifests" / "crds")
        reports = report_to_status(api, kubeconfig, Path(logs), args.repeat)
        hand_overs = hand_over(api, kubeconfig, Path(logs), args.repeat)
        diagnoses = cause_to_diagnosis(api, kubeconfig, Path(logs), args.repeat)
    print(f"| measure (median of {args.repeat}) | seconds |")
    print("|---|---|")
    print(f"| report POSTed to trainerStatus shown | {summary(reports)} |")
    print(f"| SIGTERM to the Lease released | {summary([t[0] for t in hand_overs])} |")
    print(f"| Lease released to taken by the standby | {summary([t[1] for t in hand_overs])} |")
    print(f"| SIGTERM to the standby holding the Lease | {summary([t[2] for t in hand_overs])} |")
    print(f"| gang seen half scheduled to GangDeadlock event seen | {summary(diagnoses)} |")


if __name__ == "__main__":
    main()
