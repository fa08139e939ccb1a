"""Generic defaulting steps every kind composes (upstream ``SetDefaults_<Kind>``, §1.3).

Nothing here knows a framework: the canonical replica types, container name, port and policies
are parameters. Every helper returns new objects and leaves its inputs untouched.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from kubetrain.api.common import CleanPodPolicy, ReplicaSpec, RestartPolicy, RunPolicy


def normalise_replica_keys(specs: dict[str, ReplicaSpec], canonical: Iterable[str]) -> dict[str, ReplicaSpec]:
    """Rename keys that match a canonical type case-insensitively (``worker`` → ``Worker``).

    Keys that match none are kept as written, so validation can name them. As upstream, a
    differently-cased duplicate replaces the canonical entry.
    """
    by_folded = {name.lower(): name for name in canonical}
    normalised: dict[str, ReplicaSpec] = {}
    for key, spec in specs.items():
        normalised[by_folded.get(key.lower(), key)] = spec
    return normalised


def with_default_replicas(spec: ReplicaSpec, replicas: int) -> ReplicaSpec:
    return spec if spec.replicas is not None else spec.model_copy(update={"replicas": replicas})


def with_default_restart_policy(spec: ReplicaSpec, policy: RestartPolicy) -> ReplicaSpec:
    return spec if spec.restart_policy is not None else spec.model_copy(update={"restart_policy": policy})


def with_default_port(spec: ReplicaSpec, container_name: str, port_name: str, port: int) -> ReplicaSpec:
    """Declare ``{name: port_name, containerPort: port}`` on the named container (else container 0).

    A container that already declares a port of that name keeps its own number.
    """
    containers = template_containers(spec.template)
    if not containers:
        return spec
    index = next((i for i, c in enumerate(containers) if c.get("name") == container_name), 0)
    ports = containers[index].get("ports") or []
    if any(isinstance(p, dict) and p.get("name") == port_name for p in ports):
        return spec
    template = copy.deepcopy(spec.template)
    target = template["spec"]["containers"][index]
    target["ports"] = [*(target.get("ports") or []), {"name": port_name, "containerPort": port}]
    return spec.model_copy(update={"template": template})


def with_default_clean_pod_policy(run_policy: RunPolicy, policy: CleanPodPolicy) -> RunPolicy:
    if run_policy.clean_pod_policy is not None:
        return run_policy
    return run_policy.model_copy(update={"clean_pod_policy": policy})


def default_replica_spec(
    spec: ReplicaSpec,
    *,
    replicas: int,
    restart_policy: RestartPolicy,
    container_name: str | None = None,
    port_name: str | None = None,
    port: int | None = None,
) -> ReplicaSpec:
    """The common per-replica steps: replicas, restart policy and (when given) the default port."""
    spec = with_default_restart_policy(with_default_replicas(spec, replicas), restart_policy)
    if container_name is not None and port_name is not None and port is not None:
        spec = with_default_port(spec, container_name, port_name, port)
    return spec


def template_containers(template: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``spec.containers`` of a pod template; empty when absent or not a list of objects."""
    pod_spec = template.get("spec")
    containers = pod_spec.get("containers") if isinstance(pod_spec, dict) else None
    if not isinstance(containers, list) or not all(isinstance(c, dict) for c in containers):
        return []
    return containers


def default_min_max(low: int | None, high: int | None, fallback: int | None) -> tuple[int | None, int | None]:
    """Elastic ``minReplicas``/``maxReplicas``: one given → both equal it; neither → both ``fallback``."""
    if low is not None and high is not None:
        return low, high
    if low is None and high is None:
        return fallback, fallback
    given = low if low is not None else high
    return given, given
