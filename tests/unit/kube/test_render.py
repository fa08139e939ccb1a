"""Pods, Services and PodGroups rendered for a job as upstream's operator writes them (§3, §4.9)."""

from __future__ import annotations

from typing import Any

from builders import container, job
from kubetrain.engine.admission import admit
from kubetrain.engine.planning import plan_replica
from kubetrain.frameworks.addressing import ClusterAddressing
from kubetrain.frameworks.registry import framework_for
from kubetrain.kube.render import RenderSettings, min_resources, render_pod, render_pod_group, render_service

ADDRESSING = ClusterAddressing()


def _pytorch(**options: Any) -> Any:
    return admit(job("PyTorchJob", {"Master": 1, "Worker": 2}, **options))


def _pod(settings: RenderSettings, **options: Any) -> dict[str, Any]:
    pytorch = _pytorch(**options)
    plan = plan_replica(pytorch, "Worker", 0, ADDRESSING)
    return render_pod(pytorch, plan, framework_for(pytorch), ADDRESSING, settings).manifest


def test_pod_is_owned_by_the_job_as_its_controller() -> None:
    pod = _pod(RenderSettings())
    assert pod["metadata"]["name"] == "test-job-worker-0"
    assert pod["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": "test-job",
            "uid": "",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def test_pytorch_workers_get_the_wait_for_master_init_container() -> None:
    pod = _pod(RenderSettings())
    assert [c["name"] for c in pod["spec"]["initContainers"]] == ["init-pytorch"]


def test_volcano_sets_scheduler_name_and_group_annotations() -> None:
    pod = _pod(RenderSettings(gang_scheduler="volcano"))
    assert pod["spec"]["schedulerName"] == "volcano"
    assert pod["metadata"]["annotations"] == {
        "scheduling.k8s.io/group-name": "test-job",
        "volcano.sh/task-spec": "worker",
    }


def test_scheduler_plugins_labels_the_pod_with_its_pod_group() -> None:
    pod = _pod(RenderSettings(gang_scheduler="scheduler-plugins-scheduler"))
    assert pod["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
    assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "test-job"


def test_a_user_chosen_scheduler_is_kept_under_gang_scheduling() -> None:
    pytorch = admit(job("PyTorchJob", {"Master": 1}, containers=[container("pytorch")]).model_copy(deep=True))
    pytorch.replica_specs["Master"].template["spec"]["schedulerName"] = "my-scheduler"
    plan = plan_replica(pytorch, "Master", 0, ADDRESSING)
    rendered = render_pod(pytorch, plan, framework_for(pytorch), ADDRESSING, RenderSettings("volcano"))
    assert rendered.manifest["spec"]["schedulerName"] == "my-scheduler"
    assert rendered.user_scheduler_kept is False


def test_service_is_headless_selects_its_pod_and_exposes_the_default_containers_ports() -> None:
    pytorch = _pytorch()
    service = render_service(pytorch, "Master", 0, framework_for(pytorch))
    assert service["spec"] == {
        "clusterIP": "None",
        "selector": {
            "training.kubeflow.org/operator-name": "pytorchjob-controller",
            "training.kubeflow.org/job-name": "test-job",
            "training.kubeflow.org/replica-type": "master",
            "training.kubeflow.org/replica-index": "0",
        },
        "ports": [{"name": "pytorchjob-port", "port": 23456}],
    }


def test_min_resources_sums_requests_falling_back_to_limits_up_to_min_member() -> None:
    pytorch = admit(
        job(
            "PyTorchJob",
            {"Master": 1, "Worker": 3},
            containers=[container("pytorch", resources={"limits": {"cpu": "500m", "nvidia.com/gpu": 1}})],
        )
    )
    assert min_resources(pytorch, 3) == {"cpu": "1500m", "nvidia.com/gpu": "3"}


def test_volcano_pod_group_defaults_queue_and_carries_min_member() -> None:
    group = render_pod_group(_pytorch(), 3, RenderSettings("volcano"))
    assert group["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert group["spec"]["minMember"] == 3
    assert group["spec"]["queue"] == "default"


def test_scheduler_plugins_pod_group_uses_the_x_k8s_api() -> None:
    group = render_pod_group(_pytorch(), 3, RenderSettings("scheduler-plugins-scheduler"))
    assert group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert "queue" not in group["spec"]
