"""docs/operations.md's diagnosis list: every reason has an example, and each example is the exact text the
engine gives for the situation the page describes."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from builders import defaulted
from docs_blocks import ROOT
from kubetrain.api.common import JobStatus
from kubetrain.api.progress import TrainerStatus
from kubetrain.engine.diagnosis import REASONS, Finding, diagnose
from kubetrain.engine.reconciler import reconcile
from kubetrain.engine.types import (
    Observation,
    ObservedContainer,
    ObservedNode,
    ObservedReplica,
    Phase,
    Traits,
)
from kubetrain.frameworks.registry import framework_for

PAGE = ROOT / "docs" / "operations.md"
TEXT_BLOCK = re.compile(r"^```text\n(.*?)^```$", re.MULTILINE | re.DOTALL)
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
GAP = (
    "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: 0/1 "
    "nodes are available: 1 No preemption victims found for incoming pod."
)
IMAGE = "registry.example.com/team/trainer:v2"
JOB = defaulted(
    "PyTorchJob",
    {"Master": 1, "Worker": 4},
    name="ddp",
    containers=[{"name": "pytorch", "image": IMAGE, "resources": {"limits": {"memory": "16Gi"}}}],
)


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def main(**fields: Any) -> ObservedContainer:
    return ObservedContainer("pytorch", image=IMAGE, memory_limit="16Gi", **fields)


def running(replica_type: str, index: int, *containers: ObservedContainer, **fields: Any) -> ObservedReplica:
    return ObservedReplica(
        replica_type,
        index,
        Phase.RUNNING,
        ready=True,
        placed=True,
        containers=containers or (main(),),
        **fields,
    )


def pending(replica_type: str, index: int, *containers: ObservedContainer, **fields: Any) -> ObservedReplica:
    return ObservedReplica(replica_type, index, Phase.PENDING, containers=containers or (main(),), **fields)


def waiting_for_master(index: int) -> ObservedReplica:
    wait = ObservedContainer("init-pytorch", image="alpine:3.10", init=True, running_since=ago(300))
    return pending("Worker", index, wait, main(), placed=True)


def found(*replicas: ObservedReplica) -> Finding:
    [finding] = diagnose(JOB, framework_for(JOB), replicas, NOW).findings
    return finding


def gang_deadlock() -> Finding:
    workers = [running("Worker", i) for i in range(3)]
    return found(running("Master", 0), *workers, pending("Worker", 3, unschedulable=GAP))


def insufficient_resources() -> Finding:
    replicas = [
        pending("Master", 0, unschedulable=GAP),
        *(pending("Worker", i, unschedulable=GAP) for i in range(4)),
    ]
    return found(*replicas)


def crash_loop() -> Finding:
    lines = (
        'Traceback (most recent call last):\n  File "train.py", line 42, in <module>\n'
        "KeyError: 'learning_rate'\n"
    )
    looping = main(
        waiting_reason="CrashLoopBackOff",
        last_exit_code=1,
        last_reason="Error",
        last_lines=lines,
        restart_count=4,
    )
    return found(running("Master", 0), running("Worker", 0), running("Worker", 1, looping))


def image_pull_failed() -> Finding:
    missing = main(
        waiting_reason="ErrImagePull",
        waiting_message=(
            f'rpc error: code = NotFound desc = failed to pull and unpack image "{IMAGE}": not found'
        ),
    )
    return found(*(pending("Worker", i, missing, placed=True) for i in range(4)), running("Master", 0))


def out_of_memory() -> Finding:
    killed = main(
        last_reason="OOMKilled", last_exit_code=137, restart_count=2, waiting_reason="CrashLoopBackOff"
    )
    return found(running("Master", 0), running("Worker", 0, killed))


def init_waiting_for_master() -> Finding:
    master = ObservedReplica(
        "Master", 0, Phase.RUNNING, placed=True, containers=(main(running_since=ago(400)),)
    )
    return found(master, *(waiting_for_master(i) for i in range(4)))


def init_waiting_for_a_ready_master() -> Finding:
    return found(running("Master", 0, ready_since=ago(240)), *(waiting_for_master(i) for i in range(4)))


def image_digest_mismatch() -> Finding:
    old = main(image_id=f"registry.example.com/team/trainer@sha256:{'3f2a9c' * 10}e0c1")
    new = main(image_id=f"registry.example.com/team/trainer@sha256:{'b71d04' * 10}aa92")
    return found(
        running("Master", 0, old), *(running("Worker", i, old) for i in range(3)), running("Worker", 3, new)
    )


def progress_deadline_exceeded() -> Finding:
    annotations = {"kubetrain.dev/progress-deadline-seconds": "600"}
    report = TrainerStatus.model_validate(
        {
            "progressPercentage": 42,
            "metrics": [{"name": "loss", "value": "0.31"}],
            "lastUpdatedTime": "2026-03-01T11:40:00Z",
        }
    )
    running_since = JobStatus.model_validate(
        {"conditions": [{"type": "Running", "status": "True", "lastTransitionTime": "2026-03-01T11:00:00Z"}]}
    )
    job = JOB.model_copy(update={"metadata": JOB.metadata.model_copy(update={"annotations": annotations})})
    job = job.with_status(running_since.model_copy(update={"trainer_status": report}))
    replicas = (running("Master", 0), *(running("Worker", i) for i in range(4)))
    keys = frozenset((r.replica_type, r.index) for r in replicas)
    decision = reconcile(job, Observation(replicas=replicas, services=keys), NOW, Traits(colocated=False))
    [finding] = decision.findings
    return finding


def node_lost() -> Finding:
    node = ObservedNode(
        "gpu-7", "Unknown", ago(25), "NodeStatusUnknown", "Kubelet stopped posting node status."
    )
    replicas = (
        running("Master", 0, node="gpu-3"),
        running("Worker", 0, node="gpu-3"),
        *(running("Worker", i, node="gpu-7") for i in (1, 2)),
    )
    [finding] = diagnose(JOB, framework_for(JOB), replicas, NOW, nodes=(node,)).findings
    return finding


EXAMPLES = {
    "GangDeadlock": [gang_deadlock],
    "InsufficientResources": [insufficient_resources],
    "CrashLoop": [crash_loop],
    "ImagePullFailed": [image_pull_failed],
    "OutOfMemory": [out_of_memory],
    "InitWaitingForMaster": [init_waiting_for_master, init_waiting_for_a_ready_master],
    "ImageDigestMismatch": [image_digest_mismatch],
    "ProgressDeadlineExceeded": [progress_deadline_exceeded],
    "NodeLost": [node_lost],
}


def test_every_reason_has_an_example_on_the_page() -> None:
    assert sorted(EXAMPLES) == sorted(REASONS)


def test_every_text_block_of_the_page_is_an_example_checked_here() -> None:
    shown = [line for block in TEXT_BLOCK.findall(PAGE.read_text()) for line in block.splitlines()]
    produced = {
        f"  {f.reason}: {f.message}" for examples in EXAMPLES.values() for f in (e() for e in examples)
    }
    assert [line for line in shown if line != "Diagnosis:"] == [line for line in shown if line in produced]


@pytest.mark.parametrize(
    "example", [e for examples in EXAMPLES.values() for e in examples], ids=lambda e: e.__name__
)
def test_the_example_on_the_page_is_what_the_engine_says(example: Callable[[], Finding]) -> None:
    finding = example()
    line = f"  {finding.reason}: {finding.message}"
    assert line in PAGE.read_text().splitlines(), (
        f"docs/operations.md lacks, or has another text for:\n{line}"
    )
