"""The gang policies (Trainer's ``CoScheduling`` and ``Volcano`` plugins): every pod labelled or annotated
with the TrainJob's PodGroup, and the PodGroup holding all of them, with their summed requests."""

from __future__ import annotations

from fractions import Fraction

from kubetrain.api.quantity import canonical_quantity
from kubetrain.api.trainer import TrainJob
from kubetrain.frameworks.trainer.constants import (
    COSCHEDULING_POD_GROUP_LABEL,
    VOLCANO_GROUP_ANNOTATION,
    VOLCANO_QUEUE_ANNOTATION,
)
from kubetrain.frameworks.trainer.info import Obj, RuntimeInfo
from kubetrain.frameworks.trainer.plugin import Existing, RuntimePlugin

SCHEDULER_PLUGINS_API = "scheduling.x-k8s.io/v1alpha1"
VOLCANO_API = "scheduling.volcano.sh/v1beta1"


def _gang(info: RuntimeInfo) -> tuple[int, Obj]:
    """Every pod of every pod set, and their requests summed (Go's quantity arithmetic, first format kept)."""
    members = 0
    total: dict[str, Fraction] = {}
    formats: dict[str, str] = {}
    for pod_set in info.pod_sets:
        members += pod_set.count
        for name, quantity in pod_set.single_pod_requests.items():
            total[name] = total.get(name, Fraction(0)) + quantity * pod_set.count
            formats.setdefault(name, pod_set.request_formats.get(name, "DecimalSI"))
    return members, {name: canonical_quantity(value, formats[name]) for name, value in total.items()}


def _applies(existing: Existing, trainjob: TrainJob) -> bool:
    """A PodGroup is applied until it exists, and again while the TrainJob is suspended."""
    return not existing.pod_group or bool(trainjob.spec.suspend)


class CoschedulingPlugin(RuntimePlugin):
    name = "CoScheduling"

    def enforce_pod_group_policy(self, info: RuntimeInfo, trainjob: TrainJob) -> None:
        if info.pod_group_policy is None or info.pod_group_policy.coscheduling is None:
            return
        info.pod_labels[COSCHEDULING_POD_GROUP_LABEL] = trainjob.name

    def build(self, info: RuntimeInfo, trainjob: TrainJob, existing: Existing) -> list[Obj]:
        policy = info.pod_group_policy.coscheduling if info.pod_group_policy else None
        if policy is None or not _applies(existing, trainjob):
            return []
        members, resources = _gang(info)
        timeout = policy.schedule_timeout_seconds if policy.schedule_timeout_seconds is not None else 60
        return [
            {
                "apiVersion": SCHEDULER_PLUGINS_API,
                "kind": "PodGroup",
                "metadata": {"name": trainjob.name},
                "spec": {"minMember": members, "minResources": resources, "scheduleTimeoutSeconds": timeout},
            }
        ]


class VolcanoPlugin(RuntimePlugin):
    name = "Volcano"

    def enforce_pod_group_policy(self, info: RuntimeInfo, trainjob: TrainJob) -> None:
        if info.pod_group_policy is None or info.pod_group_policy.volcano is None:
            return
        info.pod_annotations[VOLCANO_GROUP_ANNOTATION] = trainjob.name

    def build(self, info: RuntimeInfo, trainjob: TrainJob, existing: Existing) -> list[Obj]:
        policy = info.pod_group_policy.volcano if info.pod_group_policy else None
        if policy is None or not _applies(existing, trainjob):
            return []
        members, resources = _gang(info)
        spec: Obj = {"minMember": members, "minResources": resources}
        if VOLCANO_QUEUE_ANNOTATION in info.annotations:
            spec["queue"] = info.annotations[VOLCANO_QUEUE_ANNOTATION]
        for job in info.replicated_jobs():
            pod_spec = (((job.get("template") or {}).get("spec") or {}).get("template") or {}).get(
                "spec"
            ) or {}
            if pod_spec.get("priorityClassName") is not None:
                spec["priorityClassName"] = pod_spec["priorityClassName"]
        if policy.network_topology is not None:
            spec["networkTopology"] = {
                "mode": policy.network_topology.get("mode", "hard"),
                "highestTierAllowed": policy.network_topology.get("highestTierAllowed", 1),
            }
        return [
            {"apiVersion": VOLCANO_API, "kind": "PodGroup", "metadata": {"name": trainjob.name}, "spec": spec}
        ]
