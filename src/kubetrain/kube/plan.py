"""Every object the operator would create for a new job, rendered without a cluster.

``kubetrain plan --target kubernetes`` prints this; it is how users debug env injection and how
the core is tested end to end. Objects come from the same renderers the controller uses.
"""

from __future__ import annotations

from typing import Any

from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.admission import admit
from kubetrain.engine.gang import min_member_of
from kubetrain.engine.planning import desired_replicas, plan_replica
from kubetrain.engine.types import Traits
from kubetrain.frameworks.addressing import ClusterAddressing
from kubetrain.frameworks.registry import framework_for
from kubetrain.kube.render import RenderSettings, render_pod, render_pod_group, render_service


def kubernetes_plan(job: TrainingJob, gang_scheduler: str | None = None) -> list[dict[str, Any]]:
    """The PodGroup (if gang scheduling), then each replica's Pod and headless Service."""
    job = admit(job)
    framework = framework_for(job)
    settings = RenderSettings(gang_scheduler=gang_scheduler)
    addressing = ClusterAddressing()
    traits = Traits(colocated=False, gang_scheduler=gang_scheduler)
    objects: list[dict[str, Any]] = []
    if gang_scheduler:
        objects.append(render_pod_group(job, min_member_of(job), settings))
    for replica_type, index in desired_replicas(job, traits, framework):
        plan = plan_replica(job, replica_type, index, addressing)
        objects.append(render_pod(job, plan, framework, addressing, settings).manifest)
        if framework.per_replica_services:
            objects.append(render_service(job, plan, framework))
    return objects
