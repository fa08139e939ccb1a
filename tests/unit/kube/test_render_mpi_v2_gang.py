"""Gang scheduling of MPIJob v2beta1 pods as mpi-operator does it (§4.9): the scheduler is forced and
Volcano gets no task-spec annotation; the PodGroup counts every worker and the launcher."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from builders import job
from kubetrain.api.jobs import V2BETA1, TrainingJob
from kubetrain.engine.admission import admit
from kubetrain.engine.gang import min_member_of
from kubetrain.engine.planning import plan_replica
from kubetrain.engine.reconciler import reconcile
from kubetrain.engine.types import CreateReplica, Observation, PodGroupState, Traits
from kubetrain.frameworks.addressing import ClusterAddressing
from kubetrain.frameworks.registry import framework_for
from kubetrain.kube.render import RenderSettings, render_pod

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _v2() -> TrainingJob:
    return admit(job("MPIJob", {"Launcher": 1, "Worker": 3}, name="pi", api_version=V2BETA1))


def _pod(scheduler: str, template_scheduler: str | None = "mine") -> dict[str, Any]:
    mpijob = _v2()
    plan = plan_replica(mpijob, "Worker", 0, ClusterAddressing())
    if template_scheduler is not None:
        plan.template["spec"]["schedulerName"] = template_scheduler
    settings = RenderSettings(gang_scheduler=scheduler)
    return render_pod(mpijob, plan, framework_for(mpijob), ClusterAddressing(), settings).manifest


def test_the_gang_scheduler_replaces_the_templates_scheduler() -> None:
    assert _pod("volcano")["spec"]["schedulerName"] == "volcano"


def test_volcano_pods_get_the_group_name_but_no_task_spec_annotation() -> None:
    assert _pod("volcano")["metadata"]["annotations"] == {"scheduling.k8s.io/group-name": "pi"}


def test_min_member_is_the_workers_plus_the_launcher() -> None:
    assert min_member_of(_v2()) == 4


def test_pods_are_created_before_volcano_admits_the_pod_group() -> None:
    mpijob = job("MPIJob", {"Launcher": 1, "Worker": 1}, name="pi", api_version=V2BETA1)
    observation = Observation(pod_group=PodGroupState(exists=True, phase="Pending"))
    traits = Traits(colocated=False, gang_scheduler="volcano", batch_jobs=True)
    decision = reconcile(mpijob, observation, NOW, traits)
    assert [a for a in decision.actions if isinstance(a, CreateReplica)]
