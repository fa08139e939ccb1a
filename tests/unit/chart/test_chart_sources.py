"""The Helm chart's sources agree with what they copy: the generated CRDs, the kustomize base's RBAC,
the operator's flags and the package version. (Rendering them needs helm: tests/cluster/helm.)"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import typer
import yaml

from image_recipes import reference
from kubetrain import __version__
from kubetrain.cli.main import app
from kubetrain.frameworks.crds import MpiApi, all_crds, crd_file_name, crd_file_text
from kubetrain.frameworks.registry import FRAMEWORKS

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "kubetrain"
# In-cluster, the operator uses its ServiceAccount; a kubeconfig flag makes no sense in the chart.
NOT_CHART_VALUES = {"--kubeconfig", "--help", "--mpi-api"}
"""``--mpi-api`` only picks the default kinds; the chart's ``mpiJobAPI`` names them with --enable-scheme."""

GENERATED = {
    "crds": all_crds(MpiApi.V2BETA1),
    "crds-mpijob-v1": [crd for crd in all_crds(MpiApi.V1) if crd["spec"]["names"]["kind"] == "MPIJob"],
}


def operator_options() -> dict[str, str | None]:
    """``kubetrain operator``'s options, each with the environment variable that can set it instead."""
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    command = group.commands["operator"]
    return {
        option: envvar if isinstance(envvar := getattr(param, "envvar", None), str) else None
        for param in command.params
        for option in param.opts
        if option.startswith("--")
    }


@pytest.mark.parametrize("directory", sorted(GENERATED))
def test_the_charts_crd_files_are_what_the_generator_produces(directory: str) -> None:
    expected = {crd_file_name(crd): crd_file_text(crd) for crd in GENERATED[directory]}
    found = {path.name: path.read_text() for path in (CHART / "files" / directory).glob("*.yaml")}
    stale = sorted(name for name in expected.keys() | found.keys() if expected.get(name) != found.get(name))
    assert not stale, (
        f"charts/kubetrain/files/{directory}: {', '.join(stale)} out of date; run `make manifests`"
    )


@pytest.mark.parametrize(
    ("option", "envvar"), sorted((o, e) for o, e in operator_options().items() if o not in NOT_CHART_VALUES)
)
def test_every_operator_flag_is_set_by_the_charts_deployment(option: str, envvar: str | None) -> None:
    deployment = (CHART / "templates" / "deployment.yaml").read_text()
    by_env = envvar is not None and f"- name: {envvar}" in deployment
    assert f"- {option}" in deployment or by_env, f"`kubetrain operator {option}` has no chart value; add one"


def test_the_charts_cluster_role_rules_are_the_kustomize_bases() -> None:
    template = (CHART / "templates" / "clusterrole.yaml").read_text()
    chart_rules: Any = yaml.safe_load(template[template.index("\nrules:") :])["rules"]
    base_rules: Any = yaml.safe_load((ROOT / "manifests" / "base" / "cluster-role.yaml").read_text())["rules"]
    assert chart_rules == base_rules


def test_the_charts_app_version_is_the_packages_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert chart["appVersion"] == project["version"]


def test_the_default_image_runs_the_same_command_as_the_kustomize_base() -> None:
    base = yaml.safe_load((ROOT / "manifests" / "base" / "deployment.yaml").read_text())
    [container] = base["spec"]["template"]["spec"]["containers"]
    repository = yaml.safe_load((CHART / "values.yaml").read_text())["image"]["repository"]
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert container["image"] == f"{repository}:{app_version}"
    assert "command: [kubetrain, operator]" in (CHART / "templates" / "deployment.yaml").read_text()


def test_the_charts_default_image_is_the_operator_image_make_image_builds() -> None:
    image = yaml.safe_load((CHART / "values.yaml").read_text())["image"]
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    tag = image["tag"] or app_version
    assert f"{image['repository']}:{tag}" == reference("operator")


def test_the_charts_default_image_tag_is_the_packages_version() -> None:
    image = yaml.safe_load((CHART / "values.yaml").read_text())["image"]
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert (image["tag"] or app_version) == __version__


def values_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((CHART / "values.schema.json").read_text())
    return schema


def test_the_default_values_meet_the_values_schema() -> None:
    jsonschema.validate(yaml.safe_load((CHART / "values.yaml").read_text()), values_schema())


def test_the_schema_accepts_exactly_the_operators_scheme_names() -> None:
    schemes = values_schema()["properties"]["operator"]["properties"]["enabledSchemes"]["items"]["enum"]
    assert sorted(schemes) == sorted([*(framework.scheme_name for framework in FRAMEWORKS), "trainjob"])


def test_the_schema_describes_every_default_value() -> None:
    def paths(values: dict[str, Any], schema: dict[str, Any], prefix: str) -> list[str]:
        found = []
        for key, value in values.items():
            described = schema.get("properties", {}).get(key)
            if described is None:
                found.append(prefix + key)
            elif isinstance(value, dict) and "properties" in described:
                found += paths(value, described, f"{prefix}{key}.")
        return found

    undescribed = paths(yaml.safe_load((CHART / "values.yaml").read_text()), values_schema(), "")
    assert not undescribed


@pytest.mark.parametrize("directory", [ROOT / "manifests" / "runtimes"])
def test_the_installed_runtimes_are_the_packages_built_in_ones(directory: Path) -> None:
    package = ROOT / "src" / "kubetrain" / "frameworks" / "trainer" / "runtimes"
    expected = {path.name: path.read_text() for path in package.glob("*.yaml")}
    found = {path.name: path.read_text() for path in directory.glob("*.yaml")}
    assert found == expected, f"{directory.relative_to(ROOT)} is out of date; run `make manifests`"
