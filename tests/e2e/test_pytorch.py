"""The PyTorch DDP example (examples/pytorch-ddp/job.yaml, applied unchanged) as real pods through the
in-cluster operator: the master and two workers find each other through the operator's headless services
(the workers' init container waits until the master's name resolves) and train to Succeeded, their losses
in the container logs as ``kubectl logs`` and ``kubetrain logs`` read them.

The job runs once for the module (about a minute of training on the real node); each test checks one rule
of what it did.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.realpods import RealCluster, job_pods_once_ended, scratch_namespace, wait_until
from kubetrain.envtest import imagecache, realnode

# The PyTorch image (4.4 GB) is imported into the node inside the first test's setup when the node did not
# start with it (kubetrain.envtest.imagecache): minutes when cold.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pytorch-ddp" / "job.yaml"
JOB = "pytorch-ddp"
INIT_IMAGE = "localhost/kubetrain/busybox:1.35"  # tests/e2e/operator-overlay's --pytorch-init-container-image
JOB_TIMEOUT_SECONDS = 420.0
LOSS = re.compile(r"^step (\d+) loss ([0-9.]+)$", re.MULTILINE)


@dataclass(frozen=True)
class FinishedJob:
    cluster: RealCluster
    namespace: str
    outcome: str
    pods: dict[str, dict[str, Any]]

    def logs(self, pod: str, container: str = "pytorch") -> str:
        done = self.cluster.kubectl("logs", "-n", self.namespace, pod, "-c", container)
        assert done.returncode == 0, done.stderr
        return done.stdout


def _example_image() -> str:
    """The example names the locally built image, so it is applied as it is."""
    job = yaml.safe_load(EXAMPLE.read_text())
    images = {
        container["image"]
        for spec in job["spec"]["pytorchReplicaSpecs"].values()
        for container in spec["template"]["spec"]["containers"]
    }
    (image,) = images
    return str(image)


def _outcome(cluster: RealCluster, namespace: str) -> str | None:
    job = cluster.api.get(f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/{JOB}")
    conditions = job.get("status", {}).get("conditions") or []
    done = [c["type"] for c in conditions if c["type"] in ("Succeeded", "Failed") and c["status"] == "True"]
    return done[0] if done else None


@pytest.fixture(scope="module")
def ddp_job(operator: RealCluster) -> Iterator[FinishedJob]:
    image = _example_image()
    assert image == "localhost/kubetrain/pytorch:2.13.0"
    realnode.load_images(realnode.node_paths(operator.run_dir), ["pytorch"])
    with scratch_namespace(operator, "pytorch-ddp") as namespace:
        applied = operator.kubectl("apply", "-n", namespace, "-f", str(EXAMPLE))
        assert applied.returncode == 0, applied.stderr
        outcome = wait_until(
            f"{JOB} Succeeded or Failed", lambda: _outcome(operator, namespace), JOB_TIMEOUT_SECONDS
        )
        yield FinishedJob(operator, namespace, outcome, job_pods_once_ended(operator.api, namespace, JOB))


def test_ddp_example_succeeds_as_a_master_and_two_workers_on_the_real_node(ddp_job: FinishedJob) -> None:
    assert ddp_job.outcome == "Succeeded", ddp_job.logs(f"{JOB}-master-0")
    assert sorted(ddp_job.pods) == [f"{JOB}-master-0", f"{JOB}-worker-0", f"{JOB}-worker-1"]
    for pod in ddp_job.pods.values():
        assert pod["spec"]["nodeName"] == realnode.NODE_NAME
        assert pod["status"]["phase"] == "Succeeded"


def test_workers_wait_for_the_masters_dns_name_in_the_busybox_init_container(ddp_job: FinishedJob) -> None:
    master_ip = ddp_job.pods[f"{JOB}-master-0"]["status"]["podIP"]
    for worker in (f"{JOB}-worker-0", f"{JOB}-worker-1"):
        (init,) = ddp_job.pods[worker]["spec"]["initContainers"]
        (status,) = ddp_job.pods[worker]["status"]["initContainerStatuses"]

        assert (init["name"], init["image"]) == ("init-pytorch", INIT_IMAGE)
        assert status["state"]["terminated"]["exitCode"] == 0
        # busybox nslookup printed the master's name resolving to the master pod's own address.
        answer = ddp_job.logs(worker, "init-pytorch")
        assert f"{JOB}-master-0" in answer
        assert re.search(rf"Address:\s*{re.escape(master_ip)}\b", answer), answer


def test_master_addr_is_the_masters_headless_service_and_every_rank_joins_through_it(
    ddp_job: FinishedJob,
) -> None:
    service = ddp_job.cluster.api.get(f"/api/v1/namespaces/{ddp_job.namespace}/services/{JOB}-master-0")
    assert service["spec"]["clusterIP"] == "None"
    for name, pod in ddp_job.pods.items():
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert env["MASTER_ADDR"] == f"{JOB}-master-0"
        assert re.search(
            rf"^rank \d/3 joined the process group via {JOB}-master-0:23456, training on cpu$",
            ddp_job.logs(name),
            re.M,
        )


def test_losses_fall_in_the_masters_kubectl_logs(ddp_job: FinishedJob) -> None:
    logs = ddp_job.logs(f"{JOB}-master-0")
    losses = [float(loss) for _, loss in LOSS.findall(logs)]

    assert len(losses) >= 2
    assert losses[-1] < losses[0]
    assert "training finished" in logs


def test_kubetrain_logs_reads_every_replica_from_the_cluster(ddp_job: FinishedJob) -> None:
    done = ddp_job.cluster.kubetrain("logs", f"pytorchjob/{JOB}", "-n", ddp_job.namespace)
    assert done.returncode == 0, done.stderr
    by_replica: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        replica, _, text = line.partition(" | ")
        by_replica.setdefault(replica, []).append(text)
    losses = [float(loss) for _, loss in LOSS.findall("\n".join(by_replica["master-0"]))]

    assert sorted(by_replica) == ["master-0", "worker-0", "worker-1"]
    assert len(losses) >= 2
    assert losses[-1] < losses[0]
    for worker in ("worker-0", "worker-1"):
        assert any("joined the process group" in text for text in by_replica[worker])


def test_the_node_ran_the_image_from_its_snapshots_without_keeping_its_layer_blobs(
    ddp_job: FinishedJob,
) -> None:
    """The image cache and the node keep each image once, unpacked: the layers' blobs (4.1 GB for this
    image) are discarded after the import, and the pods above started from the snapshots."""
    assert ddp_job.outcome == "Succeeded"
    blob_stores = [
        root / "io.containerd.content.v1.content" / "blobs" / "sha256"
        for root in (
            imagecache.containerd_root(),
            realnode.node_paths(ddp_job.cluster.run_dir).containerd_root,
        )
    ]
    for store in blob_stores:
        sizes = sorted(blob.stat().st_size for blob in store.iterdir())
        assert sizes and sizes[-1] < 2**20, (store, sizes[-3:])
