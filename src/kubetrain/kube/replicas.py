"""How many replicas of the operator its install runs, so that a lone replica says at start what it gives up.

The count is the owning Deployment's ``spec.replicas``, found through the controller references of this pod
and of its ReplicaSet: what the install asked for, whatever a rollout has running at the moment (a rollout of
one replica briefly runs two). Outside a pod (a host process, a test), or where the operator may not read
its Deployment, nothing is known and nothing is said.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from kubetrain.kube.runtime.http import HttpApi

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeclaredReplicas:
    deployment: str
    """``<namespace>/<name>``."""
    replicas: int


def _controller(owner_of: dict[str, Any], kind: str) -> str | None:
    for reference in owner_of.get("metadata", {}).get("ownerReferences") or []:
        if reference.get("controller") and reference.get("kind") == kind:
            return str(reference["name"])
    return None


async def _get(http: HttpApi, path: str) -> dict[str, Any] | None:
    response = await http.get(path)
    if response.status_code != 200:
        log.debug("replica count: GET %s answered %s", path, response.status_code)
        return None
    found: dict[str, Any] = response.json()
    return found


async def declared_replicas(http: HttpApi, namespace: str, pod_name: str) -> DeclaredReplicas | None:
    """The Deployment that runs pod ``namespace/pod_name`` and its ``spec.replicas``; None when unknown."""
    pod = await _get(http, f"/api/v1/namespaces/{namespace}/pods/{pod_name}")
    replica_set = _controller(pod, "ReplicaSet") if pod else None
    if replica_set is None:
        return None
    owner = await _get(http, f"/apis/apps/v1/namespaces/{namespace}/replicasets/{replica_set}")
    deployment = _controller(owner, "Deployment") if owner else None
    if deployment is None:
        return None
    found = await _get(http, f"/apis/apps/v1/namespaces/{namespace}/deployments/{deployment}")
    if found is None:
        return None
    return DeclaredReplicas(f"{namespace}/{deployment}", int(found.get("spec", {}).get("replicas", 1)))


def availability_warning(leader_elect: bool, declared: DeclaredReplicas | None) -> str | None:
    """What a lone replica of a Deployment gives up, said once at start; None where a standby stands by, or
    outside a Deployment (a host process, where no node can be lost under it)."""
    gives_up = (
        "if its node is lost, no job is reconciled (no NodeLost, no restart, no status) until Kubernetes "
        "replaces this pod: the node's not-ready grace, the pod's unreachable toleration, scheduling, start "
        "and cache sync; two replicas with leader election hand over within the Lease's duration "
        "(docs/install.md, 'High availability')"
    )
    if declared is None:
        return None
    if not leader_elect:
        return f"leader election is off, so Deployment {declared.deployment} must run one replica: {gives_up}"
    if declared.replicas == 1:
        return f"Deployment {declared.deployment} runs one replica: {gives_up}"
    return None
