"""Kubeflow Trainer v2's TrainJob on a real API server: the operator applies the runtime snapshot and the
JobSet (and MPI's Secret and hostfile) as Trainer v2.3.0 does, and maps the JobSet's status back.

The JobSet's status is written here as its controller would (Trainer's own integration tests do the same);
the real JobSet controller running them is the e2e tier's and the peers tier's proof."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from operator_support import StartOperator, eventually

from kubetrain.envtest import jobset
from kubetrain.envtest.crds import install_crd_files
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.frameworks.trainer.builtin import builtin_runtime_documents

pytestmark = pytest.mark.cluster

TRAINER = "/apis/trainer.kubeflow.org/v1alpha1"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2"


@pytest.fixture(scope="module")
def jobset_crd(kube_api: KubeApi) -> None:
    """JobSet's CRD, as envtest's JobSet controller serves it (the controller is not needed here)."""
    install_crd_files(kube_api, [jobset.crd_path()])


@pytest.fixture(scope="module")
def builtin_runtimes(kube_api: KubeApi, job_crds: list[str], jobset_crd: None) -> Iterator[None]:
    """Trainer's built-in ClusterTrainingRuntimes, as the operator's chart installs them."""
    for document in builtin_runtime_documents():
        path = f"{TRAINER}/clustertrainingruntimes"
        if not kube_api.exists(f"{path}/{document['metadata']['name']}"):
            kube_api.create(path, document)
    yield


def _trainjob(name: str, runtime: str = "torch-distributed", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": runtime}, **spec},
    }


def _create(api: KubeApi, namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
    return api.create(f"{TRAINER}/namespaces/{namespace}/trainjobs", manifest)


def _trainjob_status(api: KubeApi, namespace: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = api.get(f"{TRAINER}/namespaces/{namespace}/trainjobs/{name}").get("status") or {}
    return status


def _condition(api: KubeApi, namespace: str, name: str, type_: str) -> dict[str, Any] | None:
    conditions = _trainjob_status(api, namespace, name).get("conditions") or []
    return next((c for c in conditions if c["type"] == type_), None)


def _jobset(api: KubeApi, namespace: str, name: str) -> dict[str, Any] | None:
    return api.get_or_none(f"{JOBSETS}/namespaces/{namespace}/jobsets/{name}")


def _node_env(jobset: dict[str, Any], job: str = "node") -> dict[str, Any]:
    replicated = next(j for j in jobset["spec"]["replicatedJobs"] if j["name"] == job)
    container = next(
        c for c in replicated["template"]["spec"]["template"]["spec"]["containers"] if c["name"] == "node"
    )
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}


def _set_jobset_status(api: KubeApi, namespace: str, name: str, status: dict[str, Any]) -> None:
    api.patch(f"{JOBSETS}/namespaces/{namespace}/jobsets/{name}/status", {"status": status})


def test_a_trainjob_gets_its_runtime_snapshot_and_jobset_applied_by_trainer(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator, builtin_runtimes: None
) -> None:
    start_operator()
    trainjob = _create(kube_api, namespace, _trainjob("tj", trainer={"numNodes": 2, "image": "img:1"}))
    jobset = eventually(lambda: _jobset(kube_api, namespace, "tj"), what="the JobSet")
    (owner,) = jobset["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        "TrainJob",
        trainjob["metadata"]["uid"],
        True,
    )
    assert {entry["manager"] for entry in jobset["metadata"]["managedFields"]} == {"trainer"}
    env = _node_env(jobset)
    assert (env["PET_NNODES"], env["PET_MASTER_ADDR"], env["PET_MASTER_PORT"]) == (
        "2",
        "tj-node-0-0.tj",
        "29500",
    )
    snapshot = kube_api.get(f"/api/v1/namespaces/{namespace}/configmaps/tj-runtime-snapshot")
    assert "name: torch-distributed" in snapshot["data"]["runtime"]


def test_a_completed_jobset_completes_its_trainjob(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator, builtin_runtimes: None
) -> None:
    start_operator()
    _create(kube_api, namespace, _trainjob("done"))
    eventually(lambda: _jobset(kube_api, namespace, "done"), what="the JobSet")
    _set_jobset_status(
        kube_api,
        namespace,
        "done",
        {
            "conditions": [
                {
                    "type": "Completed",
                    "status": "True",
                    "reason": "AllJobsCompleted",
                    "message": "jobset completed successfully",
                    "lastTransitionTime": "2026-11-27T12:00:00Z",
                }
            ],
            "replicatedJobsStatus": [
                {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
            ],
        },
    )
    complete = eventually(lambda: _condition(kube_api, namespace, "done", "Complete"), what="Complete")
    assert (complete["reason"], complete["message"]) == ("AllJobsCompleted", "jobset completed successfully")
    assert _trainjob_status(kube_api, namespace, "done")["jobsStatus"] == [
        {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
    ]


def test_suspend_suspends_the_jobset_and_resume_resumes_it(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator, builtin_runtimes: None
) -> None:
    start_operator()
    _create(kube_api, namespace, _trainjob("held", suspend=True))
    suspended = eventually(lambda: _condition(kube_api, namespace, "held", "Suspended"), what="Suspended")
    assert (suspended["status"], suspended["message"]) == ("True", "TrainJob is suspended")
    assert eventually(lambda: _jobset(kube_api, namespace, "held"))["spec"]["suspend"] is True
    kube_api.patch(f"{TRAINER}/namespaces/{namespace}/trainjobs/held", {"spec": {"suspend": False}})
    eventually(
        lambda: (_condition(kube_api, namespace, "held", "Suspended") or {}).get("reason") == "Resumed",
        what="Resumed",
    )
    eventually(
        lambda: (_jobset(kube_api, namespace, "held") or {})["spec"].get("suspend") is False, what="resume"
    )


def test_the_active_deadline_fails_the_trainjob_and_deletes_its_jobset(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator, builtin_runtimes: None
) -> None:
    start_operator()
    _create(kube_api, namespace, _trainjob("late", activeDeadlineSeconds=2))
    failed = eventually(lambda: _condition(kube_api, namespace, "late", "Failed"), what="Failed")
    assert (failed["reason"], failed["message"]) == (
        "DeadlineExceeded",
        "TrainJob exceeded its active deadline",
    )
    eventually(
        lambda: (
            (_jobset(kube_api, namespace, "late") or {}).get("metadata", {}).get("deletionTimestamp")
            or _jobset(kube_api, namespace, "late") is None
        ),
        what="the JobSet deleted",
    )


def test_an_mpi_trainjob_gets_its_ssh_secret_and_hostfile(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator, builtin_runtimes: None
) -> None:
    start_operator()
    _create(kube_api, namespace, _trainjob("mpi", "deepspeed-distributed", trainer={"numNodes": 2}))
    secret = eventually(
        lambda: kube_api.get_or_none(f"/api/v1/namespaces/{namespace}/secrets/mpi-mpi-ssh-auth"),
        what="the Secret",
    )
    assert secret["type"] == "kubernetes.io/ssh-auth" and secret["immutable"] is True
    assert base64.b64decode(secret["data"]["ssh-publickey"]).startswith(b"ecdsa-sha2-nistp521 ")
    hostfile = kube_api.get(f"/api/v1/namespaces/{namespace}/configmaps/mpi-mpi-hostfile")
    assert hostfile["data"]["hostfile"] == "mpi-node-0-0.mpi slots=1\nmpi-launcher-0-0.mpi slots=1\n"


def test_a_spec_trainers_webhook_refuses_fails_the_trainjob_naming_the_field(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator, builtin_runtimes: None
) -> None:
    start_operator()
    _create(kube_api, namespace, _trainjob("bad", trainer={"env": [{"name": "PET_NNODES", "value": "4"}]}))
    failed = eventually(lambda: _condition(kube_api, namespace, "bad", "Failed"), what="Failed")
    assert failed["reason"] == "InvalidSpec" and "spec.trainer.env" in failed["message"]
    assert _jobset(kube_api, namespace, "bad") is None


def test_a_trainjob_for_multikueue_is_left_alone(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator, builtin_runtimes: None
) -> None:
    operator = start_operator()
    _create(kube_api, namespace, _trainjob("remote", managedBy="kueue.x-k8s.io/multikueue"))
    _create(kube_api, namespace, _trainjob("local"))
    eventually(lambda: _jobset(kube_api, namespace, "local"), what="the other TrainJob's JobSet")
    assert _jobset(kube_api, namespace, "remote") is None
    assert _trainjob_status(kube_api, namespace, "remote") == {}
    assert operator.process.poll() is None
