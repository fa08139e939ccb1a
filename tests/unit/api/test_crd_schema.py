"""The generated CRDs: structural schemas, compact pod templates, subresources, names, columns."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from crd_checks import compile_rule, structural_violations, validation_rules
from kubetrain.api.crd import MAX_REPLICA_MAP_KEYS, crd_for, schema_node, structural_schema
from kubetrain.api.jobs import PyTorchJob, TrainingJob
from kubetrain.frameworks.crds import MpiApi, all_crds

EVERY_CRD = {
    f"{crd['spec']['names']['kind']}/{crd['spec']['versions'][0]['name']}": crd
    for crd in [*all_crds(MpiApi.V2BETA1), *all_crds(MpiApi.V1)]
}
JOB_CRDS = {
    f"{crd['spec']['names']['kind']}/{crd['spec']['versions'][0]['name']}": crd
    for crd in [*all_crds(MpiApi.V2BETA1, trainer=False), *all_crds(MpiApi.V1, trainer=False)]
}
"""The kubeflow.org kinds (Trainer v2's are checked in tests/unit/trainer)."""


def _schema(crd: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _crd(kind_version: str) -> dict[str, Any]:
    return EVERY_CRD[kind_version]


def _undescribed(node: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in node.items() if key != "description"}


def _nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    found = [node]
    for child in node.get("properties", {}).values():
        found += _nodes(child)
    if isinstance(node.get("additionalProperties"), dict):
        found += _nodes(node["additionalProperties"])
    if "items" in node:
        found += _nodes(node["items"])
    return found


def test_every_kind_and_both_mpijob_versions_have_a_crd() -> None:
    assert sorted(EVERY_CRD) == [
        "ClusterTrainingRuntime/v1alpha1",
        "JAXJob/v1",
        "MPIJob/v1",
        "MPIJob/v2beta1",
        "MXJob/v1",
        "PaddleJob/v1",
        "PyTorchJob/v1",
        "TFJob/v1",
        "TrainJob/v1alpha1",
        "TrainingRuntime/v1alpha1",
        "XGBoostJob/v1",
    ]


@pytest.mark.parametrize("kind_version", sorted(EVERY_CRD))
def test_every_schema_is_structural(kind_version: str) -> None:
    assert structural_violations(_schema(_crd(kind_version))) == []


@pytest.mark.parametrize("kind_version", sorted(EVERY_CRD))
def test_every_cel_rule_compiles(kind_version: str) -> None:
    rules = list(validation_rules(_schema(_crd(kind_version))))
    assert rules
    for rule in rules:
        compile_rule(rule)


def test_the_structural_checker_rejects_a_node_without_a_type() -> None:
    schema = {"type": "object", "properties": {"spec": {"properties": {"x": {"type": "string"}}}}}
    assert structural_violations(schema) == ["<root>.spec: every node needs a type, got None"]


def test_the_structural_checker_rejects_properties_next_to_additional_properties() -> None:
    schema = {
        "type": "object",
        "properties": {
            "m": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {}}
        },
    }
    assert "<root>.m: properties and additionalProperties are mutually exclusive" in structural_violations(
        schema
    )


def test_the_structural_checker_rejects_refs_and_unions() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}, "b": {"anyOf": [{"type": "string"}]}},
    }
    problems = structural_violations(schema)
    assert any("'$ref'" in problem for problem in problems)
    assert any("'anyOf'" in problem for problem in problems)


def test_pod_template_fields_kubetrain_never_reads_are_preserved_as_unknown_fields() -> None:
    template = schema_node(_schema(_crd("PyTorchJob/v1")), "spec.pytorchReplicaSpecs.*.template")
    assert template["type"] == "object"
    assert template["x-kubernetes-preserve-unknown-fields"] is True
    container = schema_node(template, "spec.containers.[]")
    assert container["x-kubernetes-preserve-unknown-fields"] is True
    assert "securityContext" not in container["properties"]


def test_pod_template_fields_kubetrain_reads_are_typed_in_the_schema() -> None:
    template = schema_node(_schema(_crd("PyTorchJob/v1")), "spec.pytorchReplicaSpecs.*.template")
    container = schema_node(template, "spec.containers.[]")
    assert schema_node(container, "env.[]")["type"] == "object"
    assert schema_node(container, "env.[]")["required"] == ["name"]
    assert schema_node(container, "ports.[].containerPort") == {
        "type": "integer",
        "minimum": 1,
        "maximum": 65535,
    }
    assert schema_node(container, "command")["items"] == {"type": "string"}
    assert schema_node(template, "metadata.labels")["additionalProperties"] == {"type": "string"}


def test_replica_counts_have_a_hard_ceiling_of_a_clusters_pods() -> None:
    replicas = schema_node(_schema(_crd("PyTorchJob/v1")), "spec.pytorchReplicaSpecs.*.replicas")
    assert replicas["maximum"] == 150_000


@pytest.mark.parametrize("kind_version", sorted(EVERY_CRD))
def test_every_crd_fits_the_last_applied_annotation_of_a_client_side_apply(kind_version: str) -> None:
    # kubectl apply stores the whole object as JSON in an annotation; all annotations share 256 KiB.
    assert len(json.dumps(_crd(kind_version), separators=(",", ":"))) < 64 * 1024


def test_elastic_metrics_are_preserved_as_unknown_fields() -> None:
    metric = schema_node(_schema(_crd("PyTorchJob/v1")), "spec.elasticPolicy.metrics.[]")
    assert metric == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def test_min_resources_quantities_are_int_or_string() -> None:
    min_resources = schema_node(_schema(_crd("TFJob/v1")), "spec.runPolicy.schedulingPolicy.minResources")
    assert _undescribed(min_resources) == {
        "type": "object",
        "additionalProperties": {"x-kubernetes-int-or-string": True},
    }


def test_optional_fields_become_their_plain_type() -> None:
    rdzv_host = schema_node(_schema(_crd("PyTorchJob/v1")), "spec.elasticPolicy.rdzvHost")
    assert _undescribed(rdzv_host) == {"type": "string"}


def test_enums_keep_type_string() -> None:
    policy = schema_node(_schema(_crd("XGBoostJob/v1")), "spec.xgbReplicaSpecs.*.restartPolicy")
    assert _undescribed(policy) == {"type": "string", "enum": ["Always", "OnFailure", "Never", "ExitCode"]}


def test_no_title_ref_or_union_survives_anywhere() -> None:
    text = json.dumps([_schema(crd) for crd in EVERY_CRD.values()])
    for keyword in ('"title"', '"$ref"', '"$defs"', '"anyOf"', '"null"'):
        assert keyword not in text


def test_pydantic_defaults_are_not_crd_defaults() -> None:
    active = schema_node(_schema(_crd("JAXJob/v1")), "status.replicaStatuses.*.active")
    assert "default" not in active


def test_run_policy_suspend_defaults_to_false() -> None:
    for crd in JOB_CRDS.values():
        assert schema_node(_schema(crd), "spec.runPolicy.suspend")["default"] is False


def test_v2beta1_mpijob_carries_the_mpi_operator_defaults() -> None:
    spec = schema_node(_schema(_crd("MPIJob/v2beta1")), "spec")["properties"]
    defaults = {name: field["default"] for name, field in spec.items() if "default" in field}
    assert defaults == {
        "slotsPerWorker": 1,
        "runLauncherAsWorker": False,
        "sshAuthMountPath": "/root/.ssh",
        "launcherCreationPolicy": "AtStartup",
        "mpiImplementation": "OpenMPI",
    }


def test_descriptions_come_from_field_docstrings_on_one_line() -> None:
    restarts = schema_node(_schema(_crd("PyTorchJob/v1")), "status.replicaStatuses.*.restarts")
    assert restarts["description"].startswith("kubetrain extension:")
    for crd in EVERY_CRD.values():
        for node in _nodes(_schema(crd)):
            assert "\n" not in node.get("description", "")


def test_root_metadata_is_a_plain_object() -> None:
    for crd in EVERY_CRD.values():
        assert _schema(crd)["properties"]["metadata"] == {"type": "object"}


@pytest.mark.parametrize(
    ("kind_version", "plural", "version"),
    [
        ("PyTorchJob/v1", "pytorchjobs", "v1"),
        ("TFJob/v1", "tfjobs", "v1"),
        ("XGBoostJob/v1", "xgboostjobs", "v1"),
        ("PaddleJob/v1", "paddlejobs", "v1"),
        ("JAXJob/v1", "jaxjobs", "v1"),
        ("MXJob/v1", "mxjobs", "v1"),
        ("MPIJob/v1", "mpijobs", "v1"),
        ("MPIJob/v2beta1", "mpijobs", "v2beta1"),
    ],
)
def test_names_group_scope_and_single_served_storage_version(
    kind_version: str, plural: str, version: str
) -> None:
    crd = _crd(kind_version)
    kind = kind_version.split("/")[0]
    assert crd["metadata"]["name"] == f"{plural}.kubeflow.org"
    assert crd["spec"]["group"] == "kubeflow.org"
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"] == {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": kind.lower(),
    }
    [served] = crd["spec"]["versions"]
    assert (served["name"], served["served"], served["storage"]) == (version, True, True)


def test_every_kind_has_the_status_subresource() -> None:
    for crd in JOB_CRDS.values():
        assert crd["spec"]["versions"][0]["subresources"]["status"] == {}


@pytest.mark.parametrize(
    ("kind_version", "replica_map"),
    [
        ("PyTorchJob/v1", "pytorchReplicaSpecs"),
        ("PaddleJob/v1", "paddleReplicaSpecs"),
        ("JAXJob/v1", "jaxReplicaSpecs"),
    ],
)
def test_scale_subresource_resizes_workers_where_upstream_has_it(kind_version: str, replica_map: str) -> None:
    assert _crd(kind_version)["spec"]["versions"][0]["subresources"]["scale"] == {
        "specReplicasPath": f".spec.{replica_map}.Worker.replicas",
        "statusReplicasPath": ".status.replicaStatuses.Worker.active",
        "labelSelectorPath": ".status.replicaStatuses.Worker.selector",
    }


@pytest.mark.parametrize(
    "kind_version", ["TFJob/v1", "XGBoostJob/v1", "MXJob/v1", "MPIJob/v1", "MPIJob/v2beta1"]
)
def test_no_scale_subresource_where_upstream_has_none(kind_version: str) -> None:
    assert "scale" not in _crd(kind_version)["spec"]["versions"][0]["subresources"]


def test_printer_columns_are_state_progress_and_age() -> None:
    for crd in JOB_CRDS.values():
        assert crd["spec"]["versions"][0]["additionalPrinterColumns"] == [
            {"name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type"},
            {"name": "Progress %", "type": "integer", "jsonPath": ".status.trainerStatus.progressPercentage"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ]


def test_compact_crds_fit_the_last_applied_annotation_of_client_side_apply() -> None:
    annotation_limit = 262_144
    for crd in EVERY_CRD.values():
        assert len(json.dumps(crd)) < annotation_limit // 10


class _Node(BaseModel):
    children: list[_Node] = []


class _RecursiveJob(TrainingJob):
    KIND = "RecursiveJob"
    PLURAL = "recursivejobs"
    spec: _Node  # type: ignore[assignment]


def test_recursive_models_are_refused_because_structural_schemas_cannot_express_them() -> None:
    with pytest.raises(ValueError, match="recursive model _Node"):
        structural_schema(_RecursiveJob)


def test_replica_map_rules_need_the_framework_facts() -> None:
    crd = crd_for(PyTorchJob, replica_types=("Master", "Worker"))
    specs = schema_node(_schema(crd), "spec.pytorchReplicaSpecs")
    assert specs["maxProperties"] == MAX_REPLICA_MAP_KEYS
    assert specs["x-kubernetes-validations"][0]["rule"] == "self.all(t, t in ['Master', 'Worker'])"
