"""Replica plans: names, labels, env injection and restart policy of each replica (§1.1, §2, §3)."""

from __future__ import annotations

from typing import Any, ClassVar

from kubetrain.api.common import RestartPolicy
from kubetrain.engine.planning import desired_replicas, plan_replica, replica_type_selector
from kubetrain.engine.types import ReplicaPlan
from kubetrain.frameworks.addressing import ClusterAddressing, LocalAddressing
from kubetrain.frameworks.base import EnvTarget

from .fakes import ToyFramework, ToyJob, toy_job
from .support import KUBE, LOCAL

CLUSTER = ClusterAddressing()


class DefaultContainerOnly(ToyFramework):
    env_target: ClassVar[EnvTarget] = EnvTarget.DEFAULT_CONTAINER


class FirstContainerOnly(ToyFramework):
    env_target: ClassVar[EnvTarget] = EnvTarget.FIRST_CONTAINER


class MasterOnlyLocally(ToyFramework):
    def materialised_replica_types(self, job: ToyJob, colocated: bool) -> tuple[str, ...]:
        return ("Master",) if colocated else super().materialised_replica_types(job, colocated)


TWO_CONTAINERS: dict[str, Any] = {
    "metadata": {"labels": {"team": "ml", "training.kubeflow.org/job-name": "spoofed"}},
    "spec": {
        "containers": [
            {"name": "sidecar", "image": "s"},
            {"name": "toy", "image": "t", "env": [{"name": "USER_SET", "value": "1"}]},
        ]
    },
}


def _plan(
    job: ToyJob | None = None,
    replica_type: str = "Worker",
    index: int = 1,
    framework: ToyFramework | None = None,
) -> ReplicaPlan:
    return plan_replica(
        job or toy_job(name="mnist", template=TWO_CONTAINERS),
        replica_type,
        index,
        CLUSTER,
        framework=framework or ToyFramework(),
    )


def _env_names(plan: ReplicaPlan, container: int) -> list[str]:
    return [e["name"] for e in plan.template["spec"]["containers"][container].get("env", [])]


def test_replica_name_is_job_type_lowercase_index() -> None:
    assert _plan().name == "mnist-worker-1"


def test_labels_are_template_labels_then_kubetrain_labels_overriding() -> None:
    assert _plan().labels == {
        "team": "ml",
        "training.kubeflow.org/operator-name": "toyjob-controller",
        "training.kubeflow.org/job-name": "mnist",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "1",
    }


def test_master_role_replicas_get_the_job_role_label() -> None:
    assert _plan(replica_type="Master", index=0).labels["training.kubeflow.org/job-role"] == "master"


def test_labels_are_written_into_the_template_metadata() -> None:
    plan = _plan()
    assert plan.template["metadata"]["labels"] == plan.labels


def test_env_is_appended_after_the_users_env() -> None:
    assert _env_names(_plan(), 1) == ["USER_SET", "TOY_MASTER", "TOY_RANK"]


def test_env_goes_to_every_container_when_the_framework_targets_all() -> None:
    assert _env_names(_plan(), 0) == ["TOY_MASTER", "TOY_RANK"]


def test_env_goes_only_to_the_default_container_when_the_framework_says_so() -> None:
    plan = _plan(framework=DefaultContainerOnly())
    assert _env_names(plan, 0) == []
    assert _env_names(plan, 1) == ["USER_SET", "TOY_MASTER", "TOY_RANK"]


def test_env_goes_only_to_the_first_container_when_the_framework_says_so() -> None:
    plan = _plan(framework=FirstContainerOnly())
    assert _env_names(plan, 0) == ["TOY_MASTER", "TOY_RANK"]
    assert _env_names(plan, 1) == ["USER_SET"]


def test_env_values_come_from_the_addressing() -> None:
    job = toy_job(name="mnist")
    local = plan_replica(job, "Worker", 0, LocalAddressing(ports={}), framework=ToyFramework())
    cluster = plan_replica(job, "Worker", 0, CLUSTER, framework=ToyFramework())
    assert local.template["spec"]["containers"][0]["env"][0]["value"] == "127.0.0.1"
    assert cluster.template["spec"]["containers"][0]["env"][0]["value"] == "mnist-master-0"


def test_the_jobs_template_is_not_modified() -> None:
    job = toy_job(name="mnist", template=TWO_CONTAINERS)
    before = job.model_copy(deep=True)
    _plan(job)
    assert job == before


def test_pod_restart_policy_is_the_replica_policy() -> None:
    job = toy_job(policy=RestartPolicy.ON_FAILURE)
    plan = _plan(job)
    assert plan.template["spec"]["restartPolicy"] == "OnFailure"
    assert plan.restart_policy is RestartPolicy.ON_FAILURE


def test_exit_code_policy_writes_never_into_the_pod() -> None:
    plan = _plan(toy_job(policy=RestartPolicy.EXIT_CODE))
    assert plan.template["spec"]["restartPolicy"] == "Never"
    assert plan.restart_policy is RestartPolicy.EXIT_CODE


def test_a_template_restart_policy_is_overwritten_and_flagged() -> None:
    template = {"spec": {"restartPolicy": "Always", "containers": [{"name": "toy"}]}}
    plan = _plan(toy_job(policy=RestartPolicy.NEVER, template=template))
    assert plan.template["spec"]["restartPolicy"] == "Never"
    assert plan.template_restart_policy_overridden


def test_no_template_restart_policy_is_not_flagged() -> None:
    assert not _plan().template_restart_policy_overridden


def test_main_container_is_the_default_named_one() -> None:
    assert _plan().main_container == "toy"


def test_main_container_falls_back_to_the_first_container() -> None:
    template = {"spec": {"containers": [{"name": "trainer"}, {"name": "sidecar"}]}}
    assert _plan(toy_job(template=template)).main_container == "trainer"


def test_desired_replicas_lists_every_index_in_replica_type_order() -> None:
    job = toy_job(masters=1, workers=2)
    assert desired_replicas(job, KUBE, ToyFramework()) == [("Master", 0), ("Worker", 0), ("Worker", 1)]


def test_desired_replicas_lists_only_materialised_types() -> None:
    job = toy_job(masters=1, workers=2)
    assert desired_replicas(job, LOCAL, MasterOnlyLocally()) == [("Master", 0)]


def test_selector_has_the_three_labels_sorted_by_key() -> None:
    selector = replica_type_selector(toy_job(name="mnist"), "Worker", ToyFramework())
    assert selector == (
        "training.kubeflow.org/job-name=mnist,"
        "training.kubeflow.org/operator-name=toyjob-controller,"
        "training.kubeflow.org/replica-type=worker"
    )


def test_a_template_with_null_metadata_still_gets_its_labels() -> None:
    template = {"metadata": None, "spec": {"containers": [{"name": "toy"}]}}
    plan = _plan(toy_job(template=template))
    assert plan.template["metadata"]["labels"] == plan.labels
