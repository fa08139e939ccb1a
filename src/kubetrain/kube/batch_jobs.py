"""Keeping a replica's batch/v1 Job in step with its training job's suspension (mpi-operator §4.12 step 8).

Pure: the patches to send, from the cached Job and a freshly rendered pod template.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

KubeObject = Mapping[str, Any]

SCHEDULING_DIRECTIVES = ("nodeSelector", "tolerations", "schedulingGates")
"""What a queue (Kueue) may change in a suspended Job's pod template before it starts it."""


def batch_job_template(batch_job: KubeObject) -> KubeObject:
    """A batch Job's pod template: its labels say which replica the Job runs (the Job's own labels are only
    ``app: <job>``, as the mpi-operator labels its launcher Job)."""
    return dict((batch_job.get("spec") or {}).get("template") or {})


def is_finished(batch_job: KubeObject) -> bool:
    conditions = (batch_job.get("status") or {}).get("conditions") or []
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions)


def suspension_patches(
    batch_job: KubeObject, suspend: bool, fresh_template: KubeObject
) -> list[tuple[str, dict[str, Any]]]:
    """``(subresource, merge patch)`` pairs, in order; none when the Job already agrees or has finished.

    Suspending sets ``spec.suspend``. Resuming first clears ``status.startTime`` (the Job controller
    refuses to resume a Job that has one, and the deadline counts from the resume), then takes the
    scheduling directives from ``fresh_template`` (labels and annotations merged; nodeSelector,
    tolerations and schedulingGates replaced) and clears ``spec.suspend``.
    """
    spec = batch_job.get("spec") or {}
    if is_finished(batch_job) or bool(spec.get("suspend")) == suspend:
        return []
    if suspend:
        return [("", {"spec": {"suspend": True}})]
    patches: list[tuple[str, dict[str, Any]]] = []
    if (batch_job.get("status") or {}).get("startTime"):
        patches.append(("/status", {"status": {"startTime": None}}))
    fresh_metadata = fresh_template.get("metadata") or {}
    fresh_spec = fresh_template.get("spec") or {}
    current_spec = (spec.get("template") or {}).get("spec") or {}
    template_spec: dict[str, Any] = {name: fresh_spec.get(name) for name in SCHEDULING_DIRECTIVES}
    current_selector = current_spec.get("nodeSelector") or {}
    if template_spec["nodeSelector"] is not None:
        # A merge patch merges maps: keys the fresh selector drops are removed explicitly.
        removed = {key: None for key in current_selector if key not in template_spec["nodeSelector"]}
        template_spec["nodeSelector"] = {**removed, **template_spec["nodeSelector"]}
    template: dict[str, Any] = {"spec": template_spec}
    merged = {k: fresh_metadata[k] for k in ("labels", "annotations") if fresh_metadata.get(k)}
    if merged:
        template["metadata"] = merged
    patches.append(("", {"spec": {"suspend": False, "template": template}}))
    return patches
