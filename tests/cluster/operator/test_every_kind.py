"""Every kubeflow.org/v1 kind on a real API server: the operator creates upstream's pods and services with the
framework's env, and the job's conditions and replicaStatuses follow the pod phases a kubelet reports."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from operator_support import (
    StartOperator,
    condition_true,
    create_job,
    env_of,
    eventually,
    get_job,
    pod,
    replica,
    services,
    wait_condition,
    wait_pods,
)

from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.poddriver import PodDriver

pytestmark = pytest.mark.cluster


@dataclass(frozen=True)
class KindCase:
    kind: str
    replica_field: str
    container: str
    port: int
    replicas: dict[str, int]
    decider: str
    """The pod whose success completes the job (the others succeed first where the rule needs all)."""
    probe_pod: str
    """A pod whose env is checked."""
    expected_env: dict[str, str] = field(default_factory=dict)

    def manifest(self, name: str) -> dict[str, Any]:
        specs = {rtype: replica(self.container, count) for rtype, count in self.replicas.items()}
        return {
            "apiVersion": "kubeflow.org/v1",
            "kind": self.kind,
            "metadata": {"name": name},
            "spec": {self.replica_field: specs},
        }

    def pod_names(self, name: str) -> list[str]:
        return [f"{name}-{rtype.lower()}-{i}" for rtype, count in self.replicas.items() for i in range(count)]


CASES = [
    KindCase(
        "PyTorchJob",
        "pytorchReplicaSpecs",
        "pytorch",
        23456,
        {"Master": 1, "Worker": 2},
        "master-0",
        "worker-1",
        {
            "MASTER_ADDR": "j-master-0",
            "MASTER_PORT": "23456",
            "WORLD_SIZE": "3",
            "RANK": "2",
            "PYTHONUNBUFFERED": "1",
        },
    ),
    KindCase("TFJob", "tfReplicaSpecs", "tensorflow", 2222, {"PS": 1, "Worker": 2}, "worker-0", "worker-1"),
    KindCase(
        "XGBoostJob",
        "xgbReplicaSpecs",
        "xgboost",
        9999,
        {"Master": 1, "Worker": 1},
        "master-0",
        "worker-0",
        {"MASTER_ADDR": "j-master-0", "MASTER_PORT": "9999", "WORLD_SIZE": "2", "RANK": "1"},
    ),
    KindCase(
        "PaddleJob",
        "paddleReplicaSpecs",
        "paddle",
        36543,
        {"Master": 1, "Worker": 1},
        "master-0",
        "worker-0",
        {
            "PADDLE_MASTER": "j-master-0:36543",
            "PADDLE_JOB_ID": "j",
            "PADDLE_NNODES": "2",
            "PADDLE_TRAINER_NUM": "1",
        },
    ),
    KindCase(
        "JAXJob",
        "jaxReplicaSpecs",
        "jax",
        6666,
        {"Worker": 2},
        "worker-0",
        "worker-1",
        {
            "COORDINATOR_ADDRESS": "j-worker-0",
            "COORDINATOR_PORT": "6666",
            "NUM_PROCESSES": "2",
            "PROCESS_ID": "1",
        },
    ),
    KindCase(
        "MXJob",
        "mxReplicaSpecs",
        "mxnet",
        9091,
        {"Scheduler": 1, "Server": 1, "Worker": 1},
        "scheduler-0",
        "worker-0",
        {
            "DMLC_PS_ROOT_URI": "j-scheduler-0",
            "DMLC_PS_ROOT_PORT": "9091",
            "DMLC_ROLE": "worker",
            "DMLC_NUM_WORKER": "1",
        },
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.kind)
def test_job_gets_upstream_pods_services_and_env_then_follows_pod_phases_to_succeeded(
    case: KindCase, kube_api: KubeApi, namespace: str, pod_driver: PodDriver, start_operator: StartOperator
) -> None:
    start_operator()
    create_job(kube_api, namespace, case.manifest("j"))
    expected = case.pod_names("j")
    created = wait_pods(kube_api, namespace, expected)

    for created_pod in created:
        labels = created_pod["metadata"]["labels"]
        rtype, index = created_pod["metadata"]["name"].split("-")[1:]
        assert labels["training.kubeflow.org/job-name"] == "j"
        assert labels["training.kubeflow.org/replica-type"] == rtype
        assert labels["training.kubeflow.org/replica-index"] == index
        assert labels["training.kubeflow.org/operator-name"] == f"{case.kind.lower()}-controller"
        owner = created_pod["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["controller"]) == (case.kind, "j", True)
    svcs = {s["metadata"]["name"]: s for s in services(kube_api, namespace)}
    assert sorted(svcs) == sorted(expected)
    probe_service = svcs[f"j-{case.probe_pod}"]
    assert probe_service["spec"]["clusterIP"] == "None"
    assert [p["port"] for p in probe_service["spec"]["ports"]] == [case.port]
    assert (
        probe_service["spec"]["selector"]["training.kubeflow.org/replica-index"]
        == case.probe_pod.split("-")[1]
    )
    env = env_of(pod(kube_api, namespace, f"j-{case.probe_pod}"), case.container)
    assert {k: env.get(k) for k in case.expected_env} == case.expected_env

    for name in expected:
        pod_driver.run((namespace, name))
    wait_condition(kube_api, case.kind, namespace, "j", "Running")

    def all_active() -> bool:
        statuses = get_job(kube_api, case.kind, namespace, "j")["status"]["replicaStatuses"]
        return {rtype: status.get("active", 0) for rtype, status in statuses.items()} == case.replicas

    eventually(all_active, what="every replica counted active")

    for name in expected:
        if name != f"j-{case.decider}":
            pod_driver.succeed((namespace, name))
    pod_driver.succeed((namespace, f"j-{case.decider}"))
    done = wait_condition(kube_api, case.kind, namespace, "j", "Succeeded")
    conditions = [c["type"] for c in done["status"]["conditions"]]
    assert conditions[0] == "Created" and conditions[-1] == "Succeeded"
    assert done["status"]["conditions"][-1]["reason"] == f"{case.kind}Succeeded"
    assert done["status"].get("completionTime")
    assert not condition_true(done, "Running")


def test_tfjob_tf_config_names_every_replica_by_its_service_dns_name(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    start_operator()
    case = CASES[1]
    create_job(kube_api, namespace, case.manifest("j"))
    wait_pods(kube_api, namespace, case.pod_names("j"))
    tf_config = json.loads(env_of(pod(kube_api, namespace, "j-worker-1"), "tensorflow")["TF_CONFIG"])
    assert tf_config["cluster"] == {
        "ps": [f"j-ps-0.{namespace}.svc:2222"],
        "worker": [f"j-worker-0.{namespace}.svc:2222", f"j-worker-1.{namespace}.svc:2222"],
    }
    assert tf_config["task"] == {"type": "worker", "index": 1}


def test_pytorch_workers_wait_for_the_master_dns_name_in_an_init_container(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    start_operator("--pytorch-init-container-image", "busybox:1", "--pytorch-init-container-max-tries", "7")
    create_job(kube_api, namespace, CASES[0].manifest("j"))
    wait_pods(kube_api, namespace, CASES[0].pod_names("j"))
    init = pod(kube_api, namespace, "j-worker-0")["spec"]["initContainers"]
    assert [(c["name"], c["image"]) for c in init] == [("init-pytorch", "busybox:1")]
    assert "seq 7" in " ".join(init[0]["command"]) and "nslookup j-master-0" in " ".join(init[0]["command"])
    assert "initContainers" not in pod(kube_api, namespace, "j-master-0")["spec"]


def test_job_status_is_readable_by_the_training_client_fields(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    """replicaStatuses carry the selector the scale subresource and HPA read."""
    start_operator()
    create_job(kube_api, namespace, CASES[0].manifest("j"))
    # The status write follows the pod creations, so wait for the condition it carries, not for the pods.
    status = wait_condition(kube_api, "PyTorchJob", namespace, "j", "Created")["status"]
    assert status["replicaStatuses"]["Worker"]["selector"] == (
        "training.kubeflow.org/job-name=j,training.kubeflow.org/operator-name=pytorchjob-controller,"
        "training.kubeflow.org/replica-type=worker"
    )


def test_a_custom_cluster_domain_suffixes_the_tf_config_addresses(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    start_operator(env={"CUSTOM_CLUSTER_DOMAIN": "cluster.example"})
    case = CASES[1]
    create_job(kube_api, namespace, case.manifest("j"))
    wait_pods(kube_api, namespace, case.pod_names("j"))
    tf_config = json.loads(env_of(pod(kube_api, namespace, "j-ps-0"), "tensorflow")["TF_CONFIG"])
    assert tf_config["cluster"]["ps"] == [f"j-ps-0.{namespace}.svc.cluster.example:2222"]


def test_pytorch_workers_get_the_init_containers_of_the_operators_template_file(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator, tmp_path: Path
) -> None:
    template = tmp_path / "initContainer.yaml"
    template.write_text(
        "- name: wait-for-master\n"
        "  image: {{ .InitContainerImage }}\n"
        "  command: ['sh', '-c', 'until nslookup {{.MasterAddr}}; do sleep 1; done # {{.MaxTries}}']\n"
    )
    start_operator(
        "--pytorch-init-container-template-file",
        str(template),
        "--pytorch-init-container-image",
        "busybox:1",
        "--pytorch-init-container-max-tries",
        "7",
    )
    create_job(kube_api, namespace, CASES[0].manifest("j"))
    wait_pods(kube_api, namespace, CASES[0].pod_names("j"))
    [init] = pod(kube_api, namespace, "j-worker-0")["spec"]["initContainers"]
    assert (init["name"], init["image"]) == ("wait-for-master", "busybox:1")
    assert init["command"][2] == "until nslookup j-master-0; do sleep 1; done # 7"
    assert "initContainers" not in pod(kube_api, namespace, "j-master-0")["spec"]
