"""CustomResourceDefinitions (``apiextensions.k8s.io/v1``) generated from the job models.

The pydantic JSON schema of a job model is rewritten into a Kubernetes *structural* schema:
``$defs`` inlined, ``Optional`` collapsed to its type, titles and pydantic defaults dropped,
``dict[str, Any]`` (pod templates, metrics) kept as ``x-kubernetes-preserve-unknown-fields``
objects and ``int | str`` as ``x-kubernetes-int-or-string``. Pod templates are not expanded into
the full ``PodTemplateSpec`` schema: that keeps each CRD a few tens of kilobytes, small enough for a
plain client-side ``kubectl apply`` (upstream's 600 KB CRDs need ``--server-side``). Only the
template fields kubetrain reads or writes are typed (``api.podtemplate``), the same schema admission
checks; the rest is checked by the API server when a pod is created.

Validation that upstream does in admission webhooks is carried by the CRD itself: schema
``enum`` and ``minimum`` where a value is checked alone, CEL ``x-kubernetes-validations`` where
fields are checked together. Every rule here is framework-agnostic; the frameworks layer passes
kind-specific facts (replica types, the scaled replica type, extra rules) to :func:`crd_for`.
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import json
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from kubetrain.api.jobs import GROUP, TrainingJob
from kubetrain.api.podtemplate import pod_template_schema
from kubetrain.api.progress import KUBEFLOW_REPORT_LIMITS, MAX_REMAINING_SECONDS, ReportLimits

DNS1035_LABEL_MAX = 63
"""Pods and Services are named ``<job>-<type>-<index>``; a Service name is a DNS-1035 label."""

MAX_REPLICA_MAP_KEYS = 16
"""Upper bound of any replica map; the kinds have at most six replica types."""

MAX_REPLICAS_CEILING = 150_000  # engine.types.CLUSTER_CEILING is the same number
"""The schema's hard ceiling on one replica type's count: Kubernetes' supported maximum of pods in a
whole cluster (its scalability thresholds), so no real job is refused by it. The operator's own,
lower limits (``--max-replicas-per-type``, ``--max-replicas-per-job``) are checked in admission."""

Schema = dict[str, Any]


@dataclass(frozen=True)
class Rule:
    """One CEL ``x-kubernetes-validations`` entry; ``message`` names the field and the fix."""

    rule: str
    message: str

    def to_wire(self) -> dict[str, str]:
        return {"rule": self.rule, "message": self.message}


@dataclass(frozen=True)
class ScaleSpec:
    """The ``scale`` subresource: ``kubectl scale`` (and an HPA) resizes this replica type."""

    replica_type: str


def crd_for(
    model: type[TrainingJob],
    *,
    replica_types: Sequence[str],
    scale: ScaleSpec | None = None,
    managed_by: Sequence[str] = (),
    validations: Mapping[str, Sequence[Rule]] | None = None,
    constraints: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The CRD serving ``model``.

    ``replica_types`` are the allowed keys of the replica map (exact case). ``managed_by`` lists
    the allowed ``spec.runPolicy.managedBy`` values (any value when empty). ``validations`` and
    ``constraints`` (schema keywords such as ``default`` or ``minimum``, merged into the node) are
    keyed by schema path (see :func:`schema_node`) and added to the generic ones.
    """
    version = model.API_VERSION.rsplit("/", 1)[-1]
    replica_map = replica_map_field(model)
    schema = structural_schema(model)
    schema["properties"]["metadata"] = {"type": "object"}

    _constrain_common_fields(schema, replica_map, replica_types, managed_by)
    for path, keywords in (constraints or {}).items():
        schema_node(schema, path).update(keywords)
    for rules_by_path in (_common_rules(replica_map, replica_types), validations or {}):
        for path, rules in rules_by_path.items():
            add_rules(schema_node(schema, path), rules)
    schema["description"] = f"{model.KIND} runs a distributed training job ({model.API_VERSION})."

    subresources: dict[str, Any] = {"status": {}}
    if scale is not None:
        subresources["scale"] = {
            "specReplicasPath": f".spec.{replica_map}.{scale.replica_type}.replicas",
            "statusReplicasPath": f".status.replicaStatuses.{scale.replica_type}.active",
            "labelSelectorPath": f".status.replicaStatuses.{scale.replica_type}.selector",
        }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{model.PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": model.KIND,
                "listKind": f"{model.KIND}List",
                "plural": model.PLURAL,
                "singular": model.KIND.lower(),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": subresources,
                    "additionalPrinterColumns": [
                        {"name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type"},
                        # Kubeflow Trainer v2's column for the same field (KEP-2779).
                        {
                            "name": "Progress %",
                            "type": "integer",
                            "jsonPath": ".status.trainerStatus.progressPercentage",
                        },
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                }
            ],
        },
    }


def to_yaml(crd: Mapping[str, Any]) -> str:
    """One CRD as the YAML document ``kubectl apply`` takes (keys sorted, like controller-gen)."""
    import yaml  # only the CRD printers need it

    return yaml.safe_dump(dict(crd), sort_keys=True, width=100)


def replica_map_field(model: type[TrainingJob]) -> str:
    """The wire name of the model's replica map (``pytorchReplicaSpecs``, ``tfReplicaSpecs``, ...)."""
    spec_model = model.model_fields["spec"].annotation
    if not isinstance(spec_model, type):
        raise TypeError(f"{model.__name__}.spec must be annotated with one JobSpec class, got {spec_model}")
    field_name: str = spec_model.REPLICA_SPECS_FIELD
    return spec_model.model_fields[field_name].alias or field_name


def schema_node(schema: Schema, path: str) -> Schema:
    """The node at a dotted wire path; ``*`` steps into a map's values, ``[]`` into list items."""
    node = schema
    for step in path.split(".") if path else []:
        if step == "*":
            node = node["additionalProperties"]
        elif step == "[]":
            node = node["items"]
        else:
            try:
                node = node["properties"][step]
            except KeyError:
                raise KeyError(f"schema has no field {step!r} on the way to {path!r}") from None
    return node


# --- pydantic JSON schema → structural schema ---------------------------------------------------


def structural_schema(model: type[BaseModel]) -> Schema:
    raw = model.model_json_schema(by_alias=True, mode="validation", schema_generator=_DocumentedSchema)
    definitions = raw.pop("$defs", {})
    return _structural(raw, definitions, ())


_DROPPED = {"title", "default", "$defs"}


class _DocumentedSchema(GenerateJsonSchema):
    """Pydantic's JSON schema with each field's attribute docstring as its description (unless the field
    has one of its own), as ``use_attribute_docstrings`` would give, read only when a schema is made."""

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        json_schema = super().model_schema(schema)
        model = schema["cls"]
        properties = json_schema.get("properties")
        if not issubclass(model, BaseModel) or not isinstance(properties, dict):
            return json_schema
        docstrings = _attribute_docstrings(model)
        for name, field in model.model_fields.items():
            key = field.alias or name
            if key in properties and name in docstrings and field.description is None:
                properties[key]["description"] = docstrings[name]
        return json_schema


@functools.cache
def _attribute_docstrings(model: type[BaseModel]) -> dict[str, str]:
    """``{field: docstring}`` for the string literals that follow annotated fields in the class body and its
    bases' (a subclass's own wins)."""
    found: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not issubclass(cls, BaseModel) or cls is BaseModel:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for statement, following in itertools.pairwise(body):
            if (
                isinstance(statement, ast.AnnAssign)
                and isinstance(statement.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                found[statement.target.id] = inspect.cleandoc(following.value.value)
    return found


def _structural(node: Schema, definitions: Mapping[str, Schema], resolving: tuple[str, ...]) -> Schema:
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name in resolving:
            raise ValueError(f"recursive model {name} cannot be a structural schema")
        target = _structural(definitions[name], definitions, (*resolving, name))
        # A class docstring describes the Python type; the field's own docstring describes the field.
        target.pop("description", None)
        return _with_description(target, node)
    if "anyOf" in node:
        return _with_description(_collapse_any_of(node["anyOf"], definitions, resolving), node)

    out: Schema = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key == "description":
            out[key] = _short(value)
        elif key == "const":
            out["enum"] = [value]
        elif key == "properties":
            out[key] = {name: _structural(child, definitions, resolving) for name, child in value.items()}
        elif key == "items":
            out[key] = _structural(value, definitions, resolving)
        elif key == "additionalProperties":
            if value is not True and value != {}:
                out[key] = _structural(value, definitions, resolving)
        else:
            out[key] = value
    if out.get("type") == "object" and "properties" not in out and "additionalProperties" not in out:
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def _collapse_any_of(
    options: Sequence[Schema], definitions: Mapping[str, Schema], resolving: tuple[str, ...]
) -> Schema:
    present = [option for option in options if option.get("type") != "null"]
    if {option.get("type") for option in present} == {"integer", "string"} and len(present) == 2:
        return {"x-kubernetes-int-or-string": True}
    if len(present) != 1:
        raise ValueError(f"a structural schema cannot express the union {present}")
    # Optional[X] is X: an absent field and a null one mean the same to kubetrain.
    return _structural(present[0], definitions, resolving)


def _with_description(schema: Schema, node: Schema) -> Schema:
    if "description" in node:
        schema["description"] = _short(node["description"])
    return schema


def _short(description: str) -> str:
    """The first paragraph, on one line, with reStructuredText literals as Markdown ones."""
    first = description.strip().split("\n\n", 1)[0]
    return re.sub(r"\s+", " ", first).replace("``", "`")


# --- validation carried by the CRD ---------------------------------------------------------------

NON_NEGATIVE_RUN_POLICY_FIELDS = ("ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit")


def _constrain_common_fields(
    schema: Schema, replica_map: str, replica_types: Sequence[str], managed_by: Sequence[str]
) -> None:
    run_policy = schema_node(schema, "spec.runPolicy")
    run_policy["properties"]["suspend"]["default"] = False
    for name in NON_NEGATIVE_RUN_POLICY_FIELDS:
        run_policy["properties"][name]["minimum"] = 0
    if managed_by:
        run_policy["properties"]["managedBy"]["enum"] = list(managed_by)
    replicas = schema_node(schema, f"spec.{replica_map}")
    # Bounding the map keeps the CEL rules over it within the API server's cost budget. The bound is
    # loose on purpose: a schema error suppresses every CEL rule, and the key whitelist's message
    # (which names the valid types) helps more than "Too many: 3: must have at most 2 items".
    replicas["maxProperties"] = MAX_REPLICA_MAP_KEYS
    replica_spec = replicas["additionalProperties"]
    replica_spec["properties"]["replicas"].update(minimum=0, maximum=MAX_REPLICAS_CEILING)
    description = replica_spec["properties"]["template"].get("description")
    replica_spec["properties"]["template"] = pod_template_schema()
    if description:
        replica_spec["properties"]["template"]["description"] = description
    constrain_trainer_status(schema_node(schema, "status.trainerStatus"))


def constrain_trainer_status(trainer_status: Schema, limits: ReportLimits = KUBEFLOW_REPORT_LIMITS) -> None:
    """Trainer v2's bounds on a report (``limits``: the kind's), so that no writer can store what the
    endpoints refuse."""
    fields = trainer_status["properties"]
    fields["progressPercentage"].update(minimum=0, maximum=100)
    fields["estimatedRemainingSeconds"].update(minimum=0, maximum=MAX_REMAINING_SECONDS)
    metrics = fields["metrics"]
    metrics.update({"maxItems": limits.metrics, "x-kubernetes-list-type": "atomic"})
    metric = metrics["items"]["properties"]
    metric["name"].update(minLength=1, maxLength=limits.metric_name)
    metric["value"].update(minLength=1, maxLength=limits.metric_value)


def _common_rules(replica_map: str, replica_types: Sequence[str]) -> dict[str, Sequence[Rule]]:
    specs = f"self.spec.{replica_map}"
    count = f"{specs}[t].replicas"
    # A type with no replicas names nothing; an unset count defaults to 1 (index 0).
    no_replicas = f"(has({count}) && {count} == 0)"
    last_index = f"(has({count}) && {count} > 1 ? {count} - 1 : 0)"
    allowed = ", ".join(f"'{t}'" for t in replica_types)
    return {
        "": [
            Rule(
                "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
                "metadata.name must be a DNS-1035 label: lowercase letters, digits and '-', "
                "starting with a letter and ending with a letter or digit",
            ),
            Rule(
                f"!has(self.spec) || !has({specs})"
                f" || {specs}.all(t, {no_replicas}"
                f" || size(self.metadata.name) + size(t) + 2 + size(string({last_index}))"
                f" <= {DNS1035_LABEL_MAX})",
                f"metadata.name is too long: replica names <name>-<type>-<index> must be at most "
                f"{DNS1035_LABEL_MAX} characters; shorten the job name",
            ),
        ],
        "spec": [
            Rule(
                "(has(self.runPolicy) && has(self.runPolicy.managedBy))"
                " == (has(oldSelf.runPolicy) && has(oldSelf.runPolicy.managedBy))"
                " && (!has(self.runPolicy) || !has(self.runPolicy.managedBy)"
                " || self.runPolicy.managedBy == oldSelf.runPolicy.managedBy)",
                "spec.runPolicy.managedBy is immutable; delete and recreate the job to change it",
            ),
        ],
        f"spec.{replica_map}": [
            Rule(
                f"self.all(t, t in [{allowed}])",
                f"spec.{replica_map} keys must be replica types {', '.join(replica_types)} (exact case)",
            ),
        ],
        "spec.runPolicy.schedulingPolicy.queue": [
            Rule("self == oldSelf", "spec.runPolicy.schedulingPolicy.queue is immutable"),
        ],
    }


def add_rules(node: Schema, rules: Sequence[Rule]) -> None:
    node.setdefault("x-kubernetes-validations", []).extend(rule.to_wire() for rule in rules)


# --- helpers for kind-specific rules ----------------------------------------------------------------


def replica_count_rule(replica_map: str, replica_type: str, *, operator: str, bound: int, fix: str) -> Rule:
    """A rule on the replica map: ``<type>.replicas <operator> <bound>`` when the type and count are set.

    An unset count passes: defaulting makes it 1, which every bound used here allows.
    """
    return Rule(
        f"!has(self.{replica_type}) || !has(self.{replica_type}.replicas)"
        f" || self.{replica_type}.replicas {operator} {bound}",
        f"spec.{replica_map}.{replica_type}.replicas must be {_WORDS[operator]}{bound}; {fix}",
    )


def replica_required_rule(replica_map: str, replica_type: str, *, why: str) -> Rule:
    return Rule(f"has(self.{replica_type})", f"spec.{replica_map}.{replica_type} is required: {why}")


_WORDS = {"==": "", "<=": "at most ", ">=": "at least "}


# --- reference documentation from a schema ------------------------------------------------------------

FieldRow = tuple[str, str, str, str, str]
"""A field's path, type, CRD default, schema checks and description."""


def field_rows(node: Schema, path: str = "", *, stop_at: Sequence[str] = ()) -> list[FieldRow]:
    """Every field under ``node``, depth first; fields in ``stop_at`` are listed but not expanded."""
    rows: list[FieldRow] = []
    required = set(node.get("required", []))
    for name, child in node.get("properties", {}).items():
        child_path = f"{path}.{name}" if path else name
        checks = [*(["required"] if name in required else []), *_value_checks(child)]
        default = json.dumps(child["default"]) if "default" in child else ""
        rows.append((child_path, _type_name(child), default, ", ".join(checks), child.get("description", "")))
        nested = _nested_fields(child)
        if nested is not None and child_path not in stop_at:
            rows += field_rows(nested[0], child_path + nested[1], stop_at=stop_at)
    return rows


def _nested_fields(node: Schema) -> tuple[Schema, str] | None:
    if "properties" in node:
        return node, ""
    values = node.get("additionalProperties")
    if isinstance(values, dict) and "properties" in values:
        return values, ".<key>"
    if "items" in node and "properties" in node["items"]:
        return node["items"], "[]"
    return None


def _type_name(node: Schema) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "int or string"
    if node.get("type") == "array":
        return f"[]{_type_name(node['items'])}"
    if isinstance(node.get("additionalProperties"), dict):
        return f"map[string]{_type_name(node['additionalProperties'])}"
    if node.get("format") == "date-time":
        return "string (date-time)"
    return str(node.get("type", ""))


def _value_checks(node: Schema) -> list[str]:
    checks = []
    if "enum" in node:
        checks.append("one of " + ", ".join(f"`{json.dumps(v) if v == '' else v}`" for v in node["enum"]))
    if "minimum" in node:
        checks.append(f">= {node['minimum']}")
    if "maximum" in node:
        checks.append(f"<= {node['maximum']}")
    if "pattern" in node:
        checks.append("a quantity" if "KMGTPE" in node["pattern"] else f"matches `{node['pattern']}`")
    if node.get("x-kubernetes-preserve-unknown-fields"):
        checks.append("other fields not checked" if "properties" in node else "not checked by the CRD")
    values = node.get("additionalProperties")
    if isinstance(values, dict) and _value_checks(values):
        checks.append("each value " + ", ".join(_value_checks(values)))
    return checks


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def validation_messages(node: Schema, path: str = "") -> list[tuple[str, str]]:
    """Every CEL rule's node path and message, depth first."""
    found = [(path or "(root)", rule["message"]) for rule in node.get("x-kubernetes-validations", [])]
    for name, child in node.get("properties", {}).items():
        found += validation_messages(child, f"{path}.{name}" if path else name)
    values = node.get("additionalProperties")
    if isinstance(values, dict):
        found += validation_messages(values, f"{path}.<key>")
    if "items" in node:
        found += validation_messages(node["items"], f"{path}[]")
    return found
