"""Pod-template fields kubetrain reads or writes are typed; errors carry the full wire path."""

from __future__ import annotations

from typing import Any

import pytest

from builders import container, job
from kubetrain.api.errors import InvalidJobError
from kubetrain.api.podtemplate import checked_pod_template_schema
from kubetrain.api.structural import MAX_ERRORS, schema_errors
from kubetrain.engine.admission import admit

WORKER = "spec.pytorchReplicaSpecs.Worker.template"


def _errors(template: dict[str, Any]) -> list[str]:
    return [str(e) for e in schema_errors(template, checked_pod_template_schema(), "template")]


def _pod(**container_fields: Any) -> dict[str, Any]:
    return {"spec": {"containers": [container("pytorch", **container_fields)]}}


def test_an_env_entry_that_is_not_an_object_is_named_with_its_index() -> None:
    assert _errors(_pod(env=[-1])) == [
        "template.spec.containers[0].env[0]: Invalid value: -1: must be an object {name, value, valueFrom}"
    ]


def test_ports_that_are_not_a_list_are_named() -> None:
    assert _errors(_pod(ports="oops")) == [
        'template.spec.containers[0].ports: Invalid value: "oops": must be a list of objects '
        "{containerPort, name, protocol, hostPort}"
    ]


@pytest.mark.parametrize("port", [0, 65536, -1])
def test_a_container_port_must_be_between_1_and_65535(port: int) -> None:
    [error] = _errors(_pod(ports=[{"containerPort": port}]))
    assert error.startswith(
        f"template.spec.containers[0].ports[0].containerPort: Invalid value: {port}: must be"
    )


def test_an_env_entry_needs_a_name() -> None:
    assert _errors(_pod(env=[{"value": "1"}])) == [
        "template.spec.containers[0].env[0].name: Required value: must be specified"
    ]


def test_an_env_value_must_be_a_string_as_kubernetes_requires() -> None:
    assert _errors(_pod(env=[{"name": "N", "value": 1}])) == [
        "template.spec.containers[0].env[0].value: Invalid value: 1: must be a string"
    ]


def test_command_and_args_are_lists_of_strings() -> None:
    assert _errors(_pod(command="python train.py", args=[1])) == [
        'template.spec.containers[0].command: Invalid value: "python train.py": must be a list of strings',
        "template.spec.containers[0].args[0]: Invalid value: 1: must be a string",
    ]


def test_a_resource_quantity_must_be_a_kubernetes_quantity() -> None:
    [error] = _errors(_pod(resources={"limits": {"cpu": "lots"}}))
    assert error.startswith('template.spec.containers[0].resources.limits[cpu]: Invalid value: "lots"')


def test_a_quantity_with_a_huge_exponent_is_refused_before_any_arithmetic_on_it() -> None:
    assert _errors(_pod(resources={"requests": {"cpu": "1e999999999"}}))


def test_labels_must_map_strings_to_strings() -> None:
    assert _errors({"metadata": {"labels": {"team": 1}}}) == [
        "template.metadata.labels[team]: Invalid value: 1: must be a string"
    ]


def test_a_restart_policy_in_the_template_is_one_kubernetes_knows() -> None:
    [error] = _errors({"spec": {"restartPolicy": "Sometimes"}})
    assert error.startswith('template.spec.restartPolicy: Unsupported value: "Sometimes"')


def test_fields_kubetrain_never_reads_are_left_to_the_api_server() -> None:
    assert (
        _errors({"spec": {"securityContext": "anything", "containers": [{"name": "a", "stdin": [1]}]}}) == []
    )


def test_a_hostile_template_reports_a_bounded_number_of_errors() -> None:
    assert len(_errors(_pod(env=[-1] * 100_000))) == MAX_ERRORS


def test_a_huge_number_is_described_not_printed() -> None:
    [error] = _errors(_pod(workingDir=10**5000))
    assert "a number of more than 40 digits" in error


def test_admission_names_the_template_field_before_defaulting_reads_it() -> None:
    bad = job("PyTorchJob", {"Master": 1, "Worker": 1}, containers=[container("pytorch", ports="oops")])
    with pytest.raises(InvalidJobError) as raised:
        admit(bad)
    assert f"{WORKER}.spec.containers[0].ports" in [e.path for e in raised.value.errors]
