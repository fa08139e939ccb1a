"""The reconciler hands the job's findings to the substrates in its Decision, and looks again when one may
change with time alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from builders import job
from kubetrain.api.common import ConditionType
from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.diagnosis import GANG_DEADLOCK, MASTER_WAIT_GRACE_SECONDS, OUT_OF_MEMORY
from kubetrain.engine.reconciler import reconcile
from kubetrain.engine.types import Decision, Observation, ObservedContainer, ObservedReplica, Phase, Traits

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
KUBE = Traits(colocated=False)
GAP = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."


def decide(training_job: TrainingJob, *replicas: ObservedReplica, traits: Traits = KUBE) -> Decision:
    keys = frozenset((r.replica_type, r.index) for r in replicas)
    return reconcile(training_job, Observation(replicas=replicas, services=keys), NOW, traits)


def pytorch(workers: int, **options: object) -> TrainingJob:
    replicas = {"Master": 1, "Worker": workers} if workers else {"Master": 1}
    return job("PyTorchJob", replicas, name="gpu", **options)


def running(replica_type: str, index: int) -> ObservedReplica:
    return ObservedReplica(replica_type, index, Phase.RUNNING, ready=True)


def test_the_findings_of_a_running_job_are_in_its_decision() -> None:
    decision = decide(
        pytorch(1), running("Master", 0), ObservedReplica("Worker", 0, Phase.PENDING, unschedulable=GAP)
    )

    assert [f.reason for f in decision.findings] == [GANG_DEADLOCK]


def test_the_reconcile_that_fails_a_job_carries_the_finding_that_explains_it() -> None:
    killed = ObservedContainer("pytorch", last_reason="OOMKilled", last_exit_code=137, memory_limit="64Mi")
    master = ObservedReplica("Master", 0, Phase.FAILED, exit_code=137, containers=(killed,))

    decision = decide(pytorch(0, restart_policy="Never"), master)

    assert decision.status.is_true(ConditionType.FAILED)
    assert [f.reason for f in decision.findings] == [OUT_OF_MEMORY]


def test_a_job_finished_earlier_is_not_diagnosed_again() -> None:
    killed = ObservedContainer("pytorch", last_reason="OOMKilled", last_exit_code=137)
    master = ObservedReplica("Master", 0, Phase.FAILED, exit_code=137, containers=(killed,))
    failed = pytorch(0, restart_policy="Never")
    failed = failed.with_status(decide(failed, master).status)

    assert decide(failed, master).findings == ()


def test_a_suspended_job_has_no_findings() -> None:
    suspended = pytorch(1, spec={"runPolicy": {"suspend": True}})

    assert decide(suspended, ObservedReplica("Worker", 0, Phase.PENDING, unschedulable=GAP)).findings == ()


def test_the_engine_looks_again_when_a_wait_for_the_master_outlasts_its_grace() -> None:
    wait = ObservedContainer("init-pytorch", init=True, running_since=NOW - timedelta(seconds=20))
    worker = ObservedReplica("Worker", 0, Phase.PENDING, containers=(wait,))

    decision = decide(pytorch(1), ObservedReplica("Master", 0, Phase.RUNNING), worker)

    assert decision.findings == ()
    assert decision.requeue_after == MASTER_WAIT_GRACE_SECONDS - 20
