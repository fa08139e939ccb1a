"""Elastic PyTorch (examples/pytorch-elastic) as real pods through the in-cluster operator: one worker pod is
deleted mid-training, the surviving torchrun agents re-rendezvous and go on from the checkpoint, the pod the
operator makes in its place joins the training, and the job Succeeds.

The example is applied with three changes, made here: the image is the locally built one (the example
names ``pytorch/pytorch:2.5.1-cpu``, which no registry serves here); training runs 120 steps instead of 40
(24 s instead of 8 s, so that a pod is deleted, and replaced, while it trains); and the checkpoint directory
is a volume every worker mounts. The example resumes from the checkpoint rank 0 writes, which every rank
must read: ``kubetrain run`` gives its processes one filesystem, a cluster a ReadWriteMany volume, and this
one-node cluster a hostPath directory.

The pod deleted is neither worker-0 (its torchrun agent hosts the c10d rendezvous store that
``PET_RDZV_ENDPOINT`` names; without it no agent can re-rendezvous) nor rank 0 (whose log is watched).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.realpods import RealCluster, scratch_namespace, wait_until
from kubetrain.envtest import realnode
from waiting import PATIENCE

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pytorch-elastic" / "job.yaml"
JOB = "pytorch-elastic"
IMAGE = "localhost/kubetrain/pytorch:2.13.0"
STEPS = 120
CHECKPOINTS = "/opt/kubetrain/.state/checkpoints/pytorch-elastic"  # the image's WORKDIR + the example's arg
JOB_TIMEOUT_SECONDS = 480.0
JOINED = re.compile(r"^rank (\d+) of (\d+) joined \(pid \d+, restart (\d+)\)$", re.MULTILINE)
STARTS = re.compile(r"^rank \d+ starts at step (\d+)$", re.MULTILINE)
STEP = re.compile(r"^step (\d+) loss ", re.MULTILINE)


@dataclass(frozen=True)
class Observed:
    """What the job did, read from its pods and logs while it ran."""

    cluster: RealCluster
    namespace: str
    deleted: str
    deleted_uid: str
    steps_before_deletion: int
    rank0_before_deletion: str
    survivors: dict[str, str]
    replacement: dict[str, Any]
    replacement_log: str
    outcome: str


def _manifest(checkpoints: Path) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    template = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    (container,) = template["spec"]["containers"]
    container["image"] = IMAGE
    container["imagePullPolicy"] = "Never"
    container["args"] = [*container["args"], "--steps", str(STEPS)]
    container["volumeMounts"] = [{"name": "checkpoints", "mountPath": CHECKPOINTS}]
    template["spec"]["volumes"] = [
        {"name": "checkpoints", "hostPath": {"path": str(checkpoints), "type": "DirectoryOrCreate"}}
    ]
    template["spec"]["terminationGracePeriodSeconds"] = 5
    return job


def _logs(cluster: RealCluster, namespace: str, pod: str) -> str:
    done = cluster.kubectl("logs", "-n", namespace, pod)
    return done.stdout if done.returncode == 0 else ""


def _outcome(cluster: RealCluster, namespace: str) -> str | None:
    job = cluster.api.get(f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/{JOB}")
    conditions = job.get("status", {}).get("conditions") or []
    done = [c["type"] for c in conditions if c["type"] in ("Succeeded", "Failed") and c["status"] == "True"]
    return done[0] if done else None


def _run(cluster: RealCluster, namespace: str, checkpoints: Path) -> Observed:
    cluster.api.create(f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs", _manifest(checkpoints))
    workers = [f"{JOB}-worker-{index}" for index in range(3)]

    def training_rank0() -> tuple[str, int] | None:
        """The pod whose rank 0 has logged a few steps of the first rendezvous (all three joined)."""
        for pod in workers:
            logs = _logs(cluster, namespace, pod)
            steps = [int(step) for step in STEP.findall(logs)]
            if re.search(r"^rank 0 of 3 joined", logs, re.MULTILINE) and steps and steps[-1] >= 5:
                return pod, steps[-1]
        return None

    rank0, steps_before = wait_until("rank 0 training in a group of 3", training_rank0, JOB_TIMEOUT_SECONDS)
    deleted = next(pod for pod in reversed(workers) if pod not in (rank0, workers[0]))
    pod_path = f"/api/v1/namespaces/{namespace}/pods/{deleted}"
    deleted_uid = cluster.api.get(pod_path)["metadata"]["uid"]
    cluster.api.delete(pod_path)

    def replacement_running() -> dict[str, Any] | None:
        # One read: between an exists() and a get() the deleted pod's object can go (CI saw the 404).
        pod = cluster.api.get_or_none(pod_path)
        if pod is None:
            return None
        new = pod["metadata"]["uid"] != deleted_uid and pod.get("status", {}).get("phase") == "Running"
        return dict(pod) if new else None

    replacement = wait_until(f"{deleted} replaced and running", replacement_running, PATIENCE)
    outcome = wait_until(
        f"{JOB} Succeeded or Failed", lambda: _outcome(cluster, namespace), JOB_TIMEOUT_SECONDS
    )
    return Observed(
        cluster=cluster,
        namespace=namespace,
        deleted=deleted,
        deleted_uid=deleted_uid,
        steps_before_deletion=steps_before,
        rank0_before_deletion=rank0,
        survivors={pod: _logs(cluster, namespace, pod) for pod in workers if pod != deleted},
        replacement=replacement,
        replacement_log=_logs(cluster, namespace, deleted),
        outcome=outcome,
    )


@pytest.fixture(scope="module")
def elastic_job(operator: RealCluster) -> Iterator[Observed]:
    realnode.load_images(realnode.node_paths(operator.run_dir), ["pytorch"])
    with scratch_namespace(operator, "pytorch-elastic") as namespace:
        checkpoints = realnode.node_paths(operator.run_dir).root / "test-volumes" / namespace
        try:
            yield _run(operator, namespace, checkpoints)
        finally:
            shutil.rmtree(checkpoints, ignore_errors=True)


def test_the_worker_pod_is_deleted_mid_training(elastic_job: Observed) -> None:
    assert 5 <= elastic_job.steps_before_deletion < STEPS - 1
    assert elastic_job.deleted not in (elastic_job.rank0_before_deletion, f"{JOB}-worker-0")


def test_the_surviving_agents_re_rendezvous_and_go_on_from_the_checkpoint(elastic_job: Observed) -> None:
    for pod, logs in elastic_job.survivors.items():
        rounds = [(int(world), int(restart)) for _, world, restart in JOINED.findall(logs)]
        starts = [int(step) for step in STARTS.findall(logs)]

        assert rounds[0] == (3, 0), (pod, logs)
        # A round after the first: the agent re-rendezvoused. Its restart count need not grow: torchrun counts
        # only a restart for a worker it saw fail, and the replacement pod's agent may have joined (a restart
        # for a new member, uncounted) before the survivor's worker failed on its lost peer.
        assert len(rounds) >= 2, (pod, logs)
        # Each (re)start of the workers resumes: the first from scratch, a later one from the checkpoint.
        assert starts[0] == 0
        assert max(starts[1:]) > 0, (pod, logs)


def test_the_operator_replaces_the_deleted_pod_and_the_new_one_joins_the_training(
    elastic_job: Observed,
) -> None:
    worlds = [int(world) for _, world, _ in JOINED.findall(elastic_job.replacement_log)]
    starts = [int(step) for step in STARTS.findall(elastic_job.replacement_log)]

    assert elastic_job.replacement["metadata"]["uid"] != elastic_job.deleted_uid
    assert worlds and worlds[-1] == 3, elastic_job.replacement_log
    assert starts and starts[-1] > 0, elastic_job.replacement_log


def test_the_elastic_job_succeeds_after_losing_a_worker(elastic_job: Observed) -> None:
    logs = "\n".join([*elastic_job.survivors.values(), elastic_job.replacement_log])

    assert elastic_job.outcome == "Succeeded", logs
    assert "training finished" in logs
    assert max(int(step) for step in STEP.findall(logs)) == STEPS - 1
