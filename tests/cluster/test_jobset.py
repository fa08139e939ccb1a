"""The JobSet controller (v0.12.0, built from its Go module) on envtest does what it does on a cluster: a
JobSet gets a batch Job per replicated job replica, a headless Service for its pods' subdomain, pods labelled
and annotated by JobSet; its status follows the pods the pod driver finishes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kubetrain.envtest.kubeapi import KubeApi, KubeObject
from kubetrain.envtest.poddriver import PodDriver
from kubetrain.envtest.pytest_plugin import EnvtestCluster
from waiting import eventually

pytestmark = pytest.mark.cluster

JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"


def replicated_job(name: str, replicas: int, pods: int) -> KubeObject:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "parallelism": pods,
                "completions": pods,
                "backoffLimit": 0,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "trainer",
                                "image": "example.com/trainer:1",
                                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                            }
                        ],
                    }
                },
            }
        },
    }


def two_role_jobset(name: str, **spec: Any) -> KubeObject:
    """A leader job of one pod and two worker jobs of two pods each: 3 Jobs, 5 pods."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {"replicatedJobs": [replicated_job("leader", 1, 1), replicated_job("workers", 2, 2)], **spec},
    }


def create(api: KubeApi, namespace: str, jobset: KubeObject) -> KubeObject:
    return api.create(JOBSETS.format(namespace=namespace), jobset)


def jobs(api: KubeApi, namespace: str, name: str) -> list[KubeObject]:
    selector = {"labelSelector": f"{JOBSET_NAME}={name}"}
    return list(api.get(f"/apis/batch/v1/namespaces/{namespace}/jobs", selector)["items"])


def live_pods(api: KubeApi, namespace: str, name: str) -> list[KubeObject]:
    selector = {"labelSelector": f"{JOBSET_NAME}={name}"}
    items = api.get(f"/api/v1/namespaces/{namespace}/pods", selector)["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def counted(listing: Callable[[], list[KubeObject]], count: int, what: str) -> list[KubeObject]:
    """``listing()`` once it holds ``count`` objects."""

    def probe() -> list[KubeObject] | None:
        items = listing()
        return items if len(items) == count else None

    return list(eventually(probe, f"{count} {what}"))


def all_pods(api: KubeApi, namespace: str, name: str, count: int) -> list[KubeObject]:
    return counted(lambda: live_pods(api, namespace, name), count, f"pods of JobSet {name}")


def condition(api: KubeApi, namespace: str, name: str, type_: str) -> KubeObject | None:
    jobset = api.get(f"{JOBSETS.format(namespace=namespace)}/{name}")
    conditions = (jobset.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == type_ and c["status"] == "True"), None)


def test_each_replica_of_a_replicated_job_becomes_a_batch_job(
    jobset_controller: EnvtestCluster, kube_api: KubeApi, namespace: str
) -> None:
    jobset = create(kube_api, namespace, two_role_jobset("train"))

    made = counted(lambda: jobs(kube_api, namespace, "train"), 3, "Jobs")

    assert sorted(job["metadata"]["name"] for job in made) == [
        "train-leader-0",
        "train-workers-0",
        "train-workers-1",
    ]
    for job in made:
        owner = job["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("JobSet", "train", jobset["metadata"]["uid"])
        assert owner["controller"] is True
        assert job["spec"]["completionMode"] == "Indexed"


def test_the_jobset_gets_a_headless_service_named_for_its_pods_subdomain(
    jobset_controller: EnvtestCluster, kube_api: KubeApi, namespace: str
) -> None:
    create(kube_api, namespace, two_role_jobset("train"))

    service = eventually(
        lambda: kube_api.get_or_none(f"/api/v1/namespaces/{namespace}/services/train"), "Service"
    )

    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == {JOBSET_NAME: "train"}
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["metadata"]["ownerReferences"][0]["kind"] == "JobSet"


def test_pods_carry_jobsets_labels_annotations_and_subdomain(
    jobset_controller: EnvtestCluster, kube_api: KubeApi, namespace: str
) -> None:
    create(kube_api, namespace, two_role_jobset("train"))

    pods = all_pods(kube_api, namespace, "train", 5)

    for pod in pods:
        labels, annotations = pod["metadata"]["labels"], pod["metadata"]["annotations"]
        job = pod["metadata"]["ownerReferences"][0]["name"]
        role, index = job.removeprefix("train-").rsplit("-", 1)
        for stamped in (labels, annotations):
            assert stamped[JOBSET_NAME] == "train"
            assert stamped[REPLICATED_JOB] == role
            assert stamped[JOB_INDEX] == index
            assert stamped[RESTART_ATTEMPT] == "0"
        assert pod["spec"]["subdomain"] == "train"
        completion_index = annotations["batch.kubernetes.io/job-completion-index"]
        assert pod["spec"]["hostname"] == f"{job}-{completion_index}"


def test_every_pod_succeeding_completes_the_jobset(
    jobset_controller: EnvtestCluster, kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    create(kube_api, namespace, two_role_jobset("train"))
    pods = all_pods(kube_api, namespace, "train", 5)

    for pod in pods:
        pod_driver.run(pod)
    for pod in pods:
        pod_driver.succeed(pod)

    completed = eventually(lambda: condition(kube_api, namespace, "train", "Completed"), "Completed")
    assert (completed["reason"], completed["message"]) == (
        "AllJobsCompleted",
        "jobset completed successfully",
    )


def test_a_failed_pod_within_max_restarts_recreates_every_job(
    jobset_controller: EnvtestCluster, kube_api: KubeApi, namespace: str, pod_driver: PodDriver
) -> None:
    create(kube_api, namespace, two_role_jobset("train", failurePolicy={"maxRestarts": 1}))
    first = {job["metadata"]["uid"] for job in counted(lambda: jobs(kube_api, namespace, "train"), 3, "Jobs")}
    worker = next(
        p
        for p in all_pods(kube_api, namespace, "train", 5)
        if p["metadata"]["labels"][REPLICATED_JOB] == "workers"
    )

    pod_driver.fail(worker, exit_code=1)

    def restarted() -> list[KubeObject] | None:
        current = [
            j for j in jobs(kube_api, namespace, "train") if not j["metadata"].get("deletionTimestamp")
        ]
        attempts = {j["metadata"]["labels"][RESTART_ATTEMPT] for j in current}
        return current if len(current) == 3 and attempts == {"1"} else None

    again = eventually(restarted, "3 Jobs of restart attempt 1")
    assert not first & {job["metadata"]["uid"] for job in again}
    jobset = kube_api.get(f"{JOBSETS.format(namespace=namespace)}/train")
    assert jobset["status"]["restarts"] == 1
    assert condition(kube_api, namespace, "train", "Failed") is None
