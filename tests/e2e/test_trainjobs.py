"""Kubeflow Trainer v2's TrainJob on the real node: examples/trainjob/torch-ddp.yaml, applied unchanged, on
the operator's built-in ``torch-distributed`` runtime (its image replaced by the TrainJob's, the locally
built PyTorch one). The operator applies Trainer's JobSet, the real JobSet v0.12.0 controller makes its Job
and headless Service, and two real pods run ``torchrun`` each: they rendezvous at node 0's JobSet DNS name,
train over gloo and the TrainJob goes ``Complete`` from its JobSet.

The job runs once for the module; each test checks one rule of what it did. Its wall time (apply to
Complete) is printed on stderr (``e2e: ...``, with ``-s``).
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.realpods import (
    RealCluster,
    jobset_pods,
    scratch_namespace,
    trainjob,
    trainjob_outcome,
    wait_until,
)
from kubetrain.envtest import realnode
from waiting import PATIENCE

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trainjob" / "torch-ddp.yaml"
JOB = "torch-ddp"
JOB_TIMEOUT_SECONDS = 420.0
LOSS = re.compile(r"^step (\d+) loss ([0-9.]+)$", re.MULTILINE)


@dataclass(frozen=True)
class FinishedTrainJob:
    cluster: RealCluster
    namespace: str
    outcome: dict[str, Any]
    trainjob: dict[str, Any]
    pods: list[dict[str, Any]]

    def logs(self, pod: dict[str, Any]) -> str:
        done = self.cluster.kubectl("logs", "-n", self.namespace, pod["metadata"]["name"], "-c", "node")
        assert done.returncode == 0, done.stderr
        return done.stdout


RESTARTED = "NodeRestarted"


def _restarted(cluster: RealCluster, namespace: str) -> dict[str, Any] | None:
    """A node whose container restarted, with that container's previous log. torchrun's static rendezvous
    (the one PET_MASTER_ADDR gives) never lets a restarted node rejoin its group, so the job cannot finish:
    the test stops there with the log that says why, which the next restarts would replace."""
    for pod in jobset_pods(cluster.api, namespace, JOB):
        if any(c.get("restartCount") for c in pod.get("status", {}).get("containerStatuses", [])):
            name = pod["metadata"]["name"]
            previous = cluster.kubectl("logs", "-n", namespace, name, "-c", "node", "--previous")
            return {"type": RESTARTED, "previous_log": f"{name}: {previous.stdout}{previous.stderr}"}
    return None


@pytest.fixture(scope="module")
def ddp_trainjob(operator: RealCluster) -> Iterator[FinishedTrainJob]:
    example = yaml.safe_load(EXAMPLE.read_text())
    assert example["spec"]["trainer"]["image"] == "localhost/kubetrain/pytorch:2.13.0"
    realnode.load_images(realnode.node_paths(operator.run_dir), ["pytorch"])
    with scratch_namespace(operator, "trainjob-ddp") as namespace:
        started = time.monotonic()
        applied = operator.kubectl("apply", "-n", namespace, "-f", str(EXAMPLE))
        assert applied.returncode == 0, applied.stderr
        outcome = wait_until(
            f"TrainJob {JOB} Complete or Failed, or a node restarted",
            lambda: trainjob_outcome(operator.api, namespace, JOB) or _restarted(operator, namespace),
            JOB_TIMEOUT_SECONDS,
        )
        if outcome["type"] == RESTARTED:
            pytest.fail(f"a node restarted: its run before was\n{outcome['previous_log']}")
        print(
            f"e2e: TrainJob {JOB}: applied to {outcome['type']} in {time.monotonic() - started:.1f} s",
            file=sys.__stderr__,
            flush=True,
        )
        yield FinishedTrainJob(
            operator,
            namespace,
            outcome,
            trainjob(operator.api, namespace, JOB),
            jobset_pods(operator.api, namespace, JOB),
        )


def test_the_torch_ddp_trainjob_completes_from_its_jobset(ddp_trainjob: FinishedTrainJob) -> None:
    outcome = ddp_trainjob.outcome
    assert outcome["type"] == "Complete", ddp_trainjob.logs(ddp_trainjob.pods[0])
    assert (outcome["reason"], outcome["message"]) == ("AllJobsCompleted", "jobset completed successfully")
    jobs_status = ddp_trainjob.trainjob["status"]["jobsStatus"]
    assert [(s["name"], s["succeeded"], s["failed"]) for s in jobs_status] == [("node", 1, 0)]


def test_each_node_is_a_real_pod_of_the_trainjobs_image_on_the_real_node(
    ddp_trainjob: FinishedTrainJob,
) -> None:
    # JobSet's names: Job <jobset>-<replicatedJob>-<replica>, its pods <job>-<completion index>-<random>.
    assert [p["metadata"]["name"].rsplit("-", 1)[0] for p in ddp_trainjob.pods] == [
        f"{JOB}-node-0-0",
        f"{JOB}-node-0-1",
    ]
    for pod in ddp_trainjob.pods:
        assert pod["spec"]["nodeName"] == realnode.NODE_NAME
        assert pod["status"]["phase"] == "Succeeded"
        (node,) = [c for c in pod["spec"]["containers"] if c["name"] == "node"]
        assert node["image"] == "localhost/kubetrain/pytorch:2.13.0"
        assert node["command"] == ["torchrun", "examples/pytorch-ddp/train_ddp.py"]


def test_torchrun_on_each_node_joins_the_process_group_at_node_0s_jobset_dns_name(
    ddp_trainjob: FinishedTrainJob,
) -> None:
    master = f"{JOB}-node-0-0.{JOB}"
    service = ddp_trainjob.cluster.api.get(f"/api/v1/namespaces/{ddp_trainjob.namespace}/services/{JOB}")
    assert service["spec"]["clusterIP"] == "None"
    for pod in ddp_trainjob.pods:
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert (env["PET_NNODES"], env["PET_NPROC_PER_NODE"], env["PET_MASTER_ADDR"]) == ("2", "1", master)
    ranks = set()
    for pod in ddp_trainjob.pods:
        joined = re.findall(
            rf"^rank (\d)/2 joined the process group via {re.escape(master)}:(\d+), training on cpu$",
            ddp_trainjob.logs(pod),
            re.M,
        )
        assert len(joined) == 1, ddp_trainjob.logs(pod)
        ranks.add(joined[0][0])
    assert ranks == {"0", "1"}


def test_the_losses_fall_in_node_0s_log(ddp_trainjob: FinishedTrainJob) -> None:
    logs = ddp_trainjob.logs(ddp_trainjob.pods[0])
    losses = [float(loss) for _, loss in LOSS.findall(logs)]

    assert len(losses) >= 2
    assert losses[-1] < losses[0]
    assert "training finished" in logs


def test_the_examples_progress_reports_set_the_trainjobs_trainer_status(
    ddp_trainjob: FinishedTrainJob,
) -> None:
    # Rank 0 reports through kubetrain.reporting, which reads Trainer's KUBEFLOW_TRAINER_SERVER_* variables;
    # its last report is sent before the training ends, and written within a second of the one before.
    def reported_done() -> dict[str, Any] | None:
        found = trainjob(ddp_trainjob.cluster.api, ddp_trainjob.namespace, JOB)["status"].get("trainerStatus")
        return found if found is not None and found.get("progressPercentage") == 100 else None

    status = wait_until("the last progress report written", reported_done, PATIENCE)
    assert [m["name"] for m in status["metrics"]] == ["loss"]
