"""The seeds' exercise on a real node, with the operator in-cluster: 1 master + 2 workers, ``restartPolicy:
OnFailure``, ``backoffLimit: 3``, ``cleanPodPolicy: Running``, the master's command exiting 1. The kubelet
restarts the master in place until the job is Failed; then every pod is deleted (under OnFailure the
crash-looping master is a Running pod) and ``kubectl logs`` answers NotFound. What ``kubetrain describe`` and
``kubetrain logs`` still show is the master's exit code and the last lines it wrote, which the operator read
from the real kubelet before the pods went."""

from __future__ import annotations

from typing import Any

import pytest

from builders import container, manifest
from e2e.realpods import TEST_IMAGE, RealCluster, wait_until
from waiting import PATIENCE

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

JOB_TIMEOUT_SECONDS = 240.0
MASTER = "print('epoch 3', flush=True); print('loss is nan', flush=True); raise SystemExit(1)"
WORKER = "import time; time.sleep(600)"


def try_this(namespace: str) -> dict[str, Any]:
    body = manifest("PyTorchJob", {}, name="try-this", namespace=namespace)
    body["spec"] = {
        "runPolicy": {"backoffLimit": 3, "cleanPodPolicy": "Running"},
        "pytorchReplicaSpecs": {
            replica_type: {
                "replicas": count,
                "restartPolicy": "OnFailure",
                "template": {
                    "spec": {
                        "terminationGracePeriodSeconds": 1,
                        "containers": [
                            container(
                                "pytorch",
                                TEST_IMAGE,
                                imagePullPolicy="Never",
                                command=["python", "-u", "-c", command],
                            )
                        ],
                    }
                },
            }
            for replica_type, count, command in (("Master", 1, MASTER), ("Worker", 2, WORKER))
        },
    }
    return body


@pytest.fixture
def failed_and_cleaned_up(operator: RealCluster, namespace: str) -> RealCluster:
    """``try-this`` created, Failed by its backoffLimit, and every pod of it gone."""
    jobs = f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs"
    operator.api.create(jobs, try_this(namespace))

    def failed() -> bool:
        conditions = operator.api.get(f"{jobs}/try-this").get("status", {}).get("conditions") or []
        return any(c["type"] == "Failed" and c["status"] == "True" for c in conditions)

    # The kubelet's crash-loop back-off (10 s, 20 s, 40 s) paces the master's three restarts.
    wait_until("try-this Failed", failed, JOB_TIMEOUT_SECONDS)
    selector = {"labelSelector": "training.kubeflow.org/job-name=try-this"}
    wait_until(
        "try-this's pods deleted",
        lambda: operator.api.get(f"/api/v1/namespaces/{namespace}/pods", selector)["items"] == [],
        PATIENCE,
    )
    return operator


def test_after_the_pods_are_gone_kubectl_logs_has_nothing_but_describe_shows_the_masters_failure(
    failed_and_cleaned_up: RealCluster, namespace: str
) -> None:
    cluster = failed_and_cleaned_up

    kubectl_logs = cluster.kubectl("logs", "-n", namespace, "try-this-master-0")
    described = cluster.kubetrain("describe", "pytorchjob", "try-this", "-n", namespace)

    assert kubectl_logs.returncode != 0 and "NotFound" in kubectl_logs.stderr
    assert described.returncode == 0, described.stderr
    text = described.stdout.splitlines()
    assert text[0] == "First Failure:"
    assert text[1] == "  Replica:    Master 0 (pod try-this-master-0 on node real-node-0)"
    assert text[2] == "  How:        container pytorch exited with code 1 (Error)"
    assert text[4:7] == ["  Last Lines:", "    epoch 3", "    loss is nan"]


def test_after_the_pods_are_gone_kubetrain_logs_prints_the_masters_last_lines_and_says_whence(
    failed_and_cleaned_up: RealCluster, namespace: str
) -> None:
    logs = failed_and_cleaned_up.kubetrain("logs", "try-this", "-n", namespace, "--replica", "master-0")

    assert logs.returncode == 0, logs.stderr
    lines = logs.stdout.splitlines()
    assert lines[0].startswith(
        "[kubetrain: pod try-this-master-0 is gone; its last 2 line(s) as kept on the job at its first "
        "failure: container pytorch exited with code 1 (Error) at "
    )
    assert lines[1:3] == ["epoch 3", "loss is nan"]
