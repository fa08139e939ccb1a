"""What the Trainer v2 CRDs admit: Trainer's own manifests pass, each of v2.3.0's rules refuses what it
refuses, with upstream's message."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest

from crd_checks import cel_violations, structural_violations
from kubetrain.api.trainer_crd import trainer_crds
from kubetrain.frameworks.trainer.builtin import builtin_runtime_documents

CRDS = {crd["spec"]["names"]["kind"]: crd for crd in trainer_crds()}


def _schema(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _problems(kind: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    validator = jsonschema.Draft7Validator(_schema(kind))
    found = [error.message for error in validator.iter_errors(obj)]
    return found or cel_violations(_schema(kind), obj, old)


TRAINJOB: dict[str, Any] = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "mnist", "namespace": "team"},
    "spec": {
        "runtimeRef": {"name": "torch-distributed"},
        "initializer": {
            "dataset": {"storageUri": "hf://tatsu-lab/alpaca", "env": [{"name": "A", "value": "1"}]}
        },
        "trainer": {
            "image": "example.com/train:1",
            "command": ["torchrun", "train.py"],
            "numNodes": 2,
            "numProcPerNode": 1,
            "resourcesPerNode": {"limits": {"cpu": "2", "nvidia.com/gpu": 1}},
            "env": [{"name": "LR", "value": "0.1"}],
        },
        "runtimePatches": [{"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {"template": {}}}],
        "suspend": False,
        "activeDeadlineSeconds": 3600,
        "managedBy": "trainer.kubeflow.org/trainjob-controller",
    },
}


def _changed(path: str, value: Any) -> dict[str, Any]:
    obj = copy.deepcopy(TRAINJOB)
    node = obj
    *parents, last = path.split(".")
    for step in parents:
        node = node[step]
    node[last] = value
    return obj


def test_every_trainer_crd_is_structural() -> None:
    for kind in CRDS:
        assert structural_violations(_schema(kind)) == [], kind


def test_the_trainjob_crd_is_namespaced_with_status_and_the_runtimes_are_not() -> None:
    assert CRDS["TrainJob"]["spec"]["scope"] == "Namespaced"
    assert CRDS["TrainJob"]["spec"]["versions"][0]["subresources"] == {"status": {}}
    assert CRDS["ClusterTrainingRuntime"]["spec"]["scope"] == "Cluster"
    assert CRDS["TrainingRuntime"]["spec"]["scope"] == "Namespaced"


def test_a_full_trainjob_is_admitted() -> None:
    assert _problems("TrainJob", TRAINJOB) == []


def test_every_builtin_runtime_is_admitted() -> None:
    for document in builtin_runtime_documents():
        assert _problems("ClusterTrainingRuntime", document) == [], document["metadata"]["name"]


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("metadata.name", "Mnist", "metadata.name must match RFC 1035 DNS label format"),
        ("metadata.name", "a" * 64, "metadata.name must be no more than 63 characters"),
        (
            "spec.managedBy",
            "example.com/other",
            "ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set",
        ),
        (
            "spec.initializer",
            {"dataset": {"storageUri": "not a uri"}},
            "storageUri may be empty, or it must be a valid URI (scheme://...)",
        ),
    ],
)
def test_a_broken_trainjob_is_refused_with_upstreams_message(path: str, value: Any, message: str) -> None:
    assert any(message in problem for problem in _problems("TrainJob", _changed(path, value)))


def test_an_active_deadline_below_one_second_is_refused() -> None:
    assert _problems("TrainJob", _changed("spec.activeDeadlineSeconds", 0))


def test_the_runtime_ref_and_trainer_are_immutable() -> None:
    for path, value in (("spec.runtimeRef", {"name": "other"}), ("spec.trainer", {"numNodes": 9})):
        problems = _problems("TrainJob", _changed(path, value), old=TRAINJOB)
        assert "field is immutable" in " ".join(problems), path


def test_a_runtime_with_two_ml_policies_is_refused() -> None:
    runtime = copy.deepcopy(builtin_runtime_documents()[0])
    runtime["spec"]["mlPolicy"] = {"torch": {}, "jax": {}}
    assert "Only one of the policy can be configured" in " ".join(
        _problems("ClusterTrainingRuntime", runtime)
    )


def test_the_crds_default_what_trainer_defaults() -> None:
    spec = _schema("TrainJob")["properties"]["spec"]["properties"]
    assert spec["runtimeRef"]["properties"]["apiGroup"]["default"] == "trainer.kubeflow.org"
    assert spec["runtimeRef"]["properties"]["kind"]["default"] == "ClusterTrainingRuntime"
    assert spec["suspend"]["default"] is False
    assert spec["managedBy"]["default"] == "trainer.kubeflow.org/trainjob-controller"
    mpi = _schema("ClusterTrainingRuntime")["properties"]["spec"]["properties"]["mlPolicy"]["properties"][
        "mpi"
    ]
    defaults = {name: field.get("default") for name, field in mpi["properties"].items()}
    assert defaults == {
        "numProcPerNode": 1,
        "mpiImplementation": "OpenMPI",
        "sshAuthMountPath": "/root/.ssh",
        "runLauncherAsNode": False,
    }
