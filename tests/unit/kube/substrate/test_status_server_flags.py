"""``kubetrain operator``'s status endpoint flags: on by default in-cluster at its Service's name, off
outside the cluster unless told where pods reach it, off with one flag, and a clear error for a bad value."""

from __future__ import annotations

import pytest
import typer

from builders import cli_runner
from kubetrain.cli.main import app
from kubetrain.cli.operator import status_server_settings
from kubetrain.kube.status.settings import StatusServerSettings

DEFAULTS = {
    "bind_address": ":8443",
    "url": "",
    "service": "training-operator-status",
    "secret": "training-operator-status-tls",
    "namespace": "kubeflow",
    "cluster_domain": None,
    "running_in_cluster": True,
}


def settings(**flags: object) -> tuple[StatusServerSettings | None, str | None]:
    return status_server_settings(**{**DEFAULTS, **flags})  # type: ignore[arg-type]


def test_in_the_cluster_pods_are_sent_to_the_services_name_on_the_bound_port() -> None:
    status, _ = settings(namespace="ml-platform", bind_address=":9443")
    assert status is not None
    assert status.base_url == "https://training-operator-status.ml-platform.svc:9443"
    assert (status.host, status.port) == ("0.0.0.0", 9443)


def test_the_certificate_covers_every_name_of_the_service_and_the_urls_host() -> None:
    status, _ = settings(url="https://10.244.0.1:8443")
    assert status is not None
    assert status.certificate_names() == [
        "10.244.0.1",
        "training-operator-status.kubeflow.svc",
        "training-operator-status",
        "training-operator-status.kubeflow",
        "training-operator-status.kubeflow.svc.cluster.local",
    ]


def test_the_cluster_domain_names_the_fully_qualified_service() -> None:
    status, _ = settings(cluster_domain="corp.example")
    assert status is not None
    assert "training-operator-status.kubeflow.svc.corp.example" in status.certificate_names()


def test_outside_the_cluster_without_a_url_the_endpoint_is_off_and_says_how_to_turn_it_on() -> None:
    status, why = settings(running_in_cluster=False)
    assert status is None
    assert why is not None and "--status-server-url" in why


def test_outside_the_cluster_a_url_turns_it_on() -> None:
    status, why = settings(running_in_cluster=False, url="https://10.244.0.1:8443/")
    assert status is not None and why is None
    assert status.base_url == "https://10.244.0.1:8443"


def test_bind_address_zero_turns_it_off_quietly() -> None:
    assert settings(bind_address="0") == (None, None)


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("http://10.0.0.5:8443", "must start with https://"),
        ("https://", "has no host"),
        ("https://10.0.0.5:99999", "out of range"),
        ("https://10.0.0.5:8443/apis/kubeflow.org", "only the scheme, host and port"),
    ],
)
def test_a_bad_url_is_refused_naming_the_flag_and_the_fix(url: str, complaint: str) -> None:
    with pytest.raises(typer.BadParameter, match=complaint) as refused:
        settings(url=url)
    assert refused.value.param_hint == "--status-server-url"


@pytest.mark.parametrize(
    ("flag", "value"),
    [("service", "Training_Operator"), ("secret", "tls secret"), ("namespace", "-kubeflow")],
)
def test_a_bad_name_is_refused_naming_its_flag(flag: str, value: str) -> None:
    with pytest.raises(typer.BadParameter) as refused:
        settings(**{flag: value})
    assert refused.value.param_hint == f"--status-server-{flag}"


def test_a_free_port_cannot_be_asked_for_when_the_service_names_the_port() -> None:
    with pytest.raises(typer.BadParameter, match="Service cannot name"):
        settings(bind_address="127.0.0.1:0")


def test_the_command_refuses_a_bad_url_before_connecting_to_anything() -> None:
    result = cli_runner().invoke(app, ["operator", "--status-server-url", "http://example.com"])
    assert result.exit_code == 2
    assert "--status-server-url" in result.output and "https://" in result.output
