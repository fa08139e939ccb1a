"""``nvidia.com/gpu`` limits become disjoint CUDA_VISIBLE_DEVICES, or a clear error up front."""

from __future__ import annotations

import pytest

from kubetrain.local.gpus import (
    GpuRequest,
    GpuShortageError,
    assign_gpus,
    parse_nvidia_smi_list,
    requested_gpus,
)

NVIDIA_SMI_L = """GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1b2c)
GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-3d4e)
"""


def test_the_gpu_limit_of_a_container_is_read() -> None:
    assert requested_gpus({"resources": {"limits": {"nvidia.com/gpu": 2, "cpu": "1"}}}) == 2


def test_a_container_without_a_gpu_limit_asks_for_none() -> None:
    assert requested_gpus({"resources": {"limits": {"cpu": "1"}}}) == 0


def test_a_gpu_limit_written_as_a_string_is_read() -> None:
    assert requested_gpus({"resources": {"limits": {"nvidia.com/gpu": "1"}}}) == 1


def test_nvidia_smi_list_output_gives_device_indices() -> None:
    assert parse_nvidia_smi_list(NVIDIA_SMI_L) == ["0", "1"]


def test_replicas_get_disjoint_devices_in_request_order() -> None:
    requests = [GpuRequest("worker-0", "p", 1), GpuRequest("worker-1", "p", 2)]
    assert assign_gpus(requests, ["0", "1", "2", "3"]) == {"worker-0": ["0"], "worker-1": ["1", "2"]}


def test_replicas_asking_for_no_gpu_get_no_devices() -> None:
    requests = [GpuRequest("master-0", "p", 0), GpuRequest("worker-0", "p", 1)]
    assert assign_gpus(requests, ["0"]) == {"worker-0": ["0"]}


def test_asking_for_more_gpus_than_exist_fails_naming_the_field() -> None:
    path = "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.limits"
    with pytest.raises(GpuShortageError, match=r"asks for 2 GPU\(s\).*has 1 GPU\(s\).*containers\[0\]"):
        assign_gpus([GpuRequest("worker-0", path, 2)], ["0"])


def test_asking_for_a_gpu_on_a_machine_without_one_fails() -> None:
    with pytest.raises(GpuShortageError, match="has 0 GPU"):
        assign_gpus([GpuRequest("worker-0", "p", 1)], [])
