"""Kueue v0.17.0's TrainJob integration queueing kubetrain's TrainJobs on a real API server: Kueue admits a
TrainJob by unsuspending it (its pod sets' labels in its own runtime patch) and suspends it when it takes the
quota back; kubetrain's operator keeps the JobSet suspended, then runs it, as Trainer v2.3 does; the real
JobSet v0.12.0 controller makes the Jobs, the controller-manager their pods, the pod driver plays the kubelet.
The queues are ``examples/kueue/queues.yaml``, the TrainJobs ``examples/kueue/trainjob.yaml``
(docs/operations.md, "Queueing TrainJobs with Kueue")."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from operator_support import StartOperator, eventually

from kubetrain.envtest.kubeapi import KubeApi, KubeObject
from kubetrain.envtest.poddriver import PodDriver
from kubetrain.envtest.pytest_plugin import EnvtestCluster
from kueue_cluster import (
    KUEUE_API,
    RELEASE_FRAMEWORKS,
    example,
    example_queues,
    kueue_beside,
    renamed_cluster_object,
)
from trainjob_cluster import install_trainjob_crds

pytestmark = pytest.mark.cluster

TRAINER = "/apis/trainer.kubeflow.org/v1alpha1"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
PODSET_LABEL = "kueue.x-k8s.io/podset"
KUEUE_MANAGER = "kueue.x-k8s.io/manager"
NODES = 2
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def kueue_running(jobset_controller: EnvtestCluster, kube_api: KubeApi) -> Iterator[EnvtestCluster]:
    install_trainjob_crds(kube_api)
    with kueue_beside(jobset_controller, RELEASE_FRAMEWORKS) as cluster:
        yield cluster


@pytest.fixture
def queue(kueue_running: EnvtestCluster, kube_api: KubeApi, namespace: str) -> Iterator[str]:
    """The example's queues for this test's namespace, with two priorities; the LocalQueue's name."""
    priorities = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        for name, value in (("low", 10), ("high", 1000))
    ]
    with example_queues(kube_api, namespace, priorities) as local_queue:
        yield local_queue


def _create(
    api: KubeApi, namespace: str, name: str, queue: str | None, priority: str | None = None, **spec: Any
) -> KubeObject:
    [trainjob] = copy.deepcopy(example("trainjob.yaml"))
    trainjob["metadata"]["name"] = name
    labels = trainjob["metadata"]["labels"]
    if queue is None:
        del labels[QUEUE_LABEL]
    else:
        labels[QUEUE_LABEL] = queue
    if priority is not None:
        labels[PRIORITY_LABEL] = renamed_cluster_object(priority, namespace)
    trainjob["spec"].update(spec)
    return api.create(f"{TRAINER}/namespaces/{namespace}/trainjobs", trainjob)


def _trainjob(api: KubeApi, namespace: str, name: str) -> KubeObject:
    return api.get(f"{TRAINER}/namespaces/{namespace}/trainjobs/{name}")


def _condition(obj: KubeObject, type_: str) -> dict[str, Any] | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == type_), None)


def _trainjob_condition(
    api: KubeApi, namespace: str, name: str, type_: str, status: str
) -> dict[str, Any] | None:
    """The TrainJob's condition ``type_`` when it has ``status``."""
    condition = _condition(_trainjob(api, namespace, name), type_)
    return condition if condition is not None and condition["status"] == status else None


def _jobset(api: KubeApi, namespace: str, name: str) -> KubeObject | None:
    return api.get_or_none(f"{JOBSETS}/namespaces/{namespace}/jobsets/{name}")


def _workloads(api: KubeApi, namespace: str) -> list[KubeObject]:
    return list(api.get(f"{KUEUE_API}/namespaces/{namespace}/workloads")["items"])


def _owners(workload: KubeObject) -> list[tuple[str, str]]:
    return [(o["kind"], o["name"]) for o in workload["metadata"].get("ownerReferences") or []]


def _workload(api: KubeApi, namespace: str, trainjob: str) -> KubeObject | None:
    return next((w for w in _workloads(api, namespace) if ("TrainJob", trainjob) in _owners(w)), None)


def _workload_condition(api: KubeApi, namespace: str, trainjob: str, type_: str) -> dict[str, Any] | None:
    workload = _workload(api, namespace, trainjob)
    return _condition(workload, type_) if workload is not None else None


def _workload_true(api: KubeApi, namespace: str, trainjob: str, type_: str) -> bool:
    return (_workload_condition(api, namespace, trainjob, type_) or {}).get("status") == "True"


def _admitted(api: KubeApi, namespace: str, trainjob: str) -> bool:
    return _workload_true(api, namespace, trainjob, "Admitted")


def _pods(api: KubeApi, namespace: str, name: str) -> list[KubeObject]:
    selector = {"labelSelector": f"jobset.sigs.k8s.io/jobset-name={name}"}
    pods = api.get(f"/api/v1/namespaces/{namespace}/pods", selector)["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def _admitted_and_running(api: KubeApi, namespace: str, name: str, held: bool = True) -> list[KubeObject]:
    """Once Kueue admitted the TrainJob: unsuspended, its JobSet too, its node pods made; the pods. One the
    operator saw ``held`` (suspended) is ``Resumed``; Kueue may admit a TrainJob before the operator sees it
    suspended at all, and then, as with Trainer, it never had a ``Suspended`` condition."""
    eventually(lambda: _admitted(api, namespace, name), f"{name} admitted by Kueue")
    eventually(
        lambda: _trainjob(api, namespace, name)["spec"]["suspend"] is False,
        f"{name} unsuspended by Kueue",
    )
    if held:
        resumed = eventually(
            lambda: _trainjob_condition(api, namespace, name, "Suspended", "False"),
            f"{name} resumed",
        )
        assert (resumed["reason"], resumed["message"]) == ("Resumed", "TrainJob is resumed")
    eventually(
        lambda: (_jobset(api, namespace, name) or {}).get("spec", {}).get("suspend") is False,
        f"{name}'s JobSet unsuspended",
    )

    def made() -> list[KubeObject] | None:
        pods = _pods(api, namespace, name)
        return pods if len(pods) == NODES else None

    pods: list[KubeObject] = eventually(made, f"{name}'s pods")
    return pods


def _assert_held(api: KubeApi, namespace: str, name: str) -> None:
    """Suspended by Kueue (its spec), said so (its condition: the operator writes it after it made the
    suspended JobSet, a moment later under load), its JobSet suspended, no pods."""
    suspended = eventually(
        lambda: _trainjob_condition(api, namespace, name, "Suspended", "True"), f"{name} Suspended"
    )
    assert suspended["reason"] == "Suspended"
    assert _trainjob(api, namespace, name)["spec"]["suspend"] is True
    jobset = _jobset(api, namespace, name)
    assert jobset is None or jobset["spec"]["suspend"] is True
    assert _pods(api, namespace, name) == []


def _finish(api: KubeApi, pod_driver: PodDriver, namespace: str, name: str, pods: list[KubeObject]) -> None:
    for pod in pods:
        pod_driver.run(pod)
    for pod in pods:
        pod_driver.succeed(pod)
    complete = eventually(
        lambda: _trainjob_condition(api, namespace, name, "Complete", "True"),
        f"{name} Complete",
    )
    assert complete["reason"] == "AllJobsCompleted"


def _kueue_podset_label(pod: KubeObject) -> str | None:
    label: str | None = pod["metadata"].get("labels", {}).get(PODSET_LABEL)
    return label


def test_kueue_holds_a_second_trainjob_until_the_first_frees_its_quota(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator, pod_driver: PodDriver, queue: str
) -> None:
    start_operator()
    _create(kube_api, namespace, "first", queue)
    first_pods = _admitted_and_running(kube_api, namespace, "first", held=False)
    # What Kueue admitted with reached the pods through its runtime patch, merged by the operator.
    assert {_kueue_podset_label(p) for p in first_pods} == {"node"}
    [patch] = _trainjob(kube_api, namespace, "first")["spec"]["runtimePatches"]
    assert patch["manager"] == KUEUE_MANAGER

    _create(kube_api, namespace, "second", queue)
    pending = eventually(
        lambda: _workload_condition(kube_api, namespace, "second", "QuotaReserved"),
        "Kueue's verdict on the second",
    )
    assert (pending["status"], pending["reason"]) == ("False", "Pending")
    assert "insufficient unused quota for cpu" in pending["message"]
    eventually(
        lambda: (_jobset(kube_api, namespace, "second") or {}).get("spec", {}).get("suspend"),
        "the second's JobSet, suspended",
    )
    _assert_held(kube_api, namespace, "second")

    _finish(kube_api, pod_driver, namespace, "first", first_pods)
    second_pods = _admitted_and_running(kube_api, namespace, "second")
    _finish(kube_api, pod_driver, namespace, "second", second_pods)
    # Kueue marks the Workload Finished once it sees the TrainJob Complete: a moment later under load.
    eventually(lambda: _workload_true(kube_api, namespace, "second", "Finished"), "second Finished")
    # One Workload per TrainJob: Kueue left the JobSets and Jobs made of them to it (their controller owner).
    assert sorted(_owners(w) for w in _workloads(kube_api, namespace)) == [
        [("TrainJob", "first")],
        [("TrainJob", "second")],
    ]


def test_kueue_preempts_a_running_trainjob_and_the_operator_suspends_its_jobset_until_readmitted(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator, pod_driver: PodDriver, queue: str
) -> None:
    start_operator()
    _create(kube_api, namespace, "low", queue, priority="low")
    for pod in _admitted_and_running(kube_api, namespace, "low", held=False):
        pod_driver.run(pod)
    eventually(
        lambda: any(
            (j.get("active") or 0) > 0
            for j in (_trainjob(kube_api, namespace, "low").get("status") or {}).get("jobsStatus") or []
        ),
        "the low TrainJob's jobsStatus active (what Kueue reads as running)",
    )

    _create(kube_api, namespace, "high", queue, priority="high")
    preempted = eventually(
        lambda: _workload_condition(kube_api, namespace, "low", "Preempted"), "low preempted"
    )
    assert (preempted["status"], preempted["reason"]) == ("True", "InClusterQueue")
    high_pods = _admitted_and_running(kube_api, namespace, "high")
    # Kueue admits the high one only once the low one's jobs stopped (no active pods: jobsStatus).
    eventually(lambda: not _pods(kube_api, namespace, "low"), "the low TrainJob's pods gone")
    _assert_held(kube_api, namespace, "low")
    [patch] = _trainjob(kube_api, namespace, "low")["spec"]["runtimePatches"]
    assert "replicatedJobs" not in patch["trainingRuntimeSpec"]["template"].get("spec", {})

    _finish(kube_api, pod_driver, namespace, "high", high_pods)
    low_pods = _admitted_and_running(kube_api, namespace, "low")
    _finish(kube_api, pod_driver, namespace, "low", low_pods)


def test_a_queued_trainjob_for_multikueue_is_left_alone_even_once_kueue_admits_it(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator, queue: str
) -> None:
    operator = start_operator()
    _create(kube_api, namespace, "remote", queue, managedBy="kueue.x-k8s.io/multikueue")
    eventually(lambda: _admitted(kube_api, namespace, "remote"), "remote admitted by Kueue")
    eventually(
        lambda: _trainjob(kube_api, namespace, "remote")["spec"]["suspend"] is False,
        "remote unsuspended by Kueue",
    )
    _create(kube_api, namespace, "local", None)
    eventually(lambda: _jobset(kube_api, namespace, "local"), "the other TrainJob's JobSet")

    assert _jobset(kube_api, namespace, "remote") is None
    assert _trainjob(kube_api, namespace, "remote").get("status") in (None, {})
    configmaps = kube_api.get(f"/api/v1/namespaces/{namespace}/configmaps")["items"]
    assert not any(c["metadata"]["name"].startswith("remote-") for c in configmaps)
    assert operator.process.poll() is None
