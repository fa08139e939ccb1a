"""The checked-in CRDs under ``manifests/`` are what the generator produces, and the CLI prints them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from builders import cli_runner
from kubetrain.cli.main import app
from kubetrain.frameworks.crds import (
    MpiApi,
    all_crds,
    api_reference,
    crd_file_name,
    crd_file_text,
    with_api_reference,
)

MANIFESTS = Path(__file__).resolve().parents[3] / "manifests"

CHECKED_IN = {
    "crds": all_crds(MpiApi.V2BETA1),
    "crds-mpijob-v1": [crd for crd in all_crds(MpiApi.V1) if crd["spec"]["names"]["kind"] == "MPIJob"],
}


@pytest.mark.parametrize("directory", sorted(CHECKED_IN))
def test_checked_in_crds_are_what_the_generator_produces(directory: str) -> None:
    expected = {crd_file_name(crd): crd_file_text(crd) for crd in CHECKED_IN[directory]}
    found = {path.name: path.read_text() for path in (MANIFESTS / directory).glob("*.yaml")}
    stale = sorted(name for name in expected.keys() | found.keys() if expected.get(name) != found.get(name))
    assert not stale, f"manifests/{directory}: {', '.join(stale)} out of date; run `make manifests`"


def test_the_default_set_serves_the_v2beta1_mpijob() -> None:
    mpijob = yaml.safe_load((MANIFESTS / "crds" / "kubeflow.org_mpijobs.yaml").read_text())
    assert [v["name"] for v in mpijob["spec"]["versions"]] == ["v2beta1"]


def test_the_alternative_directory_holds_only_the_v1_mpijob() -> None:
    [path] = (MANIFESTS / "crds-mpijob-v1").glob("*.yaml")
    mpijob = yaml.safe_load(path.read_text())
    assert (path.name, [v["name"] for v in mpijob["spec"]["versions"]]) == (
        "kubeflow.org_mpijobs.yaml",
        ["v1"],
    )


def test_manifests_crds_prints_every_crd_as_one_yaml_stream() -> None:
    result = cli_runner().invoke(app, ["manifests", "crds"])
    assert result.exit_code == 0, result.output
    documents = list(yaml.safe_load_all(result.stdout))
    assert documents == all_crds(MpiApi.V2BETA1)


def test_manifests_crds_mpi_api_v1_swaps_the_mpijob_crd() -> None:
    result = cli_runner().invoke(app, ["manifests", "crds", "--mpi-api", "v1", "--kind", "mpijob"])
    assert result.exit_code == 0, result.output
    [mpijob] = yaml.safe_load_all(result.stdout)
    assert mpijob["spec"]["versions"][0]["name"] == "v1"


def test_manifests_crds_writes_one_file_per_crd(tmp_path: Path) -> None:
    result = cli_runner().invoke(app, ["manifests", "crds", "--output-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    written = {path.name: path.read_text() for path in tmp_path.iterdir()}
    assert written == {crd_file_name(crd): crd_file_text(crd) for crd in all_crds(MpiApi.V2BETA1)}


def test_an_unknown_kind_is_an_error_that_lists_the_kinds() -> None:
    result = cli_runner().invoke(app, ["manifests", "crds", "--kind", "SparkJob"])
    assert result.exit_code == 2
    assert (
        "--kind sparkjob is not a kind kubetrain serves; use one of ClusterTrainingRuntime, JAXJob, MPIJob"
        in result.stderr
    )


def test_the_field_reference_in_docs_api_md_is_current() -> None:
    document = (MANIFESTS.parent / "docs" / "api.md").read_text()
    assert with_api_reference(document) == document, (
        "docs/api.md field reference out of date; run `make manifests`"
    )


def test_the_field_reference_covers_every_kind_both_mpijobs_and_trainers_kinds() -> None:
    headings = [line for line in api_reference().splitlines() if line.startswith("### ")]
    assert headings == [
        "### Fields every kind shares",
        "### PyTorchJob (`kubeflow.org/v1`)",
        "### TFJob (`kubeflow.org/v1`)",
        "### XGBoostJob (`kubeflow.org/v1`)",
        "### PaddleJob (`kubeflow.org/v1`)",
        "### JAXJob (`kubeflow.org/v1`)",
        "### MXJob (`kubeflow.org/v1`)",
        "### MPIJob (`kubeflow.org/v1`)",
        "### MPIJob (`kubeflow.org/v2beta1`)",
        "### ClusterTrainingRuntime (`trainer.kubeflow.org/v1alpha1`, cluster)",
        "### TrainingRuntime (`trainer.kubeflow.org/v1alpha1`, namespaced)",
        "### TrainJob (`trainer.kubeflow.org/v1alpha1`, namespaced)",
    ]


def test_a_document_without_the_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="no generated section"):
        with_api_reference("# API\n")


def test_manifests_api_reference_prints_the_generated_section() -> None:
    result = cli_runner().invoke(app, ["manifests", "api-reference"])
    assert result.exit_code == 0, result.output
    assert result.stdout == api_reference()
