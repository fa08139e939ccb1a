"""Reading manifests: lenient for server objects, strict (named field errors) for user input."""

from __future__ import annotations

from typing import Any

import pytest

from builders import manifest
from kubetrain.api.errors import InvalidJobError
from kubetrain.api.jobs import PyTorchJob
from kubetrain.api.manifest import MAX_NESTING, load_documents, parse_job


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


def test_a_key_written_twice_in_a_yaml_mapping_is_refused_with_its_line() -> None:
    with pytest.raises(InvalidJobError, match=r"(?s)duplicate key 'replicas'.*line 3"):
        load_documents("spec:\n  replicas: 1\n  replicas: 2\n")


def test_yaml_merge_keys_may_be_overridden_beside_them() -> None:
    assert load_documents("a: &x {b: 1}\nc: {<<: *x, b: 2}\n") == [{"a": {"b": 1}, "c": {"b": 2}}]


def test_a_number_too_long_for_python_is_invalid_yaml_not_a_crash() -> None:
    with pytest.raises(InvalidJobError, match="not valid YAML"):
        load_documents("replicas: 1" + "0" * 5000 + "\n")


def test_yaml_nested_past_the_parsers_stack_is_invalid_yaml_not_a_crash() -> None:
    with pytest.raises(InvalidJobError, match="not valid YAML"):
        load_documents("a: " + "[" * 100_000 + "]" * 100_000 + "\n")


def test_a_manifest_nested_too_deeply_names_where() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(MAX_NESTING + 5):
        node["x"] = {}
        node = node["x"]
    with pytest.raises(InvalidJobError) as raised:
        parse_job({**manifest("PyTorchJob", {"Worker": 1}), "extra": deep})
    [error] = raised.value.errors
    assert error.path.startswith("extra.x.x") and "nested more than" in error.message


def test_a_yaml_alias_bomb_is_refused_without_expanding_it() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    [document] = load_documents("\n".join(lines) + "\n")
    with pytest.raises(InvalidJobError, match="more than"):
        parse_job({**manifest("PyTorchJob", {"Worker": 1}), "bomb": document})


def test_an_int_or_string_field_reports_one_error_at_its_own_path() -> None:
    bad = manifest(
        "PyTorchJob", {"Worker": 1}, spec={"runPolicy": {"schedulingPolicy": {"minResources": {"cpu": [1]}}}}
    )
    with pytest.raises(InvalidJobError) as raised:
        parse_job(bad)
    assert [e.path for e in raised.value.errors] == ["spec.runPolicy.schedulingPolicy.minResources.cpu"]
