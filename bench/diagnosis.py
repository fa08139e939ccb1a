"""What diagnosis costs a reconcile: ``engine.diagnosis.diagnose`` and the kube substrate's reading of the pod
fields it needs, at N replicas, in the states that make findings.

A 5,000-replica job is reconciled on every change of any of its pods, so both must stay linear in replicas
and small next to the reconcile itself. For each N and each state this prints the median over R repetitions
of:

- ``diagnose``: the pure function on N observed replicas;
- ``reconcile``: the engine's whole reconcile of the same observation (diagnosis included);
- ``observe``: ``kube.observe.observe`` of N pod objects as the API server returns them (diagnosis's fields
  included), and ``of which fields``: the part spent on them (containers, the scheduler's reason, readiness,
  gang membership).

Usage::

    .venv/bin/python bench/diagnosis.py [--replicas 500 5000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from kubetrain.api.jobs import TrainingJob
from kubetrain.api.manifest import parse_job
from kubetrain.engine.admission import admit
from kubetrain.engine.diagnosis import diagnose
from kubetrain.engine.reconciler import reconcile
from kubetrain.engine.types import Observation, ObservedContainer, ObservedReplica, Phase, Traits
from kubetrain.frameworks.registry import framework_for
from kubetrain.kube.observe import (
    conditions_of,
    gang_scheduled,
    observe,
    observed_containers,
    ready_since,
    unschedulable_message,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
GAP = "0/500 nodes are available: 500 Insufficient nvidia.com/gpu. preemption: 0/500 nodes are available."
LINES = "step 1\nstep 2\nTraceback (most recent call last):\nKeyError: 'lr'\n"
STATES = ("healthy", "crash loop", "half scheduled", "waiting for master")


def job(workers: int) -> TrainingJob:
    container = {"name": "pytorch", "image": "trainer:1", "resources": {"limits": {"memory": "8Gi"}}}
    replica = {"template": {"spec": {"containers": [container]}}, "restartPolicy": "OnFailure"}
    wire = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "big", "namespace": "ns", "uid": "u"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {**replica, "replicas": 1},
                "Worker": {**replica, "replicas": workers},
            }
        },
    }
    return admit(parse_job(wire))


def replicas(state: str, workers: int) -> tuple[ObservedReplica, ...]:
    main = ObservedContainer("pytorch", image="trainer:1", image_id="sha256:" + "a" * 64, memory_limit="8Gi")
    master = ObservedReplica("Master", 0, Phase.RUNNING, ready=True, placed=True, containers=(main,))
    found = [master]
    for index in range(workers):
        if state == "crash loop":
            looping = ObservedContainer(
                "pytorch",
                waiting_reason="CrashLoopBackOff",
                last_exit_code=1,
                last_lines=LINES,
                restart_count=5,
            )
            found.append(ObservedReplica("Worker", index, Phase.RUNNING, placed=True, containers=(looping,)))
        elif state == "half scheduled" and index % 2:
            found.append(
                ObservedReplica("Worker", index, Phase.PENDING, unschedulable=GAP, containers=(main,))
            )
        elif state == "waiting for master":
            wait = ObservedContainer("init-pytorch", init=True, running_since=NOW - timedelta(seconds=300))
            found.append(
                ObservedReplica("Worker", index, Phase.PENDING, placed=True, containers=(wait, main))
            )
        else:
            found.append(
                ObservedReplica("Worker", index, Phase.RUNNING, ready=True, placed=True, containers=(main,))
            )
    return tuple(found)


def pod(index: int) -> dict[str, Any]:
    """A running worker pod as the API server returns it (the fields observe reads)."""
    return {
        "metadata": {
            "name": f"big-worker-{index}",
            "namespace": "ns",
            "labels": {
                "training.kubeflow.org/replica-type": "worker",
                "training.kubeflow.org/replica-index": str(index),
                "training.kubeflow.org/job-name": "big",
            },
        },
        "spec": {
            "nodeName": f"node-{index}",
            "schedulerName": "default-scheduler",
            "initContainers": [{"name": "init-pytorch", "image": "alpine:3.10"}],
            "containers": [
                {"name": "pytorch", "image": "trainer:1", "resources": {"limits": {"memory": "8Gi"}}}
            ],
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-03-01T11:00:00Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-03-01T11:01:00Z"},
            ],
            "initContainerStatuses": [
                {"name": "init-pytorch", "restartCount": 0, "state": {"terminated": {"exitCode": 0}}}
            ],
            "containerStatuses": [
                {
                    "name": "pytorch",
                    "imageID": "trainer@sha256:" + "a" * 64,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": "2026-03-01T11:00:30Z"}},
                }
            ],
        },
    }


def median_seconds(work: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def engine_row(count: int, state: str, repeat: int) -> str:
    training_job = job(count - 1)
    framework = framework_for(training_job)
    observed = replicas(state, count - 1)
    keys = frozenset((r.replica_type, r.index) for r in observed)
    observation = Observation(replicas=observed, services=keys)
    traits = Traits(colocated=False)
    spent = median_seconds(lambda: diagnose(training_job, framework, observed, NOW), repeat)
    whole = median_seconds(lambda: reconcile(training_job, observation, NOW, traits), repeat)
    per_replica = spent / count * 1e6
    return f"| {count:,} | {state} | {spent * 1e3:.1f} ms | {whole * 1e3:.1f} ms | {per_replica:.1f} µs |"


def observe_row(count: int, repeat: int) -> str:
    training_job = job(count)
    framework = framework_for(training_job)
    pods = [pod(i) for i in range(count)]

    def fields() -> None:
        for each in pods:
            observed_containers(each)
            conditions = conditions_of(each)
            unschedulable_message(conditions)
            ready_since(conditions)
            gang_scheduled(each)

    whole = median_seconds(lambda: observe(training_job, framework, pods, None), repeat)
    spent = median_seconds(fields, repeat)
    return f"| {count:,} | {whole * 1e3:.1f} ms | {spent * 1e3:.1f} ms | {spent / count * 1e6:.1f} µs |"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--replicas", type=int, nargs="+", default=[500, 5000])
    parser.add_argument("--repeat", type=int, default=7)
    options = parser.parse_args()
    print("| replicas | state | diagnose | reconcile | per replica (diagnose) |")
    print("|---|---|---|---|---|")
    for count in options.replicas:
        for state in STATES:
            print(engine_row(count, state, options.repeat))
    print()
    print("| pods | observe | of which diagnosis's fields | per pod (fields) |")
    print("|---|---|---|---|")
    for count in options.replicas:
        print(observe_row(count, options.repeat))


if __name__ == "__main__":
    main()
