"""Fake nodes offer the scheduler cpu, memory, pods and nvidia.com/gpu, and start Ready."""

from __future__ import annotations

from kubetrain.envtest.nodes import FAKE_NODE_LABEL, GPU_RESOURCE, NodeShape, fake_node, is_schedulable


def test_fake_node_capacity_and_allocatable_include_gpus() -> None:
    node = fake_node("n0", 0, NodeShape(cpu="4", memory="16Gi", pods=50, gpus=2), "v1.34.4")
    expected = {"cpu": "4", "memory": "16Gi", "pods": "50", GPU_RESOURCE: "2"}
    assert node["status"]["capacity"] == expected
    assert node["status"]["allocatable"] == expected


def test_a_node_shape_without_gpus_advertises_no_gpu_resource() -> None:
    assert GPU_RESOURCE not in NodeShape(gpus=0).capacity()


def test_fake_node_is_ready_and_labelled_as_an_envtest_node() -> None:
    node = fake_node("n0", 0, NodeShape(), "v1.34.4")
    assert node["metadata"]["labels"][FAKE_NODE_LABEL] == "true"
    assert is_schedulable(node)


def test_a_node_with_the_not_ready_taint_is_not_schedulable_yet() -> None:
    node = fake_node("n0", 0, NodeShape(), "v1.34.4")
    node["spec"]["taints"] = [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    assert not is_schedulable(node)
