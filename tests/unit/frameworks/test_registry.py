"""The registry: one framework per kind, found by job, by apiVersion/kind, or by scheme name."""

from __future__ import annotations

import pytest

from kubetrain.api.errors import InvalidJobError
from kubetrain.api.jobs import JOB_MODELS, V1, V2BETA1
from kubetrain.frameworks.registry import FRAMEWORKS, framework_by_name, framework_for_kind


def test_every_job_model_has_exactly_one_framework() -> None:
    assert sorted(f.model.__name__ for f in FRAMEWORKS) == sorted(m.__name__ for m in JOB_MODELS)


def test_a_kind_is_found_by_its_api_version_and_kind() -> None:
    assert framework_for_kind(V1, "MPIJob").controller_name == "mpijob-controller"
    assert framework_for_kind(V2BETA1, "MPIJob").controller_name == "mpi-operator"


def test_an_unknown_kind_names_the_supported_ones() -> None:
    with pytest.raises(InvalidJobError, match=r"supported: PyTorchJob \(kubeflow.org/v1\)"):
        framework_for_kind(V1, "SparkJob")


@pytest.mark.parametrize(
    ("name", "kind"),
    [("pytorchjob", "PyTorchJob"), ("TFJob", "TFJob"), ("xgboostjob", "XGBoostJob"), ("JAXJOB", "JAXJob")],
)
def test_scheme_names_and_kinds_are_matched_case_insensitively(name: str, kind: str) -> None:
    assert framework_by_name(name).kind == kind


def test_a_bare_mpijob_name_means_the_v1_kind_and_a_versioned_one_the_v2beta1_kind() -> None:
    assert framework_by_name("mpijob").api_version == V1
    assert framework_by_name("mpijob-v2beta1").api_version == V2BETA1
    assert framework_by_name("MPIJob/v2beta1").api_version == V2BETA1


def test_an_unknown_name_lists_the_known_scheme_names() -> None:
    with pytest.raises(ValueError, match="known: pytorchjob, tfjob"):
        framework_by_name("sparkjob")


@pytest.mark.parametrize("kind", ["PyTorchJob", "PaddleJob", "JAXJob"])
def test_the_scale_subresource_scales_workers_where_upstream_has_one(kind: str) -> None:
    assert framework_for_kind(V1, kind).scale_replica_type == "Worker"


def test_only_the_mpi_kinds_do_without_per_replica_services() -> None:
    assert {f.kind for f in FRAMEWORKS if not f.per_replica_services} == {"MPIJob"}
