"""A private control plane that keeps an audit log, and a burst of jobs in a namespace of it: applied at
once, watched, its pods started, checked when it has settled, and cleaned up."""

from __future__ import annotations

import concurrent.futures
import contextlib
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

import httpx

from kubetrain.envtest import audit, controlplane
from kubetrain.envtest.audit import AuditEvent
from kubetrain.envtest.crds import install_crds
from kubetrain.envtest.kubeapi import ApiError, KubeApi, KubeObject
from kubetrain.envtest.nodes import NodeShape
from waiting import PATIENCE

from .kubelet import BurstKubelet
from .mirror import Mirror, wait_for

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "manifests" / "crds"
WORKERS = 3
PODS_PER_JOB = 1 + WORKERS
JOBS_API = "/apis/kubeflow.org/v1"
CREATE_THREADS = 8
# Two fake nodes with room for a 500-job burst and more (110 pods each by default).
NODE_SHAPE = NodeShape(cpu="1000", memory="4Ti", pods=5000, gpus=0)


def pytorch_job(name: str, namespace: str) -> KubeObject:
    template = {"spec": {"containers": [{"name": "pytorch", "image": "example.com/trainer:1"}]}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template},
                "Worker": {"replicas": WORKERS, "restartPolicy": "OnFailure", "template": template},
            }
        },
    }


def children_of(job: str) -> list[str]:
    """The names of a job's pods, which are also its services' names."""
    return [f"{job}-master-0", *(f"{job}-worker-{index}" for index in range(WORKERS))]


def now() -> datetime:
    """Wall-clock time, comparable with the audit log's (same machine)."""
    return datetime.now(UTC)


class FaultCluster:
    """envtest in ``run_dir`` with the audit log on and the kubeflow.org CRDs installed."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        state = controlplane.start(
            run_dir, controlplane.EnvtestOptions(nodes=2, node_shape=NODE_SHAPE, audit_policy=audit.WRITES)
        )
        self.kubeconfig = state.kubeconfig
        self.etcd = f"http://127.0.0.1:{state.ports.etcd_client}"
        self.api = KubeApi.from_kubeconfig(self.kubeconfig)
        install_crds(self.api, CRDS)

    def stop(self) -> None:
        self.api.close()
        controlplane.stop(self.run_dir)

    def crash_apiserver(self) -> None:
        controlplane.stop_component(self.run_dir, "kube-apiserver", crash=True)

    def start_apiserver(self) -> None:
        controlplane.start_component(self.run_dir, "kube-apiserver")
        # After an outage the scheduler and the garbage collector come back only through their clients'
        # backoff (30 s and more here, docs/development.md): fresh ones, so the burst measures the operator.
        controlplane.restart_controllers(self.run_dir)

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision (physically) through its own API; returns it."""
        head = httpx.post(f"{self.etcd}/v3/kv/range", json={"key": "AA=="}, timeout=PATIENCE).json()
        revision = int(head["header"]["revision"])
        answer = httpx.post(
            f"{self.etcd}/v3/kv/compaction", json={"revision": revision, "physical": True}, timeout=PATIENCE
        )
        answer.raise_for_status()
        return revision

    def audit(self, namespace: str) -> list[AuditEvent]:
        return [event for event in audit.read_events(self.run_dir) if event.namespace == namespace]


@dataclass(frozen=True)
class Settled:
    """The burst as the API server has it once it settled."""

    missing: list[str]
    """Children a job should have and has not, and jobs not Running."""
    extra: list[str]
    """Pods and services no job should have, or owned by the wrong job."""
    pods: int
    services: int
    running_jobs: int


class Burst:
    """``jobs`` PyTorchJobs in a fresh namespace, the namespace watched and its pods started throughout."""

    def __init__(self, cluster: FaultCluster, prefix: str, jobs: int) -> None:
        self.cluster = cluster
        self.api = cluster.api
        self.jobs = jobs
        self.namespace = f"{prefix}-{secrets.token_hex(3)}"
        self.names = [f"job-{index}" for index in range(jobs)]
        self.expected_children = 2 * PODS_PER_JOB * jobs
        self.kubelet = BurstKubelet(self.api, self.namespace)
        self.pods = Mirror(
            self.api, f"/api/v1/namespaces/{self.namespace}/pods", on_change=self.kubelet.offer
        )
        self.services = Mirror(self.api, f"/api/v1/namespaces/{self.namespace}/services")
        self.job_mirror = Mirror(self.api, f"{JOBS_API}/namespaces/{self.namespace}/pytorchjobs")
        self.applied_at: datetime | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._creates: list[concurrent.futures.Future[None]] = []

    def __enter__(self) -> Burst:
        self.api.create("/api/v1/namespaces", {"metadata": {"name": self.namespace}})
        for mirror in (self.pods, self.services, self.job_mirror):
            mirror.start()
        self.kubelet.start()
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        for mirror in (self.pods, self.services, self.job_mirror):
            mirror.stop()
        self.kubelet.stop()
        delete_namespace(self.api, self.namespace)

    def apply(self) -> None:
        """Start applying every job at once (a few threads, as ``kubectl apply`` of a directory would), in the
        background: the operator acts on the first while the last are still being applied, and faults may
        come meanwhile. ``applied()`` waits for the last."""
        collection = f"{JOBS_API}/namespaces/{self.namespace}/pytorchjobs"
        self.applied_at = now()
        self._pool = concurrent.futures.ThreadPoolExecutor(CREATE_THREADS)
        self._creates = [
            self._pool.submit(self._create, collection, pytorch_job(name, self.namespace))
            for name in self.names
        ]

    def _create(self, collection: str, job: KubeObject) -> None:
        """One job, tried again while the API server is away (a fault may hit the apply too)."""
        deadline = time.monotonic() + PATIENCE
        while True:
            try:
                self.api.create(collection, job)
                return
            except ApiError as error:
                if error.code == 409:  # an attempt whose answer was lost did create it
                    return
                if (error.code < 500 and error.code != 429) or time.monotonic() > deadline:
                    raise
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.5)

    def applied(self) -> None:
        """Wait until every job was applied."""
        for create in self._creates:
            create.result()
        if self._pool is not None:
            self._pool.shutdown()

    def created(self) -> float:
        """The share of the burst's pods and services that exist."""
        exists = sum(1 for s in self.pods.snapshot() if not s.deleting)
        exists += len(self.services.snapshot())
        return exists / self.expected_children

    def wait_created(self, share: float, timeout: float) -> None:
        wait_for(lambda: self.created() >= share, f"{share:.0%} of the burst's pods and services", timeout)

    def all_running(self) -> bool:
        jobs = self.job_mirror.snapshot()
        return len(jobs) == self.jobs and all(job.running_condition for job in jobs) and self.created() >= 1.0

    def wait_all_running(self, timeout: float) -> datetime:
        wait_for(self.all_running, f"every job of {self.namespace} Running", timeout)
        return now()

    def settled(self) -> Settled:
        """The namespace read afresh (not from the mirrors): each job's pods and services by owner."""
        jobs = self.api.get(f"{JOBS_API}/namespaces/{self.namespace}/pytorchjobs")["items"]
        pods = self.api.get(f"/api/v1/namespaces/{self.namespace}/pods")["items"]
        services = self.api.get(f"/api/v1/namespaces/{self.namespace}/services")["items"]
        uids = {job["metadata"]["uid"]: job["metadata"]["name"] for job in jobs}
        missing: list[str] = [name for name in self.names if name not in uids.values()]
        extra: list[str] = []
        running = 0
        for job in jobs:
            name = job["metadata"]["name"]
            conditions = (job.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Running" and c["status"] == "True" for c in conditions):
                running += 1
            else:
                missing.append(f"{name}: not Running")
        for kind, objects in (("pod", pods), ("service", services)):
            owned: dict[str, set[str]] = {name: set() for name in uids.values()}
            for obj in objects:
                metadata = obj["metadata"]
                owners = [
                    ref["uid"] for ref in metadata.get("ownerReferences") or [] if ref.get("controller")
                ]
                job = uids.get(owners[0]) if owners else None
                if job is None or metadata.get("deletionTimestamp"):
                    extra.append(f"{kind} {metadata['name']} (owner {owners or 'none'})")
                else:
                    owned[job].add(metadata["name"])
            for job, names in owned.items():
                expected = set(children_of(job))
                missing += [f"{kind} {name}" for name in sorted(expected - names)]
                extra += [f"{kind} {name} of {job}" for name in sorted(names - expected)]
        return Settled(missing, extra, len(pods), len(services), running)


def delete_namespace(api: KubeApi, namespace: str, timeout: float = PATIENCE) -> None:
    """Delete the namespace, its pods first with no grace period (no kubelet confirms deletions here)."""
    with contextlib.suppress(ApiError, httpx.HTTPError):
        api.delete(f"/api/v1/namespaces/{namespace}/pods", {"gracePeriodSeconds": 0})
    with contextlib.suppress(ApiError, httpx.HTTPError):
        api.delete(f"/api/v1/namespaces/{namespace}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            api.get(f"/api/v1/namespaces/{namespace}")
        except ApiError as error:
            if error.code == 404:
                return
        except httpx.HTTPError:
            pass  # the API server is being restarted by a fault: ask again
        time.sleep(0.5)


def seconds_between(start: datetime, end: datetime) -> float:
    return (end - start).total_seconds()
