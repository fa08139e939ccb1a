"""Kueue v0.17.0 beside envtest: its TrainJob integration on, its servers on loopback with its cert manager
off, and only the webhooks of its own kinds and of the chosen integrations installed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubetrain.envtest import kueue


def test_kueue_is_pinned_at_v0_17_0() -> None:
    assert kueue.version() == "v0.17.0"


def test_by_default_kueue_integrates_trainjobs_with_its_servers_on_loopback(tmp_path: Path) -> None:
    config = yaml.safe_load(kueue.configuration([kueue.TRAINJOB_FRAMEWORK], 9443, 8081, tmp_path))

    assert config["integrations"] == {"frameworks": ["trainer.kubeflow.org/trainjob"]}
    assert config["webhook"] == {"port": 9443, "host": "127.0.0.1", "certDir": str(tmp_path)}
    assert config["internalCertManagement"] == {"enable": False}
    assert config["featureGates"] == {"VisibilityOnDemand": False}


def test_an_integration_the_runner_cannot_serve_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(kueue.KueueError, match=r"\['ray.io/rayjob'\]"):
        kueue.configuration(["ray.io/rayjob"], 9443, 8081, tmp_path)


def test_only_the_webhooks_of_kueues_kinds_and_trainjobs_are_installed() -> None:
    configurations = kueue.webhook_configurations([kueue.TRAINJOB_FRAMEWORK], 9443, b"CA")

    resources = {
        (group, resource)
        for configuration in configurations
        for webhook in configuration["webhooks"]
        for rule in webhook["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert {group for group, _ in resources} == {"kueue.x-k8s.io", "trainer.kubeflow.org"}
    assert ("trainer.kubeflow.org", "trainjobs") in resources
    assert sorted(c["metadata"]["name"] for c in configurations) == [
        "kueue-mutating-webhook-configuration",
        "kueue-validating-webhook-configuration",
    ]


def test_a_controller_runs_once_kueues_log_says_its_workers_started() -> None:
    log = '{"level":"info","logger":"trainjob","msg":"Starting workers"}\n'
    assert kueue.started_controllers(log) == {"trainjob"}
