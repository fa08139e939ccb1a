"""Gang scheduling (§4.1 g, §4.9)."""

from __future__ import annotations

from datetime import timedelta

from kubetrain.api.common import ConditionType, RunPolicy, SchedulingPolicy
from kubetrain.engine.gang import GANG_WAIT_SECONDS
from kubetrain.engine.types import CreateReplica, PodGroupState, SyncPodGroup, Traits

from .fakes import NOW, observe, toy_job
from .support import actions_of, decide, event_reasons

VOLCANO = Traits(colocated=False, gang_scheduler="volcano")
PLUGINS = Traits(colocated=False, gang_scheduler="scheduler-plugins-scheduler")
ADMITTED = PodGroupState(exists=True, phase="Inqueue")


def test_pod_group_min_member_defaults_to_the_sum_of_replicas() -> None:
    decision = decide(toy_job(masters=1, workers=3), observe(pod_group=ADMITTED), traits=VOLCANO)
    assert actions_of(decision, SyncPodGroup) == [SyncPodGroup(min_member=4)]


def test_pod_group_min_member_is_min_available_when_set() -> None:
    run_policy = RunPolicy(scheduling_policy=SchedulingPolicy(min_available=2))
    decision = decide(toy_job(run_policy=run_policy), observe(pod_group=ADMITTED), traits=VOLCANO)
    assert actions_of(decision, SyncPodGroup) == [SyncPodGroup(min_member=2)]


def test_volcano_creates_no_replicas_while_the_pod_group_is_missing() -> None:
    decision = decide(toy_job(), observe(pod_group=PodGroupState(exists=False)), traits=VOLCANO)
    assert not actions_of(decision, CreateReplica)


def test_volcano_creates_no_replicas_while_the_pod_group_phase_is_pending_or_empty() -> None:
    for phase in ("Pending", "", None):
        observation = observe(pod_group=PodGroupState(exists=True, phase=phase))
        assert not actions_of(decide(toy_job(), observation, traits=VOLCANO), CreateReplica)


def test_volcano_waiting_sets_last_reconcile_time_and_requeues() -> None:
    decision = decide(
        toy_job(), observe(pod_group=PodGroupState(exists=True, phase="Pending")), traits=VOLCANO
    )
    assert decision.status.last_reconcile_time == NOW
    assert decision.requeue_after == GANG_WAIT_SECONDS


def test_volcano_waiting_does_not_start_the_job_clock() -> None:
    decision = decide(toy_job(), observe(pod_group=PodGroupState(exists=False)), traits=VOLCANO)
    assert decision.status.start_time is None


def test_volcano_creates_replicas_once_the_pod_group_is_admitted() -> None:
    decision = decide(toy_job(masters=1, workers=1), observe(pod_group=ADMITTED), traits=VOLCANO)
    assert len(actions_of(decision, CreateReplica)) == 2


def test_scheduler_plugins_does_not_wait_for_the_pod_group() -> None:
    decision = decide(
        toy_job(masters=1, workers=1), observe(pod_group=PodGroupState(exists=False)), traits=PLUGINS
    )
    assert actions_of(decision, SyncPodGroup) == [SyncPodGroup(min_member=2)]
    assert len(actions_of(decision, CreateReplica)) == 2


def test_no_gang_scheduler_means_no_pod_group() -> None:
    assert not actions_of(decide(toy_job()), SyncPodGroup)


def test_a_gang_wait_still_enforces_the_deadline() -> None:
    job = toy_job(run_policy=RunPolicy(active_deadline_seconds=10))
    job = job.with_status(job.status.model_copy(update={"start_time": NOW - timedelta(seconds=11)}))
    decision = decide(job, observe(pod_group=PodGroupState(exists=False)), traits=VOLCANO)
    assert decision.status.is_true(ConditionType.FAILED)


def test_a_template_naming_another_scheduler_is_kept_with_a_warning() -> None:
    template = {"spec": {"schedulerName": "default-scheduler", "containers": [{"name": "toy"}]}}
    job = toy_job(masters=1, workers=None, template=template)
    decision = decide(job, observe(pod_group=ADMITTED), traits=VOLCANO)
    assert "SetPodTemplateSchedulerName" in event_reasons(decision)


def test_a_template_naming_the_gang_scheduler_needs_no_warning() -> None:
    template = {"spec": {"schedulerName": "volcano", "containers": [{"name": "toy"}]}}
    job = toy_job(masters=1, workers=None, template=template)
    decision = decide(job, observe(pod_group=ADMITTED), traits=VOLCANO)
    assert "SetPodTemplateSchedulerName" not in event_reasons(decision)
