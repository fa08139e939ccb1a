"""``kubetrain operator`` flags: upstream's names, and a clear error for a bad value."""

from __future__ import annotations

import pytest

from builders import cli_runner
from kubetrain.cli.main import app
from kubetrain.cli.operator import enabled_frameworks, own_pod
from kubetrain.frameworks.crds import MpiApi
from kubetrain.kube.health import parse_bind_address


def test_an_unknown_scheme_is_refused_naming_the_flag_and_the_known_ones() -> None:
    result = cli_runner().invoke(app, ["operator", "--enable-scheme", "caffejob"])
    assert result.exit_code == 2
    assert "--enable-scheme" in result.output and "pytorchjob" in result.output


def test_schemes_are_case_insensitive_and_deduplicated() -> None:
    assert [f.kind for f in enabled_frameworks(["PyTorchJob", "pytorchjob", "TFJOB"])] == [
        "PyTorchJob",
        "TFJob",
    ]


EVERY_KIND = {"PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MXJob", "MPIJob"}


def test_by_default_every_kind_is_enabled_with_the_v2beta1_mpijob() -> None:
    enabled = enabled_frameworks([])
    assert {f.kind for f in enabled} == EVERY_KIND
    assert [f.api_version for f in enabled if f.kind == "MPIJob"] == ["kubeflow.org/v2beta1"]


def test_mpi_api_v1_puts_the_v1_mpijob_in_the_default_kinds() -> None:
    enabled = enabled_frameworks([], MpiApi.V1)
    assert {f.kind for f in enabled} == EVERY_KIND
    assert {f.api_version for f in enabled} == {"kubeflow.org/v1"}


def test_a_named_scheme_keeps_its_mpijob_version_whatever_the_mpi_api() -> None:
    assert [f.api_version for f in enabled_frameworks(["mpijob"], MpiApi.V2BETA1)] == ["kubeflow.org/v1"]


def test_an_unknown_mpi_api_is_refused_naming_the_flag() -> None:
    result = cli_runner().invoke(app, ["operator", "--mpi-api", "v3"])
    assert result.exit_code == 2
    assert "--mpi-api" in result.output


@pytest.mark.parametrize(
    ("address", "expected"),
    [(":8080", ("0.0.0.0", 8080)), ("127.0.0.1:9000", ("127.0.0.1", 9000)), ("0", None), ("", None)],
)
def test_bind_addresses_read_like_upstreams(address: str, expected: tuple[str, int] | None) -> None:
    assert parse_bind_address(address) == expected


def test_a_bind_address_without_a_port_is_refused_with_an_example() -> None:
    with pytest.raises(ValueError, match=r":8080"):
        parse_bind_address("localhost")


def test_the_operator_knows_its_pod_from_the_downward_api_and_a_host_process_has_none() -> None:
    assert own_pod({"MY_POD_NAMESPACE": "kubeflow", "MY_POD_NAME": "training-operator-7d9c-x"}) == (
        "kubeflow",
        "training-operator-7d9c-x",
    )
    assert own_pod({"MY_POD_NAMESPACE": "kubeflow"}) is None
