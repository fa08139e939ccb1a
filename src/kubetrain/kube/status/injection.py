"""What every replica's containers get so that code instrumented for Kubeflow Trainer v2 reports unchanged.

What Trainer v2.3's TrainJobStatus plugin gives a TrainJob's trainer containers
(``pkg/runtime/framework/plugins/trainjobstatus``): three variables (the whole URL of the job's status path,
the CA file, the token file) and one projected volume of the same name, mounted read-only at the same path,
holding a service-account token whose audience is this job alone (Trainer's audience rule) and the
endpoint's CA, here from the namespace's ConfigMap (docs/progress.md says why not one per job). Pure: the
same pod spec in gives the same pod spec out, and with the endpoint off nothing here runs at all.

A template that sets any of the three variables (in any spelling the reporting helper reads) in a container
keeps its own: that container is left alone (it reports somewhere else, or to an endpoint of the user's
choosing). A pod whose template already has a volume of this volume's name, or a container that already mounts
something at the mount path, is left alone in the same way: nothing of the user's is ever replaced. A pod that
names no service account gets ``default``, the one whose token is projected (and what the API server's
ServiceAccount admission sets).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubetrain.api.progress import StatusTarget
from kubetrain.reporting import (
    STATUS_SERVER_CA_CERT_ENV,
    STATUS_SERVER_TOKEN_ENV,
    STATUS_SERVER_URL_ENV,
    VARIABLE_SPELLINGS,
)

VOLUME_NAME = "kubeflow-trainer-token"
"""Trainer v2.3's name for the volume."""
MOUNT_PATH = "/var/run/secrets/kubeflow/trainer"
TOKEN_FILE = "token"
CA_FILE = "ca.crt"
TOKEN_EXPIRATION_SECONDS = 3600
"""The kubelet renews a projected token at 80 % of its life; an hour is Trainer v2's choice."""
LEGACY_AUDIENCE_PREFIX = "kubetrain.dev/status"
"""The audience of the tokens of pods made before kubetrain took Trainer v2.3's rule (still accepted)."""
CA_CONFIG_MAP = "kubetrain-status-ca"
"""The ConfigMap holding the endpoint's CA in every namespace with jobs (one per namespace, not per job)."""
CA_CONFIG_MAP_KEY = CA_FILE
VARIABLES = (STATUS_SERVER_URL_ENV, STATUS_SERVER_CA_CERT_ENV, STATUS_SERVER_TOKEN_ENV)
"""Trainer v2.3's names, what every container gets."""
OWN_VARIABLES = frozenset(name for spelling in VARIABLE_SPELLINGS for name in spelling)
"""A container that sets any of these itself (an earlier draft's spellings too) reports elsewhere."""
DEFAULT_SERVICE_ACCOUNT = "default"


def token_audience(target: StatusTarget) -> str:
    """The audience of the tokens one job's pods get, Trainer v2.3's rule for every kind: the job's status
    path without ``/apis/`` (``trainer.kubeflow.org/v1alpha1/namespaces/<ns>/trainjobs/<name>/status`` for a
    TrainJob, as ``statusserver.TokenAudience`` makes it). A token is useless against any other job's path
    before the endpoint even looks at which pod it belongs to."""
    return target.path.removeprefix("/apis/")


def legacy_token_audience(target: StatusTarget) -> str:
    """The audience kubetrain gave the same job's tokens before: pods made then still report."""
    return f"{LEGACY_AUDIENCE_PREFIX}/{target.namespace}/{target.plural}/{target.name}"


def status_url(base_url: str, target: StatusTarget) -> str:
    return f"{base_url.rstrip('/')}{target.path}"


@dataclass(frozen=True)
class StatusInjection:
    """Where pods reach the endpoint: the operator's setting that turns injection on."""

    base_url: str
    """``https://host[:port]``, without a path."""
    ca_config_map: str = CA_CONFIG_MAP


def inject_status_reporting(
    spec: dict[str, Any],
    injection: StatusInjection,
    *,
    api_version: str,
    namespace: str,
    plural: str,
    name: str,
) -> None:
    """Add the variables and the volume to ``spec`` (a pod spec, changed in place)."""
    volumes = spec.get("volumes") or []
    if any(volume.get("name") == VOLUME_NAME for volume in volumes):
        return
    target = StatusTarget(api_version, namespace, plural, name)
    variables = [
        {"name": STATUS_SERVER_URL_ENV, "value": status_url(injection.base_url, target)},
        {"name": STATUS_SERVER_CA_CERT_ENV, "value": f"{MOUNT_PATH}/{CA_FILE}"},
        {"name": STATUS_SERVER_TOKEN_ENV, "value": f"{MOUNT_PATH}/{TOKEN_FILE}"},
    ]
    mount = {"name": VOLUME_NAME, "mountPath": MOUNT_PATH, "readOnly": True}
    injected = False
    for container in spec.get("containers") or []:
        if _sets_its_own(container):
            continue
        container["env"] = [*(container.get("env") or []), *(dict(v) for v in variables)]
        container["volumeMounts"] = [*(container.get("volumeMounts") or []), dict(mount)]
        injected = True
    if injected:
        spec["volumes"] = [*volumes, _volume(injection, token_audience(target))]
        if not spec.get("serviceAccountName"):
            # A projected token is some service account's: the one the ServiceAccount admission plugin would
            # name anyway, said here so that an API server without that plugin (envtest) accepts the pod.
            spec["serviceAccountName"] = spec.get("serviceAccount") or DEFAULT_SERVICE_ACCOUNT


def _sets_its_own(container: dict[str, Any]) -> bool:
    env = {str(variable.get("name")) for variable in container.get("env") or ()}
    mounts = {str(mount.get("mountPath", "")).rstrip("/") for mount in container.get("volumeMounts") or ()}
    return bool(env & OWN_VARIABLES) or MOUNT_PATH in mounts


def _volume(injection: StatusInjection, audience: str) -> dict[str, Any]:
    return {
        "name": VOLUME_NAME,
        "projected": {
            "sources": [
                {
                    "serviceAccountToken": {
                        "audience": audience,
                        "expirationSeconds": TOKEN_EXPIRATION_SECONDS,
                        "path": TOKEN_FILE,
                    }
                },
                {
                    "configMap": {
                        "name": injection.ca_config_map,
                        "items": [{"key": CA_CONFIG_MAP_KEY, "path": CA_FILE}],
                        # A missing CA must not keep training from starting: the pod runs, and its
                        # reports fail TLS verification until the ConfigMap is back (the kubelet refreshes
                        # projected volumes).
                        "optional": True,
                    }
                },
            ]
        },
    }
