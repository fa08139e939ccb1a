"""Admission webhooks of a controller run beside envtest as a host process, served on loopback.

A release declares its webhooks for a Service in its own namespace (``clientConfig.service``), with a
certificate its cert manager makes and injects. On envtest there is no Service to reach a host process
through, so its webhook server listens on 127.0.0.1 with a certificate signed by envtest's CA
(``pki.issue_serving_certificate``), and its webhook configurations, read from the release's own manifests
with its kustomize JSON patches applied, name it by URL with that CA as ``caBundle``. The API server runs on
the same host, so this holds with a real node too.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from kubetrain.envtest.kubeapi import ApiError, KubeApi, KubeObject

ADMISSION = "/apis/admissionregistration.k8s.io/v1"
COLLECTIONS = {
    "MutatingWebhookConfiguration": f"{ADMISSION}/mutatingwebhookconfigurations",
    "ValidatingWebhookConfiguration": f"{ADMISSION}/validatingwebhookconfigurations",
}


class WebhookError(RuntimeError):
    """What went wrong, said in the message."""


def _pointer(path: str) -> list[str | int]:
    tokens: list[str | int] = []
    for raw in path.lstrip("/").split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        tokens.append(int(token) if token.isdigit() else token)
    return tokens


def json_patch(document: KubeObject, operations: Sequence[Mapping[str, Any]]) -> KubeObject:
    """``document`` with the RFC 6902 ``add``, ``replace`` and ``remove`` operations applied, as kustomize
    applies a release's JSON6902 patches (the only operations those use)."""
    patched = copy.deepcopy(document)
    for operation in operations:
        op, tokens = operation["op"], _pointer(operation["path"])
        parent: Any = patched
        try:
            for token in tokens[:-1]:
                parent = parent[token]
        except (KeyError, IndexError, TypeError):
            raise WebhookError(f"JSON patch {op}s {operation['path']}, whose parent is not there") from None
        last = tokens[-1]
        if op == "remove":
            del parent[last]
        elif op == "add" and isinstance(parent, list):
            value = copy.deepcopy(operation["value"])
            parent.insert(len(parent) if last == "-" else int(last), value)
        elif op in ("add", "replace"):
            if op == "replace" and (
                last not in parent if isinstance(parent, dict) else int(last) >= len(parent)
            ):
                raise WebhookError(f"JSON patch replaces {operation['path']}, which is not there")
            parent[last] = copy.deepcopy(operation["value"])
        else:
            raise WebhookError(f"JSON patch operation {op!r} at {operation['path']} is not supported")
    return patched


def read_configurations(
    manifests: Path, patches: Iterable[tuple[str, str | None, Path]] = ()
) -> list[KubeObject]:
    """The webhook configurations of ``manifests`` with ``patches`` applied: each ``(kind, name, file)``
    patches the configurations of that kind (and that name, when not None) with the file's operations, as
    a kustomization's ``patches`` with a ``target`` does."""
    configurations = [
        document
        for document in yaml.safe_load_all(manifests.read_text())
        if document and document.get("kind") in COLLECTIONS
    ]
    for kind, name, path in patches:
        operations = yaml.safe_load(path.read_text())
        configurations = [
            json_patch(c, operations)
            if c["kind"] == kind and (name is None or c["metadata"]["name"] == name)
            else c
            for c in configurations
        ]
    return configurations


def on_loopback(
    configuration: KubeObject,
    url: str,
    ca_bundle: bytes,
    name: str | None = None,
    namespace_selector: KubeObject | None = None,
) -> KubeObject:
    """``configuration`` with every webhook sent to ``url`` + its Service path, trusting ``ca_bundle``;
    renamed when ``name`` is given; limited to the namespaces ``namespace_selector`` selects when given
    (cluster-scoped objects are sent to it whatever the selector)."""
    loopback = copy.deepcopy(configuration)
    if name is not None:
        loopback["metadata"] = {"name": name}
    else:
        loopback["metadata"] = {"name": configuration["metadata"]["name"]}
    for webhook in loopback["webhooks"]:
        path = (webhook["clientConfig"].get("service") or {}).get("path", "")
        webhook["clientConfig"] = {
            "url": url.rstrip("/") + path,
            "caBundle": base64.b64encode(ca_bundle).decode(),
        }
        if namespace_selector is not None:
            webhook["namespaceSelector"] = copy.deepcopy(namespace_selector)
    return loopback


def namespaces(*names: str) -> KubeObject:
    """A namespace selector for exactly these namespaces (by the label every namespace carries)."""
    return {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(names)}
        ]
    }


def install(api: KubeApi, configurations: Iterable[KubeObject]) -> list[str]:
    """Create each configuration, or replace the one of that name; return their names."""
    names = []
    for configuration in configurations:
        collection = COLLECTIONS[configuration["kind"]]
        name = configuration["metadata"]["name"]
        body = {"apiVersion": "admissionregistration.k8s.io/v1", **configuration}
        existing = api.get_or_none(f"{collection}/{name}")
        if existing is None:
            api.create(collection, body)
        else:
            metadata = {**body["metadata"], "resourceVersion": existing["metadata"]["resourceVersion"]}
            api.replace(f"{collection}/{name}", {**body, "metadata": metadata})
        names.append(name)
    return names


def remove(api: KubeApi, configurations: Iterable[KubeObject]) -> None:
    """Delete the configurations of these kinds and names (those already gone are fine)."""
    for configuration in configurations:
        try:
            api.delete(f"{COLLECTIONS[configuration['kind']]}/{configuration['metadata']['name']}")
        except ApiError as error:
            if error.code != 404:
                raise
