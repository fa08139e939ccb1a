"""Jobs built from a Python function, as upstream's create_job(train_func=...) builds them."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from kubetrain.api.jobs import PyTorchJob, TFJob, TrainingJob
from kubetrain.sdk.functions import (
    FunctionJobRequest,
    build_job,
    env_list,
    function_command,
    resource_requirements,
)
from kubetrain.sdk.kinds import resolve_kind


def train(parameters: dict[str, float]) -> None:
    print("lr", parameters["lr"], "$HOME stays literal")


def _request(kind: str = "PyTorchJob", **overrides: Any) -> FunctionJobRequest:
    fields: dict[str, Any] = {"name": "fn", "namespace": "team", "kind": resolve_kind(kind)}
    fields["train_func"] = train
    return FunctionJobRequest(**{**fields, **overrides})


def _container(job: TrainingJob, replica_type: str) -> dict[str, Any]:
    container: dict[str, Any] = job.replica_specs[replica_type].template["spec"]["containers"][0]
    return container


def test_one_worker_is_a_lone_master_run_with_python() -> None:
    job = build_job(_request(num_workers=1))
    assert isinstance(job, PyTorchJob)
    assert list(job.replica_specs) == ["Master"]
    assert 'python -u "$program_path/ephemeral_script.py"' in _container(job, "Master")["args"][0]


def test_n_workers_are_a_master_and_n_minus_one_workers_run_with_torchrun() -> None:
    job = build_job(_request(num_workers=3))
    assert job.replica_specs["Master"].replicas == 1
    assert job.replica_specs["Worker"].replicas == 2
    script = _container(job, "Worker")["args"][0]
    assert script.rstrip().endswith('torchrun "$program_path/ephemeral_script.py"')


def test_procs_per_worker_set_nproc_per_node_and_use_torchrun() -> None:
    job = build_job(_request(num_workers=1, num_procs_per_worker=4))
    assert isinstance(job, PyTorchJob)
    assert job.spec.nproc_per_node == "4"
    assert "torchrun" in _container(job, "Master")["args"][0]


def test_tfjob_workers_chief_and_ps_replicas_are_as_asked() -> None:
    job = build_job(_request("TFJob", num_workers=2, num_chief_replicas=1, num_ps_replicas=1))
    assert isinstance(job, TFJob)
    assert {t: s.replicas for t, s in job.replica_specs.items()} == {"Chief": 1, "PS": 1, "Worker": 2}
    assert "python -u" in _container(job, "Worker")["args"][0]


def test_the_container_is_the_kinds_default_container_with_upstreams_base_image() -> None:
    container = _container(build_job(_request()), "Master")
    assert container["name"] == "pytorch"
    assert container["image"] == "docker.io/pytorch/pytorch:2.1.2-cuda11.8-cudnn8-runtime"
    assert container["command"] == ["bash", "-c"]


def test_the_pod_template_opts_out_of_the_istio_sidecar() -> None:
    job = build_job(_request())
    annotations = job.replica_specs["Master"].template["metadata"]["annotations"]
    assert annotations == {"sidecar.istio.io/inject": "false"}


def test_the_script_runs_the_function_with_its_parameters_and_keeps_dollar_signs() -> None:
    command, args = function_command(train, {"lr": 0.5}, "python3 -u")
    result = subprocess.run([*command, *args], capture_output=True, text=True, check=True)
    assert result.stdout == "lr 0.5 $HOME stays literal\n"


def test_packages_are_installed_first_from_the_given_index() -> None:
    _, args = function_command(train, None, "python -u", ["numpy", "pandas"], "https://example.com/simple")
    install = args[0].index("--index-url https://example.com/simple numpy pandas")
    assert install < args[0].index("ephemeral_script.py")


def test_resources_are_requests_and_limits_and_gpu_means_nvidia() -> None:
    assert resource_requirements({"cpu": 2, "gpu": 1}) == {
        "requests": {"cpu": "2", "nvidia.com/gpu": "1"},
        "limits": {"cpu": "2", "nvidia.com/gpu": "1"},
    }


def test_env_vars_may_be_a_dict_or_a_list() -> None:
    assert env_list({"A": "1"}) == [{"name": "A", "value": "1"}]
    assert env_list([{"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}])[0]["name"] == "B"


def test_an_env_list_item_without_a_name_is_rejected_with_its_position() -> None:
    with pytest.raises(ValueError, match=r"env_vars\[0\]"):
        env_list([{"value": "1"}])


def test_only_pytorch_and_tf_jobs_can_be_built_from_a_function() -> None:
    with pytest.raises(ValueError, match="XGBoostJob can't be created using function or image"):
        build_job(_request("XGBoostJob"))


def test_a_zero_worker_count_is_rejected() -> None:
    with pytest.raises(ValueError, match="num_workers must be at least 1"):
        build_job(_request(num_workers=0))


def test_a_lambda_without_source_file_is_a_clear_value_error() -> None:
    with pytest.raises(ValueError, match="must be callable"):
        build_job(_request(train_func="not a function"))
