"""Where a TrainJob's training reports its progress (Trainer's ``TrainJobStatus`` plugin): the three
``KUBEFLOW_TRAINER_SERVER_*`` variables in every trainer container, a projected volume with a token for the
job's audience and the endpoint's CA, and the ``<trainjob>-tls-config`` ConfigMap holding that CA."""

from __future__ import annotations

from dataclasses import dataclass

from kubetrain.api.trainer import TrainJob
from kubetrain.frameworks.trainer.constants import ANCESTOR_TRAINER
from kubetrain.frameworks.trainer.info import Obj, RuntimeInfo, env_value, upsert_env, upsert_mounts
from kubetrain.frameworks.trainer.plugin import Addressing, Existing, RuntimePlugin

URL_ENV = "KUBEFLOW_TRAINER_SERVER_URL"
CA_CERT_ENV = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
TOKEN_ENV = "KUBEFLOW_TRAINER_SERVER_TOKEN"
MOUNT_PATH = "/var/run/secrets/kubeflow/trainer"
CA_FILE = "ca.crt"
TOKEN_FILE = "token"
VOLUME = "kubeflow-trainer-token"
TOKEN_EXPIRY_SECONDS = 3600
AUDIENCE_PREFIX = "trainer.kubeflow.org"


def status_path(namespace: str, name: str) -> str:
    return f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"


def token_audience(namespace: str, name: str) -> str:
    return f"{AUDIENCE_PREFIX}/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"


def tls_config_name(trainjob: str) -> str:
    return f"{trainjob}-tls-config"


@dataclass(frozen=True)
class StatusServer:
    """The status endpoint the trainer containers report to."""

    base_url: str
    """``https://<service>.<namespace>.svc:<port>``; the job's path is appended."""
    ca_pem: str
    """The CA that signed the endpoint's certificate, put in each job's ``<trainjob>-tls-config``."""


class StatusPlugin(RuntimePlugin):
    name = "TrainJobStatus"

    def __init__(self, server: StatusServer) -> None:
        self.server = server

    def enforce_ml_policy(self, info: RuntimeInfo, trainjob: TrainJob, addressing: Addressing) -> None:
        pod_set = info.pod_set_by_ancestor(ANCESTOR_TRAINER)
        if pod_set is None:
            return
        env = [
            env_value(URL_ENV, self.server.base_url + status_path(trainjob.namespace, trainjob.name)),
            env_value(CA_CERT_ENV, f"{MOUNT_PATH}/{CA_FILE}"),
            env_value(TOKEN_ENV, f"{MOUNT_PATH}/{TOKEN_FILE}"),
        ]
        for container in pod_set.containers:
            upsert_env(container, *env)
            upsert_mounts(container, {"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True})
        pod_set.upsert_volumes(
            {
                "name": VOLUME,
                "projected": {
                    "sources": [
                        {
                            "serviceAccountToken": {
                                "audience": token_audience(trainjob.namespace, trainjob.name),
                                "expirationSeconds": TOKEN_EXPIRY_SECONDS,
                                "path": TOKEN_FILE,
                            }
                        },
                        {
                            "configMap": {
                                "name": tls_config_name(trainjob.name),
                                "items": [{"key": CA_FILE, "path": CA_FILE}],
                            }
                        },
                    ]
                },
            }
        )

    def build(self, info: RuntimeInfo, trainjob: TrainJob, existing: Existing) -> list[Obj]:
        return [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": tls_config_name(trainjob.name)},
                "data": {CA_FILE: self.server.ca_pem},
            }
        ]
