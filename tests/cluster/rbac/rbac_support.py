"""Permissions as RBAC grants them and as the audit log shows them used, and ServiceAccounts to run as.

A permission is ``(API group, resource[/subresource], verb)``; a ClusterRole's rules are expanded into
them, and so is every request an identity made, from the API server's audit log (``kubetrain.envtest.audit``
with a policy that logs every request of the identities' namespace, reads included).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from kubetrain.envtest.audit import AuditEvent
from kubetrain.envtest.kubeapi import ApiError, KubeApi

Permission = tuple[str, str, str]
ROOT = Path(__file__).resolve().parents[3]


def audit_policy(namespace: str) -> str:
    """Every request of the ServiceAccounts of ``namespace``, reads included; nothing else."""
    return f"""\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted, Panic]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts:{namespace}"]
  - level: None
"""


def granted(role: dict[str, Any]) -> set[Permission]:
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def used(event: AuditEvent) -> Permission | None:
    """The permission a request needed; None for a request on no resource (discovery, /healthz)."""
    if not event.resource:
        return None
    resource = f"{event.resource}/{event.subresource}" if event.subresource else event.resource
    return event.group, resource, event.verb


def permissions(events: Iterable[AuditEvent]) -> set[Permission]:
    return {permission for event in events if (permission := used(event)) is not None}


def load(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def bind(api: KubeApi, role: dict[str, Any], namespace: str, account: str) -> None:
    """``role`` (a ClusterRole) bound to the ServiceAccount ``namespace/account``, both created."""
    for path, body in (
        (f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": account}}),
        ("/apis/rbac.authorization.k8s.io/v1/clusterroles", role),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            {
                "metadata": {"name": role["metadata"]["name"]},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": role["metadata"]["name"],
                },
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
            },
        ),
    ):
        try:
            api.create(path, body)
        except ApiError as error:
            if error.code != 409:
                raise


def kubeconfig_of(api: KubeApi, admin_kubeconfig: Path, namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig for the ServiceAccount, with a token from the TokenRequest API."""
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    token = api.create(f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token", request)["status"]
    config = yaml.safe_load(admin_kubeconfig.read_text())
    config["users"][0]["user"] = {"token": token["token"]}
    path.write_text(yaml.safe_dump(config))
    return path


def without(role: dict[str, Any], name: str, group: str, resource: str, verb: str) -> dict[str, Any]:
    """A copy of ``role`` named ``name`` that does not grant ``verb`` on ``group/resource``."""
    rules = []
    for rule in role["rules"]:
        if group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"]:
            rest = [r for r in rule["resources"] if r != resource]
            if rest:
                rules.append({**rule, "resources": rest})
            verbs = [v for v in rule["verbs"] if v != verb]
            if verbs:
                rules.append({**rule, "resources": [resource], "verbs": verbs})
        else:
            rules.append(rule)
    return {**role, "metadata": {"name": name}, "rules": rules}
