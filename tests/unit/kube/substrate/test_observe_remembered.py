"""A big job's pods' observations kept between its reconciles (ChildObservations): the same answers as
observing afresh, and only the pods that changed observed again."""

from __future__ import annotations

from typing import Any

import pytest

from builders import job
from kubetrain.engine.types import Phase
from kubetrain.frameworks.registry import framework_for
from kubetrain.kube import observe as observing
from kubetrain.kube.observe import ChildObservations, observe
from kubetrain.kube.runtime.store import ChangeType, Store

PYTORCH = job("PyTorchJob", {"Master": 1, "Worker": 2})
FRAMEWORK = framework_for(PYTORCH)


def pod(replica_type: str, index: int, version: str, phase: str = "Running") -> dict[str, Any]:
    labels = {
        "training.kubeflow.org/replica-type": replica_type,
        "training.kubeflow.org/replica-index": str(index),
    }
    return {
        "metadata": {
            "name": f"j-{replica_type}-{index}",
            "uid": f"uid-{replica_type}-{index}",
            "resourceVersion": version,
            "labels": labels,
        },
        "spec": {"containers": [{"name": "pytorch"}]},
        "status": {"phase": phase, "containerStatuses": []},
    }


PODS = [pod("master", 0, "1"), pod("worker", 0, "1"), pod("worker", 1, "1")]


@pytest.fixture
def observed_pods(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the pods ``observe_pod`` is asked about, in order."""
    asked: list[str] = []
    original = observing.observe_pod

    def counting(pod: Any, *args: Any) -> Any:
        asked.append(pod["metadata"]["name"])
        return original(pod, *args)

    monkeypatch.setattr(observing, "observe_pod", counting)
    return asked


def test_remembered_observations_are_those_of_observing_afresh() -> None:
    remembered = ChildObservations()
    observe(PYTORCH, FRAMEWORK, PODS, None, remembered=remembered)
    assert observe(PYTORCH, FRAMEWORK, PODS, None, remembered=remembered) == observe(
        PYTORCH, FRAMEWORK, PODS, None
    )


def test_only_a_pod_at_a_new_resource_version_is_observed_again(observed_pods: list[str]) -> None:
    remembered = ChildObservations()
    observe(PYTORCH, FRAMEWORK, PODS, None, remembered=remembered)
    failed = pod("worker", 1, "2", phase="Failed")
    observed_pods.clear()

    observation = observe(PYTORCH, FRAMEWORK, [*PODS[:2], failed], None, remembered=remembered)

    assert observed_pods == ["j-worker-1"]
    assert [replica.phase for replica in observation.replicas] == [Phase.RUNNING, Phase.RUNNING, Phase.FAILED]


def test_a_change_of_the_jobs_spec_observes_every_pod_again(observed_pods: list[str]) -> None:
    remembered = ChildObservations()
    observe(PYTORCH, FRAMEWORK, PODS, None, remembered=remembered)
    edited = PYTORCH.model_copy(deep=True)
    edited.metadata.generation = (PYTORCH.metadata.generation or 0) + 1
    observed_pods.clear()

    observe(edited, FRAMEWORK, PODS, None, remembered=remembered)

    assert observed_pods == ["j-master-0", "j-worker-0", "j-worker-1"]


def test_a_deleted_pods_observation_is_not_kept(observed_pods: list[str]) -> None:
    remembered = ChildObservations()
    observe(PYTORCH, FRAMEWORK, PODS, None, remembered=remembered)
    observe(PYTORCH, FRAMEWORK, PODS[:2], None, remembered=remembered)
    observed_pods.clear()

    observe(PYTORCH, FRAMEWORK, PODS, None, remembered=remembered)

    assert observed_pods == ["j-worker-1"], (
        "observed again: its answer went with the reconcile that missed it"
    )


OWNER = PYTORCH.model_copy(deep=True)
OWNER.metadata.uid = "uid-j"


def owned(pod_: dict[str, Any]) -> dict[str, Any]:
    """The pod as the job's controller owns it (the cache indexes it by its owner)."""
    owner = {"uid": OWNER.metadata.uid, "controller": True, "kind": "PyTorchJob"}
    return {**pod_, "metadata": {**pod_["metadata"], "namespace": "ns", "ownerReferences": [owner]}}


def cached(pods: list[dict[str, Any]]) -> Store:
    store = Store()
    for pod_ in pods:
        store.apply(ChangeType.ADDED, owned(pod_))
    return store


def observed_from(store: Store, remembered: ChildObservations) -> list[Any]:
    return remembered.observe_owned_pods(store, "uid-j", OWNER, FRAMEWORK)


def test_pods_read_from_their_cache_are_observed_as_afresh() -> None:
    store = cached(PODS)
    remembered = ChildObservations()
    observed_from(store, remembered)
    store.apply(ChangeType.MODIFIED, owned(pod("worker", 1, "2", phase="Failed")))

    afresh = observe(OWNER, FRAMEWORK, store.by_owner("uid-j"), None).replicas
    assert len(afresh) == len(PODS)
    assert observed_from(store, remembered) == list(afresh)


def test_only_the_pods_their_cache_says_changed_are_observed_again(observed_pods: list[str]) -> None:
    store = cached(PODS)
    remembered = ChildObservations()
    observed_from(store, remembered)
    store.apply(ChangeType.MODIFIED, owned(pod("worker", 0, "2", phase="Failed")))
    observed_pods.clear()

    observation = observed_from(store, remembered)

    assert observed_pods == ["j-worker-0"]
    assert [replica.phase for replica in observation] == [Phase.RUNNING, Phase.FAILED, Phase.RUNNING]


def test_a_pod_joining_observes_the_pods_afresh_from_what_was_kept(observed_pods: list[str]) -> None:
    store = cached(PODS[:2])
    remembered = ChildObservations()
    observed_from(store, remembered)
    store.apply(ChangeType.ADDED, owned(PODS[2]))
    observed_pods.clear()

    observation = observed_from(store, remembered)

    assert observed_pods == ["j-worker-1"], "the others' answers are kept by their resourceVersion"
    assert [(r.replica_type, r.index) for r in observation] == [("Master", 0), ("Worker", 0), ("Worker", 1)]


def service(replica_type: str, index: int, version: str) -> dict[str, Any]:
    return {
        "metadata": {**pod(replica_type, index, version)["metadata"], "uid": f"svc-{replica_type}-{index}"}
    }


SERVICES = [service("master", 0, "1"), service("worker", 0, "1"), service("worker", 1, "1")]


@pytest.fixture
def identified(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the children ``replica_identity`` is asked about, in order."""
    asked: list[str] = []
    original = observing.replica_identity

    def counting(obj: Any, *args: Any) -> Any:
        asked.append(obj["metadata"]["name"])
        return original(obj, *args)

    monkeypatch.setattr(observing, "replica_identity", counting)
    return asked


def test_remembered_service_identities_are_those_of_reading_them_afresh() -> None:
    remembered = ChildObservations()
    observe(PYTORCH, FRAMEWORK, [], SERVICES, remembered=remembered)
    again = observe(PYTORCH, FRAMEWORK, [], SERVICES, remembered=remembered)
    assert again.services == observe(PYTORCH, FRAMEWORK, [], SERVICES).services
    assert again.services == frozenset({("Master", 0), ("Worker", 0), ("Worker", 1)})


def test_only_a_service_at_a_new_resource_version_is_read_again(identified: list[str]) -> None:
    remembered = ChildObservations()
    observe(PYTORCH, FRAMEWORK, [], SERVICES, remembered=remembered)
    relabelled = service("worker", 2, "2")
    relabelled["metadata"]["uid"] = SERVICES[2]["metadata"]["uid"]
    identified.clear()

    observation = observe(PYTORCH, FRAMEWORK, [], [*SERVICES[:2], relabelled], remembered=remembered)

    assert identified == ["j-worker-2"]
    assert observation.services == frozenset({("Master", 0), ("Worker", 0), ("Worker", 2)})


def test_a_change_of_the_jobs_spec_reads_every_service_again(identified: list[str]) -> None:
    remembered = ChildObservations()
    observe(PYTORCH, FRAMEWORK, [], SERVICES, remembered=remembered)
    edited = PYTORCH.model_copy(deep=True)
    edited.metadata.generation = (PYTORCH.metadata.generation or 0) + 1
    identified.clear()

    observe(edited, FRAMEWORK, [], SERVICES, remembered=remembered)

    assert identified == ["j-master-0", "j-worker-0", "j-worker-1"]


def test_services_at_the_version_last_read_are_not_read_again(identified: list[str]) -> None:
    remembered = ChildObservations()
    first = observe(PYTORCH, FRAMEWORK, [], SERVICES, remembered=remembered, services_version=3)
    identified.clear()

    again = observe(PYTORCH, FRAMEWORK, [], SERVICES, remembered=remembered, services_version=3)

    assert identified == []
    assert again.services == first.services


def test_services_at_another_version_are_read_again(identified: list[str]) -> None:
    remembered = ChildObservations()
    observe(PYTORCH, FRAMEWORK, [], SERVICES, remembered=remembered, services_version=3)
    identified.clear()

    observation = observe(PYTORCH, FRAMEWORK, [], SERVICES[:2], remembered=remembered, services_version=4)

    assert identified == [], "each service left was remembered by its resourceVersion"
    assert observation.services == frozenset({("Master", 0), ("Worker", 0)})
