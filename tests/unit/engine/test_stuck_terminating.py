"""Improvement: a replica stuck terminating on a lost node does not wedge the job (upstream #2072)."""

from __future__ import annotations

from datetime import timedelta

from kubetrain.api.common import RestartPolicy, RunPolicy
from kubetrain.engine.replicas import STUCK_GRACE_SECONDS
from kubetrain.engine.types import CreateReplica, DeleteReplica

from .fakes import NOW, observe, replica, toy_job
from .support import actions_of, decide

JOB = toy_job(masters=1, workers=1, policy=RestartPolicy.ON_FAILURE)


def test_a_replica_past_its_deletion_deadline_plus_grace_is_force_deleted() -> None:
    deadline = NOW - timedelta(seconds=STUCK_GRACE_SECONDS)
    stuck = replica("Worker", 0, terminating=True, deletion_timestamp=deadline)
    decision = decide(JOB, observe(replica("Master", 0), stuck))
    assert actions_of(decision, DeleteReplica) == [DeleteReplica("Worker", 0, "stuck", force=True)]


def test_a_replica_within_its_grace_is_waited_for_with_a_requeue() -> None:
    deadline = NOW - timedelta(seconds=10)
    terminating = replica("Worker", 0, terminating=True, deletion_timestamp=deadline)
    decision = decide(JOB, observe(replica("Master", 0), terminating))
    assert not actions_of(decision, DeleteReplica)
    assert decision.requeue_after == STUCK_GRACE_SECONDS - 10


def test_a_stuck_replica_is_not_replaced_until_it_is_gone() -> None:
    deadline = NOW - timedelta(seconds=STUCK_GRACE_SECONDS + 1)
    stuck = replica("Worker", 0, terminating=True, deletion_timestamp=deadline)
    decision = decide(JOB, observe(replica("Master", 0), stuck))
    assert not actions_of(decision, CreateReplica)


def test_once_the_stuck_replica_is_gone_it_is_recreated() -> None:
    decision = decide(JOB, observe(replica("Master", 0)))
    assert actions_of(decision, CreateReplica) == [CreateReplica("Worker", 0)]


def test_a_terminating_replica_without_a_deletion_time_is_never_forced() -> None:
    decision = decide(JOB, observe(replica("Master", 0), replica("Worker", 0, terminating=True)))
    assert not actions_of(decision, DeleteReplica)


def test_requeue_after_is_the_earliest_of_every_wake_up() -> None:
    job = toy_job(masters=1, workers=1, run_policy=RunPolicy(active_deadline_seconds=300))
    job = job.with_status(job.status.model_copy(update={"start_time": NOW - timedelta(seconds=290)}))
    terminating = replica("Worker", 0, terminating=True, deletion_timestamp=NOW)
    assert decide(job, observe(replica("Master", 0), terminating)).requeue_after == 10
