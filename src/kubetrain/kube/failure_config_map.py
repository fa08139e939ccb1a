"""Where the operator keeps a job's failure record (``engine.failures``): ``<job>-failure``, a ConfigMap the
job owns, so it survives ``cleanPodPolicy: All`` and an operator restart and goes with the job. Shared by the
operator, which writes it (``kube.failures``), and the SDK, which reads it; light, as the SDK imports it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kubetrain.engine.failures import FailureRecord
from kubetrain.frameworks.labels import JOB_NAME_LABEL

RECORD_KEY = "failures.json"
COMPONENT_LABEL = "app.kubernetes.io/component"
COMPONENT = "failure-record"


def failure_config_map_name(job_name: str) -> str:
    return f"{job_name}-failure"


def owned_by(config_map: Mapping[str, Any], job_uid: str) -> bool:
    owners = (config_map.get("metadata") or {}).get("ownerReferences") or ()
    return any(owner.get("uid") == job_uid for owner in owners)


def read_record(config_map: Mapping[str, Any], job_uid: str) -> FailureRecord | None:
    """The record a ConfigMap holds for the job of ``job_uid``; None when it is another job's (one that had
    the name before, not yet collected) or cannot be read."""
    if not owned_by(config_map, job_uid):
        return None
    text = (config_map.get("data") or {}).get(RECORD_KEY)
    try:
        return FailureRecord.from_json(json.loads(text)) if isinstance(text, str) else None
    except ValueError:
        return None


def render_record(
    record: FailureRecord, job_name: str, namespace: str, owner: Mapping[str, Any]
) -> dict[str, Any]:
    """The ConfigMap that keeps ``record``, owned (as its controller) by the job ``owner`` refers to."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": failure_config_map_name(job_name),
            "namespace": namespace,
            "labels": {JOB_NAME_LABEL: job_name, COMPONENT_LABEL: COMPONENT},
            "ownerReferences": [dict(owner)],
        },
        "data": {RECORD_KEY: json.dumps(record.to_json(), indent=1, ensure_ascii=False)},
    }
