"""Kind names: every spelling kubectl users type resolves to the same kind."""

from __future__ import annotations

import pytest

from kubetrain.sdk.kinds import KINDS, resolve_kind


@pytest.mark.parametrize(
    "name", ["pytorchjob", "pytorchjobs", "PyTorchJob", "PYTORCHJOB", "pytorchjob.kubeflow.org", "pytorch"]
)
def test_every_spelling_of_pytorchjob_means_pytorchjob(name: str) -> None:
    kind = resolve_kind(name)
    assert (kind.kind, kind.api_version) == ("PyTorchJob", "kubeflow.org/v1")


def test_plural_with_group_and_version_names_the_kind() -> None:
    assert resolve_kind("tfjobs.kubeflow.org/v1").kind == "TFJob"


def test_a_bare_mpijob_is_the_v1_kind() -> None:
    assert resolve_kind("mpijob").api_version == "kubeflow.org/v1"


def test_the_v2beta1_mpijob_is_named_by_its_version() -> None:
    assert resolve_kind("mpijobs.kubeflow.org/v2beta1").api_version == "kubeflow.org/v2beta1"


def test_short_names_are_the_kind_without_its_job_suffix() -> None:
    shorts = {k.short_name for k in KINDS if k.api_version.endswith("/v1")}
    assert shorts == {"pytorch", "tf", "xgboost", "paddle", "jax", "mx", "mpi"}


def test_an_unknown_kind_is_a_value_error_listing_the_known_kinds() -> None:
    with pytest.raises(ValueError, match=r"unknown job kind 'deployment'.*PyTorchJob"):
        resolve_kind("deployment")


def test_plural_and_group_come_from_the_model() -> None:
    kind = resolve_kind("xgboostjob")
    assert (kind.plural, kind.group, kind.version) == ("xgboostjobs", "kubeflow.org", "v1")


@pytest.mark.parametrize(
    "name",
    [
        "trainjob",
        "trainjobs",
        "TrainJob",
        "trainjob.trainer.kubeflow.org",
        "trainjobs.trainer.kubeflow.org/v1alpha1",
    ],
)
def test_every_spelling_of_trainjob_means_kubeflow_trainers_trainjob(name: str) -> None:
    kind = resolve_kind(name)
    assert (kind.kind, kind.api_version, kind.is_trainjob) == (
        "TrainJob",
        "trainer.kubeflow.org/v1alpha1",
        True,
    )


def test_a_trainjob_has_no_framework_to_scale_it_by() -> None:
    with pytest.raises(ValueError, match="TrainJob has no framework: its runtime says how it trains"):
        _ = resolve_kind("trainjob").v1_framework
