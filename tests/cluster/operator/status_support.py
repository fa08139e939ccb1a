"""What the status endpoint's cluster tests share: an operator with the endpoint on a free loopback port,
pod-bound tokens minted with the TokenRequest API (envtest's API server signs them as a kubelet's would be),
a reporter that uses only the standard library, as a training script would, and a pod played as its kubelet
would run it (the env and the projected volume the operator rendered into it, made real on this machine)."""

from __future__ import annotations

import json
import os
import socket
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from operator_support import OperatorProcess, StartOperator, eventually

from kubetrain.envtest.kubeapi import ApiError, KubeApi, KubeObject
from waiting import PATIENCE

CA_CONFIG_MAP = "kubetrain-status-ca"
SECRET = "training-operator-status-tls"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Endpoint:
    operator: OperatorProcess
    port: int
    namespace: str

    @property
    def base_url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def url(self, job: str, plural: str = "pytorchjobs", api_version: str = "kubeflow.org/v1") -> str:
        return f"{self.base_url}/apis/{api_version}/namespaces/{self.namespace}/{plural}/{job}/status"


def start_endpoint(
    start_operator: StartOperator, namespace: str, *flags: str, port: int | None = None
) -> Endpoint:
    """The operator watching ``namespace``, its endpoint on 127.0.0.1 and its Secret in that namespace."""
    port = port or free_port()
    operator = start_operator(
        "--status-server-bind-address",
        f"127.0.0.1:{port}",
        "--status-server-url",
        f"https://127.0.0.1:{port}",
        "--status-server-namespace",
        namespace,
        *flags,
    )
    eventually(lambda: "status endpoint: serving" in operator.log, "the status endpoint serving")
    # Until then a job not found may only be a job not listed yet: the endpoint answers 503, retry.
    eventually(lambda: "caches synced" in operator.log, "the operator's caches synced")
    return Endpoint(operator, port, namespace)


def wait_default_service_account(api: KubeApi, namespace: str) -> None:
    """The controller-manager makes it a moment after the namespace; tokens are minted for it."""
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/default"
    eventually(lambda: api.get_or_none(path), "the default ServiceAccount")


def mint_token(api: KubeApi, pod: KubeObject, audience: str, seconds: int = 3600) -> str:
    """What the kubelet puts in the projected volume: a token for ``audience`` bound to ``pod`` (which runs
    as ``default`` unless its template names another: the TokenRequest API binds only to a pod of the
    account it mints for)."""
    metadata = pod["metadata"]
    account = pod["spec"].get("serviceAccountName") or "default"
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "audiences": [audience],
            "expirationSeconds": seconds,
            "boundObjectRef": {
                "kind": "Pod",
                "apiVersion": "v1",
                "name": metadata["name"],
                "uid": metadata["uid"],
            },
        },
    }
    path = f"/api/v1/namespaces/{metadata['namespace']}/serviceaccounts/{account}/token"
    return str(api.create(path, request)["status"]["token"])


def audience(
    namespace: str, job: str, plural: str = "pytorchjobs", api_version: str = "kubeflow.org/v1"
) -> str:
    """Kubeflow Trainer v2.3's rule: the job's status path without ``/apis/``."""
    return f"{api_version}/namespaces/{namespace}/{plural}/{job}/status"


def played_env(api: KubeApi, pod: KubeObject, container: str, root: Path) -> dict[str, str]:
    """The env ``container`` of ``pod`` runs with, as the kubelet would give it: each projected volume it
    mounts made under ``root`` (a token minted for the pod with the audience and lifetime the volume names,
    the ConfigMap items it names), and each variable pointing into a mount pointed at the files under
    ``root`` instead. Only what the operators render is supported: plain values, the downward API's
    metadata fields, projected volumes."""
    spec = pod["spec"]
    [rendered] = [c for c in spec["containers"] if c["name"] == container]
    volumes = {volume["name"]: volume for volume in spec.get("volumes") or []}
    mounts: dict[str, Path] = {}
    for mount in rendered.get("volumeMounts") or []:
        projected = volumes[mount["name"]].get("projected")
        if projected is None:
            continue
        directory = root / mount["name"]
        directory.mkdir(parents=True)
        for source in projected["sources"]:
            if "serviceAccountToken" in source:
                token = source["serviceAccountToken"]
                minted = mint_token(api, pod, token["audience"], token.get("expirationSeconds", 3600))
                (directory / token["path"]).write_text(minted)
            if "configMap" in source:
                name = source["configMap"]["name"]
                data = _config_map(api, pod["metadata"]["namespace"], name)["data"]
                for item in source["configMap"]["items"]:
                    (directory / item["path"]).write_text(data[item["key"]])
        mounts[mount["mountPath"].rstrip("/")] = directory
    env: dict[str, str] = {}
    for variable in rendered.get("env") or []:
        value = str(variable["value"]) if "value" in variable else _field(pod, variable["valueFrom"])
        for mount_path, directory in mounts.items():
            if value.startswith(mount_path + "/"):
                value = str(directory) + value[len(mount_path) :]
        env[variable["name"]] = value
    return {"PATH": os.environ.get("PATH", ""), **env}


def _field(pod: KubeObject, source: dict[str, Any]) -> str:
    """What the downward API gives a variable: the pod's name, namespace, a label or an annotation (a Job's
    completion index)."""
    path = str(source["fieldRef"]["fieldPath"])
    metadata = pod["metadata"]
    for prefix, values in (("metadata.labels", "labels"), ("metadata.annotations", "annotations")):
        if path.startswith(f"{prefix}['"):
            return str((metadata.get(values) or {}).get(path[len(prefix) + 2 : -2], ""))
    return str({"metadata.name": metadata["name"], "metadata.namespace": metadata["namespace"]}[path])


def _config_map(api: KubeApi, namespace: str, name: str) -> KubeObject:
    path = f"/api/v1/namespaces/{namespace}/configmaps/{name}"
    found: KubeObject = eventually(lambda: api.get_or_none(path), f"ConfigMap {name}")
    return found


def ca_bundle(api: KubeApi, namespace: str) -> str:
    config_map = eventually(
        lambda: api.get_or_none(f"/api/v1/namespaces/{namespace}/configmaps/{CA_CONFIG_MAP}"),
        "the CA ConfigMap",
    )
    return str(config_map["data"]["ca.crt"])


def post(url: str, ca: str, body: bytes | dict[str, Any], token: str | None) -> tuple[int, dict[str, Any]]:
    """One report, as a stdlib-only training script sends it; (HTTP code, the JSON answer)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=data, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(
            request, context=ssl.create_default_context(cadata=ca), timeout=PATIENCE
        ) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def trainer_status(
    api: KubeApi, namespace: str, job: str, plural: str = "pytorchjobs", api_version: str = "kubeflow.org/v1"
) -> dict[str, Any] | None:
    try:
        found = api.get(f"/apis/{api_version}/namespaces/{namespace}/{plural}/{job}")
    except ApiError:
        return None
    status: dict[str, Any] | None = (found.get("status") or {}).get("trainerStatus")
    return status
