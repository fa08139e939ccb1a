"""Steady replicas: running as started, nothing any rule finds in them but that they are active.

The rules look at the other replicas only, so a running job's reconcile costs what changed, not its size. The
classification is kept on each observation (frozen, the same object from one reconcile to the next while its
pod is unchanged); it never depends on the time, the job or the other replicas, so what does (a crash loop
healing, a wait outlasting its grace, a lost node, one build of an image) is still decided on each reconcile.
"""

from __future__ import annotations

import gc
import weakref
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from builders import defaulted
from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.diagnosis import (
    CRASH_LOOP,
    HEALTHY_AFTER_SECONDS,
    IMAGE_DIGEST_MISMATCH,
    INIT_WAITING_FOR_MASTER,
    MASTER_WAIT_GRACE_SECONDS,
    diagnose,
)
from kubetrain.engine.types import (
    CreateReplica,
    CreateService,
    Disruption,
    Observation,
    ObservedContainer,
    ObservedReplica,
    Phase,
)
from kubetrain.frameworks.registry import framework_for

from .fakes import NOW, everything_running, toy_job
from .support import actions_of, decide

INIT = "init-pytorch"


def main(**fields: Any) -> ObservedContainer:
    return ObservedContainer("pytorch", **{"image": "trainer:1", "image_id": "trainer@sha256:aaa", **fields})


def running(replica_type: str, index: int, *containers: ObservedContainer, **fields: Any) -> ObservedReplica:
    return ObservedReplica(
        replica_type, index, Phase.RUNNING, ready=True, containers=containers or (main(),), **fields
    )


def pytorch(workers: int = 1) -> TrainingJob:
    return defaulted("PyTorchJob", {"Master": 1, "Worker": workers}, name="gpu")


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


# --- what is steady -----------------------------------------------------------------------------------------


def test_a_replica_running_as_started_is_steady() -> None:
    assert running("Worker", 0, ObservedContainer(INIT, init=True), main(running_since=ago(5))).steady


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"phase": Phase.PENDING}, id="pending"),
        pytest.param({"phase": Phase.SUCCEEDED, "exit_code": 0}, id="succeeded"),
        pytest.param({"phase": Phase.FAILED, "exit_code": 1}, id="failed"),
        pytest.param({"terminating": True}, id="terminating"),
        pytest.param({"restart_count": 1}, id="restarted"),
        pytest.param({"retried_failures": 1}, id="retried by its batch Job"),
        pytest.param({"warnings": (("BackOff", "restarting"),)}, id="warned about"),
        pytest.param({"unschedulable": "0/1 nodes are available"}, id="unschedulable"),
        pytest.param({"disruption": Disruption("EvictionByEvictionAPI")}, id="disrupted"),
        pytest.param({"reason": "Evicted"}, id="with a reason"),
        pytest.param({"containers": (main(waiting_reason="CrashLoopBackOff"),)}, id="a container waiting"),
        pytest.param({"containers": (main(last_exit_code=1, last_reason="Error"),)}, id="a container ended"),
        pytest.param({"containers": (main(last_reason="OOMKilled"),)}, id="a container OOM-killed"),
        pytest.param({"containers": (main(restart_count=1),)}, id="a container restarted"),
        pytest.param(
            {"containers": (ObservedContainer(INIT, init=True, running_since=ago(5)), main())},
            id="an init container running",
        ),
    ],
)
def test_a_replica_with_anything_a_rule_reads_is_not_steady(fields: dict[str, Any]) -> None:
    assert not replace(running("Worker", 0), **fields).steady


# --- the same observations at another time ---------------------------------------------------------------


def test_crash_loop_of_the_same_observation_heals_when_diagnosed_past_ten_minutes_and_not_before() -> None:
    started = ago(60)
    looping = main(restart_count=5, last_exit_code=1, last_reason="Error", running_since=started)
    replicas = (running("Master", 0), running("Worker", 0, looping))
    job = pytorch()
    healed_at = started + timedelta(seconds=HEALTHY_AFTER_SECONDS)

    before = diagnose(job, framework_for(job), replicas, NOW)
    after = diagnose(job, framework_for(job), replicas, healed_at)
    again_before = diagnose(job, framework_for(job), replicas, NOW)

    assert [f.reason for f in before.findings] == [CRASH_LOOP]
    assert before.recheck_in == HEALTHY_AFTER_SECONDS - 60
    assert after.findings == ()
    assert again_before == before


def test_master_wait_on_the_same_observation_is_a_finding_once_diagnosed_past_its_grace() -> None:
    master = running("Master", 0, ready_since=ago(10))  # steady: its readiness is still read
    worker = ObservedReplica(
        "Worker", 0, Phase.PENDING, containers=(ObservedContainer(INIT, init=True, running_since=ago(600)),)
    )
    job = pytorch()
    grace_ends = ago(10) + timedelta(seconds=MASTER_WAIT_GRACE_SECONDS)

    within = diagnose(job, framework_for(job), (master, worker), NOW)
    past = diagnose(job, framework_for(job), (master, worker), grace_ends)

    assert master.steady
    assert within.findings == ()
    assert within.recheck_in == MASTER_WAIT_GRACE_SECONDS - 10
    assert [f.reason for f in past.findings] == [INIT_WAITING_FOR_MASTER]


# --- changes, departures --------------------------------------------------------------------------------


def test_crash_loop_of_a_steady_replica_that_changes_is_found_in_its_new_observation() -> None:
    job = pytorch()
    steady = (running("Master", 0), running("Worker", 0))
    looping = replace(steady[1], containers=(main(restart_count=3, waiting_reason="CrashLoopBackOff"),))

    assert diagnose(job, framework_for(job), steady, NOW).findings == ()
    assert [f.reason for f in diagnose(job, framework_for(job), (steady[0], looping), NOW).findings] == [
        CRASH_LOOP
    ]


def test_image_digest_mismatch_among_steady_replicas_is_found() -> None:
    job = pytorch(workers=2)
    other_build = main(image_id="trainer@sha256:bbb")
    replicas = (running("Master", 0), running("Worker", 0), running("Worker", 1, other_build))

    assert all(r.steady for r in replicas)
    assert [f.reason for f in diagnose(job, framework_for(job), replicas, NOW).findings] == [
        IMAGE_DIGEST_MISMATCH
    ]


def test_replica_counts_leave_out_a_steady_replica_that_is_gone_and_it_is_created_again() -> None:
    job = toy_job(workers=3)
    everything = everything_running(job)
    gone = Observation(replicas=everything.replicas[:-1], services=everything.services)

    assert decide(job, everything).status.replica_statuses["Worker"].active == 3
    left = decide(job, gone)
    assert left.status.replica_statuses["Worker"].active == 2
    assert actions_of(left, CreateReplica) == [CreateReplica("Worker", 2)]


def test_replica_services_are_created_for_steady_replicas_without_one() -> None:
    job = toy_job(workers=2)
    everything = everything_running(job)
    services = (everything.services or frozenset()) - {("Worker", 1)}

    decision = decide(job, Observation(replicas=everything.replicas, services=services))

    assert actions_of(decision, CreateService) == [CreateService("Worker", 1)]
    assert decision.status.replica_statuses["Worker"].active == 2


def test_the_engine_keeps_nothing_of_an_observation_once_its_substrate_drops_it() -> None:
    job = toy_job(workers=2)
    observation = everything_running(job)
    kept = [weakref.ref(replica) for replica in observation.replicas]

    decide(job, observation)
    del observation
    gc.collect()

    assert [ref() for ref in kept] == [None, None, None]
