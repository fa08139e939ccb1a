"""Where a job's progress history is stored (``<job>-progress-history``, owned by the job) and how it is read:
shared by the operator, which writes it (``history``), and the SDK, which reads it. Light on purpose: the
SDK's import of it must not pull in the operator's HTTP stack."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kubetrain.api.progress import ProgressHistory

HISTORY_KEY = "history.json"
COMPONENT_LABEL = "app.kubernetes.io/component"
COMPONENT = "progress-history"


def history_config_map_name(job_name: str) -> str:
    return f"{job_name}-progress-history"


def owned_by(config_map: Mapping[str, Any], job_uid: str) -> bool:
    owners = (config_map.get("metadata") or {}).get("ownerReferences") or ()
    return any(owner.get("uid") == job_uid for owner in owners)


def read_history(config_map: Mapping[str, Any], job_uid: str) -> ProgressHistory:
    """The history a ConfigMap holds for the job of ``job_uid``; empty when it is another's (a job that
    had the name before, not yet collected) or unreadable."""
    if not owned_by(config_map, job_uid):
        return ProgressHistory()
    text = (config_map.get("data") or {}).get(HISTORY_KEY)
    try:
        return ProgressHistory.from_json(json.loads(text)) if isinstance(text, str) else ProgressHistory()
    except ValueError:
        return ProgressHistory()
