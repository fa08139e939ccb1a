"""The schema of the pod-template fields kubetrain reads or writes, for the CRDs and for admission.

A replica's ``template`` is a ``PodTemplateSpec`` kept as written (``ReplicaSpec.template``). The
full upstream schema of it is about 600 KB per CRD, too big for a plain client-side ``kubectl
apply`` (its last-applied annotation may hold 256 KiB). This schema covers only the fields the
operator, the local runner and the frameworks read or write; everything else stays
``x-kubernetes-preserve-unknown-fields`` and is checked by the API server when the pod is created.
Because kubetrain reads exactly these fields, a job that passes this schema cannot make the engine
or a renderer trip over a wrong type.

The one schema serves twice: ``api.crd`` puts it into every CRD (so ``kubectl apply`` names the
field) and ``engine.admission`` checks every template against it with ``api.structural`` (so local
runs and objects stored before the schema, or under a CRD without it, fail with the same path).
"""

from __future__ import annotations

import copy
from typing import Any

from kubetrain.api.structural import Schema

MAX_PORT = 65535

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?[0-9]{1,2}))?$"
)
"""Kubernetes' quantity syntax (``500m``, ``1Gi``, ``2``, ``1e3``) with a two-digit exponent: a
larger one is no real resource amount and would make exact arithmetic on it explode."""

_QUANTITY_MAX_LENGTH = 64
_QUANTITY_MAX = 10**18


def _string(description: str = "") -> dict[str, Any]:
    return {"type": "string", **({"description": description} if description else {})}


def _strings() -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}}


def _string_map() -> dict[str, Any]:
    return {"type": "object", "additionalProperties": {"type": "string"}}


def _loose_object(**properties: dict[str, Any]) -> dict[str, Any]:
    """An object whose listed fields are checked and whose other fields are kept as written."""
    node: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if properties:
        node["properties"] = properties
    return node


def _list_of(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": item}


def _quantity() -> dict[str, Any]:
    return {
        "x-kubernetes-int-or-string": True,
        "pattern": QUANTITY_PATTERN,
        "maxLength": _QUANTITY_MAX_LENGTH,
        "minimum": 0,
        "maximum": _QUANTITY_MAX,
        "description": "a resource quantity such as 500m, 2 or 1Gi",
    }


def _quantities() -> dict[str, Any]:
    return {"type": "object", "additionalProperties": _quantity()}


def _container() -> dict[str, Any]:
    env = _loose_object(name=_string(), value=_string(), valueFrom=_loose_object())
    env["required"] = ["name"]
    port = _loose_object(
        containerPort={"type": "integer", "minimum": 1, "maximum": MAX_PORT},
        name=_string(),
        protocol={"type": "string", "enum": ["TCP", "UDP", "SCTP"]},
        hostPort={"type": "integer", "minimum": 0, "maximum": MAX_PORT},
    )
    port["required"] = ["containerPort"]
    mount = _loose_object(
        name=_string(), mountPath=_string(), subPath=_string(), readOnly={"type": "boolean"}
    )
    mount["required"] = ["name", "mountPath"]
    return _loose_object(
        name=_string(),
        image=_string(),
        imagePullPolicy={"type": "string", "enum": ["Always", "Never", "IfNotPresent"]},
        command=_strings(),
        args=_strings(),
        workingDir=_string(),
        env=_list_of(env),
        envFrom=_list_of(
            _loose_object(prefix=_string(), configMapRef=_loose_object(), secretRef=_loose_object())
        ),
        ports=_list_of(port),
        resources=_loose_object(limits=_quantities(), requests=_quantities()),
        volumeMounts=_list_of(mount),
    )


def _pod_template() -> dict[str, Any]:
    volume = _loose_object(name=_string())
    volume["required"] = ["name"]
    toleration = _loose_object(
        key=_string(),
        operator={"type": "string", "enum": ["Exists", "Equal"]},
        value=_string(),
        effect=_string(),
        tolerationSeconds={"type": "integer"},
    )
    pod_spec = _loose_object(
        containers=_list_of(_container()),
        initContainers=_list_of(_container()),
        volumes=_list_of(volume),
        restartPolicy={"type": "string", "enum": ["Always", "OnFailure", "Never"]},
        nodeSelector=_string_map(),
        tolerations=_list_of(toleration),
        schedulerName=_string(),
        priorityClassName=_string(),
        serviceAccountName=_string(),
        hostname=_string(),
        subdomain=_string(),
        hostNetwork={"type": "boolean"},
        dnsPolicy=_string(),
        dnsConfig=_loose_object(searches=_strings(), nameservers=_strings()),
    )
    template = _loose_object(
        metadata=_loose_object(labels=_string_map(), annotations=_string_map()),
        spec=pod_spec,
    )
    template["description"] = (
        "The pod template (a `PodTemplateSpec`): the fields kubetrain reads or writes are checked, "
        "the others are kept as written and checked when the pod is created."
    )
    return template


_POD_TEMPLATE = _pod_template()


def pod_template_schema() -> Schema:
    """A fresh copy of the pod-template schema (callers may add to it)."""
    return copy.deepcopy(_POD_TEMPLATE)


def checked_pod_template_schema() -> Schema:
    """The shared schema, read-only: for checking templates without copying it each time."""
    return _POD_TEMPLATE
