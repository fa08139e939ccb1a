"""Every object the operator would create for a new job, rendered without a cluster.

``kubetrain plan --target kubernetes`` prints this; it is how users debug env injection and how
the core is tested end to end. Objects come from the same renderers the controller uses.
"""

from __future__ import annotations

from typing import Any

from kubetrain.api.jobs import TrainingJob
from kubetrain.api.trainer import TrainingRuntime, TrainJob
from kubetrain.engine.admission import admit
from kubetrain.engine.gang import min_member_of
from kubetrain.engine.planning import desired_replicas, plan_replica
from kubetrain.engine.trainjob_plan import plan, snapshot_configmap
from kubetrain.engine.types import Traits
from kubetrain.frameworks.addressing import ClusterAddressing
from kubetrain.frameworks.registry import framework_for
from kubetrain.kube.render import (
    RenderSettings,
    as_batch_job,
    render_companions,
    render_config_map,
    render_pod,
    render_pod_group,
    render_service,
)
from kubetrain.kube.status.injection import StatusInjection


def kubernetes_plan(
    job: TrainingJob, gang_scheduler: str | None = None, status: StatusInjection | None = None
) -> list[dict[str, Any]]:
    """The PodGroup (if gang scheduling), the job's companions (RBAC, Service, Secret, ConfigMap),
    then each replica's Pod (or batch Job) and headless Service.

    The ConfigMap is shown as it is first written, before any worker runs; an ssh-auth Secret is
    shown without the key pair generated when it is created. ``status`` is where the operator's status
    endpoint is reached (None: off, as ``kubetrain plan`` shows pods).
    """
    job = admit(job)
    framework = framework_for(job)
    settings = RenderSettings(gang_scheduler=gang_scheduler, status=status)
    addressing = ClusterAddressing()
    traits = Traits(colocated=False, gang_scheduler=gang_scheduler)
    objects: list[dict[str, Any]] = []
    if gang_scheduler:
        objects.append(render_pod_group(job, min_member_of(job), settings))
    objects.extend(render_companions(job, framework))
    config_map = render_config_map(job, framework, addressing, running_hosts=[])
    if config_map is not None:
        objects.append(config_map)
    for replica_type, index in desired_replicas(job, traits, framework):
        plan = plan_replica(job, replica_type, index, addressing)
        pod = render_pod(job, plan, framework, addressing, settings).manifest
        objects.append(as_batch_job(job, pod) if framework.runs_as_batch_job(job, replica_type) else pod)
        if framework.per_replica_services:
            objects.append(render_service(job, replica_type, index, framework))
    return objects


def trainjob_kubernetes_plan(trainjob: TrainJob, runtime: TrainingRuntime) -> list[dict[str, Any]]:
    """What the operator applies for a new TrainJob on ``runtime``, in order: the runtime snapshot ConfigMap,
    then Trainer's objects (the MPI SSH Secret and hostfile, the PodGroup) and the JobSet, whose controller
    makes the Jobs and pods. An SSH Secret is shown without the key pair generated when it is applied."""
    return [snapshot_configmap(trainjob, runtime.to_wire()), *plan(trainjob, runtime.spec).objects]
