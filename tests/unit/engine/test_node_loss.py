"""Lost nodes: diagnosed at once, and with a node-loss timeout (or an out-of-service taint) their pods are
force-deleted and replaced, counted as disruptions (engine.node_loss, engine.diagnosis)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kubetrain.api.common import ConditionType, RestartPolicy, RunPolicy
from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.diagnosis import diagnose
from kubetrain.engine.fault_policy import NODE_LOSS_TIMEOUT_ANNOTATION, RESTART_SCOPE_ANNOTATION
from kubetrain.engine.node_loss import NODE_LOST
from kubetrain.engine.types import DeleteReplica, Observation, ObservedNode, ObservedReplica, Phase

from .fakes import FRAMEWORK, NOW, replica, toy_job
from .support import actions_of, decide

LOST_AT = NOW - timedelta(seconds=50)
LOST = ObservedNode("node-b", "Unknown", LOST_AT, "NodeStatusUnknown", "Kubelet stopped posting node status.")
READY = ObservedNode("node-a")


def job(timeout: int | None = None, annotations: dict[str, str] | None = None) -> TrainingJob:
    annotations = dict(annotations or {})
    made = toy_job(
        masters=1, workers=1, policy=RestartPolicy.ON_FAILURE, run_policy=RunPolicy(backoff_limit=0)
    )
    if timeout is not None:
        annotations[NODE_LOSS_TIMEOUT_ANNOTATION] = str(timeout)
    metadata = made.metadata.model_copy(update={"annotations": annotations or None})
    return made.model_copy(update={"metadata": metadata})


def on(
    node: str, replica_type: str = "Worker", phase: Phase = Phase.RUNNING, **fields: Any
) -> ObservedReplica:
    return replica(replica_type, 0, phase, node=node, placed=True, **fields)


def scene(*nodes: ObservedNode, worker: ObservedReplica | None = None) -> Observation:
    return Observation(replicas=(on("node-a", "Master"), worker or on("node-b")), nodes=nodes)


def test_pods_on_a_node_that_stopped_reporting_are_diagnosed_node_lost() -> None:
    findings = diagnose(job(), FRAMEWORK, scene(READY, LOST).replicas, NOW, nodes=(READY, LOST)).findings
    assert [(f.reason, f.replicas) for f in findings] == [(NODE_LOST, ("toy-worker-0",))]


def test_the_finding_names_the_node_its_state_and_the_fix() -> None:
    (finding,) = diagnose(job(), FRAMEWORK, scene(READY, LOST).replicas, NOW, nodes=(READY, LOST)).findings
    assert finding.message.startswith(
        "pod toy-worker-0 is on node node-b, which stopped reporting (Ready Unknown since "
        "2026-03-01T11:59:10Z (NodeStatusUnknown: Kubelet stopped posting node status.))"
    )
    assert "kubectl delete node node-b" in finding.message
    assert NODE_LOSS_TIMEOUT_ANNOTATION in finding.message


def test_with_a_timeout_the_finding_says_when_the_pods_are_replaced() -> None:
    (finding,) = diagnose(job(120), FRAMEWORK, scene(READY, LOST).replicas, NOW, nodes=(READY, LOST)).findings
    assert "force-deleted and replaced on another node at 2026-03-01T12:01:10Z" in finding.message


def test_a_not_ready_node_is_lost_too() -> None:
    not_ready = ObservedNode("node-b", "False", LOST_AT, "KubeletNotReady", "container runtime is down")
    findings = diagnose(job(), FRAMEWORK, scene(READY, not_ready).replicas, NOW, nodes=(not_ready,)).findings
    assert "which is not ready (Ready False" in findings[0].message


def test_pods_on_ready_nodes_are_not_diagnosed() -> None:
    assert not diagnose(job(), FRAMEWORK, scene(READY).replicas, NOW, nodes=(READY,)).findings


def test_a_finished_pod_on_a_lost_node_is_not_diagnosed() -> None:
    done = on("node-b", phase=Phase.SUCCEEDED)
    assert not diagnose(job(), FRAMEWORK, scene(LOST, worker=done).replicas, NOW, nodes=(LOST,)).findings


def test_the_engine_raises_the_finding_in_the_reconcile_that_sees_the_node_lost() -> None:
    decision = decide(job(), scene(READY, LOST))
    assert [f.reason for f in decision.findings] == [NODE_LOST]


def test_without_a_timeout_pods_on_a_lost_node_are_left_to_kubernetes() -> None:
    decision = decide(job(), scene(READY, LOST))
    assert not actions_of(decision, DeleteReplica)


def test_before_its_timeout_nothing_is_deleted_and_the_engine_wakes_at_it() -> None:
    decision = decide(job(60), scene(READY, LOST))
    assert not actions_of(decision, DeleteReplica)
    assert decision.requeue_after == 10


def test_past_its_timeout_the_pods_there_are_force_deleted() -> None:
    decision = decide(job(30), scene(READY, LOST))
    assert actions_of(decision, DeleteReplica) == [DeleteReplica("Worker", 0, "node-lost", force=True)]


def test_a_pod_stuck_terminating_there_is_force_deleted_past_the_timeout_too() -> None:
    stuck = on("node-b", terminating=True, deletion_timestamp=NOW)
    decision = decide(job(30), scene(READY, LOST, worker=stuck))
    assert actions_of(decision, DeleteReplica) == [DeleteReplica("Worker", 0, "node-lost", force=True)]


def test_a_lost_node_replacement_is_a_disruption_not_a_failure() -> None:
    decision = decide(job(30), scene(READY, LOST))
    assert not decision.status.is_true(ConditionType.FAILED)  # backoffLimit 0
    assert decision.status.replica_statuses["Worker"].restarts == 0


def test_a_force_deleted_pod_counts_as_a_disruption_once_gone() -> None:
    gone = on("node-b")
    observation = Observation(replicas=(on("node-a", "Master"),), nodes=(READY, LOST), departed=(gone,))
    decision = decide(job(30), observation)
    assert decision.status.replica_statuses["Worker"].disruptions == 1


def test_an_out_of_service_node_has_its_pods_force_deleted_at_once_without_a_timeout() -> None:
    down = ObservedNode("node-b", "Unknown", NOW, "NodeStatusUnknown", out_of_service=True)
    decision = decide(job(), scene(READY, down))
    assert actions_of(decision, DeleteReplica) == [DeleteReplica("Worker", 0, "node-lost", force=True)]


def test_under_restart_scope_job_a_lost_node_restarts_every_replica() -> None:
    decision = decide(job(30, {RESTART_SCOPE_ANNOTATION: "Job"}), scene(READY, LOST))
    assert sorted(actions_of(decision, DeleteReplica), key=lambda d: d.replica_type) == [
        DeleteReplica("Master", 0, "job-restart"),
        DeleteReplica("Worker", 0, "node-lost", force=True),
    ]


def test_a_timeout_that_is_not_a_positive_number_is_refused() -> None:
    failed = decide(job(annotations={NODE_LOSS_TIMEOUT_ANNOTATION: "0"})).status.condition(
        ConditionType.FAILED
    )
    assert failed is not None and failed.reason == "InvalidSpec"
    assert NODE_LOSS_TIMEOUT_ANNOTATION in (failed.message or "")
