"""Reading manifests: lenient for server objects, strict (named field errors) for user input."""

from __future__ import annotations

import pytest

from kubetrain.api.errors import InvalidJobError
from kubetrain.api.jobs import PyTorchJob
from kubetrain.api.manifest import parse_job


def _pytorchjob(**spec_extra: object) -> dict[str, object]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "mnist"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "pytorch", "image": "x"}]}},
                }
            },
            **spec_extra,
        },
    }


def test_camel_case_fields_parse_into_the_typed_model() -> None:
    job = parse_job(_pytorchjob(nprocPerNode="2"))
    assert isinstance(job, PyTorchJob)
    assert job.spec.nproc_per_node == "2"
    assert job.replica_specs["Master"].replicas == 1


def test_unknown_fields_are_tolerated_when_reading_from_a_server() -> None:
    job = parse_job(_pytorchjob(fieldFromTheFuture=True))
    assert "fieldFromTheFuture" not in job.to_wire()["spec"]


def test_unknown_fields_in_user_input_name_the_field_and_the_valid_ones() -> None:
    with pytest.raises(InvalidJobError) as raised:
        parse_job(_pytorchjob(nprocsPerNode="2"), strict=True)
    message = str(raised.value)
    assert message.startswith("spec: unknown field(s) nprocsPerNode")
    assert "nprocPerNode" in message


def test_an_unsupported_restart_policy_names_the_path_and_the_supported_values() -> None:
    manifest = _pytorchjob()
    manifest["spec"]["pytorchReplicaSpecs"]["Master"]["restartPolicy"] = "Sometimes"  # type: ignore[index]
    with pytest.raises(InvalidJobError) as raised:
        parse_job(manifest, strict=True)
    assert "spec.pytorchReplicaSpecs.Master.restartPolicy: Unsupported value 'Sometimes'" in str(raised.value)
    assert "'OnFailure'" in str(raised.value)


def test_an_unknown_kind_lists_the_supported_kinds() -> None:
    with pytest.raises(InvalidJobError, match=r"supported: .*PyTorchJob"):
        parse_job({"apiVersion": "kubeflow.org/v1", "kind": "SparkJob"})


def test_the_wire_form_round_trips() -> None:
    manifest = _pytorchjob(nprocPerNode="auto")
    wire = parse_job(manifest).to_wire()
    assert wire["spec"] == {**manifest["spec"], "runPolicy": {}}  # type: ignore[dict-item]
    assert wire["metadata"] == manifest["metadata"]
