"""A replica's plan becomes a process as the kubelet would start the container."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubetrain.api.common import RestartPolicy
from kubetrain.api.errors import InvalidJobError
from kubetrain.api.jobs import PyTorchJob
from kubetrain.api.manifest import parse_job
from kubetrain.engine.types import ReplicaPlan
from kubetrain.local.launch import launch_spec
from kubetrain.local.process import InPlaceRestart, LaunchSpec

JOB = parse_job(
    {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "ddp", "namespace": "team"},
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 1, "template": {}}}},
    }
)


def plan(container: dict[str, Any], restart_policy: str = "OnFailure") -> ReplicaPlan:
    assert isinstance(JOB, PyTorchJob)
    return ReplicaPlan(
        name="ddp-worker-0",
        replica_type="Worker",
        index=0,
        labels={"training.kubeflow.org/replica-index": "0"},
        restart_policy=RestartPolicy(restart_policy),
        main_container="pytorch",
        template={"spec": {"restartPolicy": restart_policy, "containers": [container]}},
    )


def spec_for(
    container: dict[str, Any], restart_policy: str = "OnFailure", base: dict[str, str] | None = None
) -> LaunchSpec:
    return launch_spec(
        plan({"name": "pytorch", **container}, restart_policy),
        JOB,
        cwd=Path("/work"),
        base_env=base if base is not None else {"PATH": "/usr/bin", "HOME": "/root"},
        extra_env={},
    )


def test_argv_is_command_then_args() -> None:
    spec = spec_for({"command": ["python", "train.py"], "args": ["--epochs", "2"]})
    assert spec.argv == ("python", "train.py", "--epochs", "2")


def test_references_in_args_expand_from_the_container_env() -> None:
    spec = spec_for(
        {
            "command": ["echo"],
            "args": ["$(MASTER_ADDR):$(MASTER_PORT)", "$(HOME)"],
            "env": [{"name": "MASTER_ADDR", "value": "127.0.0.1"}, {"name": "MASTER_PORT", "value": "1234"}],
        }
    )
    # HOME is the runner's, not the container's: Kubernetes leaves such references as written.
    assert spec.argv[1:] == ("127.0.0.1:1234", "$(HOME)")


def test_an_env_value_may_refer_to_an_earlier_variable() -> None:
    spec = spec_for(
        {
            "command": ["true"],
            "env": [
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "PADDLE_MASTER", "value": "$(POD_IP):36543"},
            ],
        }
    )
    assert spec.env["PADDLE_MASTER"] == "127.0.0.1:36543"


def test_the_downward_api_names_the_replica_and_its_namespace() -> None:
    spec = spec_for(
        {
            "command": ["true"],
            "env": [
                {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {
                    "name": "INDEX",
                    "valueFrom": {
                        "fieldRef": {"fieldPath": "metadata.labels['training.kubeflow.org/replica-index']"}
                    },
                },
            ],
        }
    )
    assert (spec.env["NAME"], spec.env["NS"], spec.env["INDEX"]) == ("ddp-worker-0", "team", "0")


def test_a_secret_reference_is_an_error_naming_the_field() -> None:
    container = {
        "command": ["true"],
        "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
    }
    with pytest.raises(
        InvalidJobError, match=r"pytorchReplicaSpecs\.Worker\.template\.spec\.containers\[0\]\.env\[0\]"
    ):
        spec_for(container)


def test_a_container_without_a_command_is_an_error_naming_the_field() -> None:
    with pytest.raises(InvalidJobError, match=r"containers\[0\]\.command: required to run locally"):
        spec_for({"image": "pytorch/pytorch"})


def test_omp_num_threads_defaults_to_one() -> None:
    assert spec_for({"command": ["true"]}).env["OMP_NUM_THREADS"] == "1"


def test_omp_num_threads_from_the_template_is_kept() -> None:
    spec = spec_for({"command": ["true"], "env": [{"name": "OMP_NUM_THREADS", "value": "4"}]})
    assert spec.env["OMP_NUM_THREADS"] == "4"


def test_the_container_env_overrides_the_inherited_env() -> None:
    spec = spec_for({"command": ["true"], "env": [{"name": "HOME", "value": "/tmp"}]})
    assert spec.env["HOME"] == "/tmp"


def test_the_interpreters_bin_directory_comes_first_on_path() -> None:
    import sys

    path = spec_for({"command": ["true"]}).env["PATH"].split(":")
    assert path[0] == str(Path(sys.executable).parent)
    assert "/usr/bin" in path


def test_pod_restart_policy_drives_in_place_restarts() -> None:
    assert spec_for({"command": ["true"]}, "OnFailure").restart is InPlaceRestart.ON_FAILURE
    assert spec_for({"command": ["true"]}, "Never").restart is InPlaceRestart.NEVER
