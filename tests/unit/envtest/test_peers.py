"""The peers as pinned: their versions from tools/<name>/go.mod, how a start is recognised, and the
webhook configuration upstream's cert rotator keeps (which the API server never calls)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from kubetrain.envtest import peers


def test_the_peers_are_pinned_by_their_go_modules() -> None:
    assert (peers.TRAINING_OPERATOR.version(), peers.MPI_OPERATOR.version()) == ("v1.9.0", "v0.6.0")


def test_each_peer_builds_its_own_command_from_its_module() -> None:
    tool = peers.MPI_OPERATOR.tool()
    assert (tool.package, tool.binary, tool.module.name) == (
        "github.com/kubeflow/mpi-operator/cmd/mpi-operator",
        "mpi-operator",
        "mpi-operator",
    )


def test_a_go_mod_without_the_pin_says_which_line_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "mpi-operator").mkdir()
    (tmp_path / "mpi-operator" / "go.mod").write_text("module example.com/x\n")
    monkeypatch.setattr(peers, "TOOLS", tmp_path)
    with pytest.raises(
        peers.PeerError, match=re.escape("no 'require github.com/kubeflow/mpi-operator vX.Y.Z' line")
    ):
        peers.MPI_OPERATOR.version()


LOG = """\
2026-11-26T04:40:01Z INFO Starting workers {"controller": "pytorchjob-controller", "worker count": 1}
2026-11-26T04:40:01Z INFO Starting EventSource {"controller": "tfjob-controller"}
"""


def test_the_training_operator_is_started_when_every_enabled_controller_runs_its_workers() -> None:
    assert peers._started_workers(LOG, ["pytorchjob-controller"])
    assert not peers._started_workers(LOG, ["pytorchjob-controller", "tfjob-controller"])


def test_the_webhook_configuration_kept_for_the_cert_rotator_matches_no_resource() -> None:
    [webhook] = peers.noop_webhook_configuration("ns")["webhooks"]
    assert webhook["failurePolicy"] == "Ignore"
    assert [rule["apiGroups"] for rule in webhook["rules"]] == [["peers.kubetrain.invalid"]]


TRAINER_LOG = """\
{"level":"info","msg":"Starting workers","controller":"clustertrainingruntime_controller","worker count":1}
{"level":"info","msg":"Starting EventSource","controller":"trainjob_controller"}
"""


def test_trainer_is_started_when_its_json_log_says_every_controller_runs_its_workers() -> None:
    assert peers._started_workers(TRAINER_LOG, ["clustertrainingruntime_controller"])
    assert not peers._started_workers(TRAINER_LOG, peers.TRAINER_CONTROLLERS)


def test_the_trainer_peer_is_pinned_at_v2_3_0_and_builds_its_controller_manager() -> None:
    tool = peers.TRAINER.tool()
    assert peers.TRAINER.version() == "v2.3.0"
    assert tool.package == "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"


def test_trainer_runs_with_its_cert_management_off_and_the_releases_feature_gates() -> None:
    config = yaml.safe_load(peers.trainer_configuration(9443, 8081, 10443, None, peers.TRAINER_FEATURE_GATES))

    assert config["certManagement"]["enable"] is False
    assert config["webhook"] == {"port": 9443, "host": "127.0.0.1"}
    assert config["metrics"] == {"bindAddress": "0", "secureServing": False}
    assert config["featureGates"] == {}
    assert config["statusServer"]["port"] == 10443


def test_trainers_webhooks_are_the_releases_sent_to_loopback_for_its_namespace_only() -> None:
    configurations = peers.trainer_webhook_configurations(9443, b"CA", "trainer-abc")

    assert sorted(c["metadata"]["name"] for c in configurations) == [
        "defaulter.trainer.kubeflow.org",
        "validator.trainer.kubeflow.org",
    ]
    webhooks = [w for c in configurations for w in c["webhooks"]]
    assert len(webhooks) == 4
    for webhook in webhooks:
        assert webhook["clientConfig"]["url"].startswith("https://127.0.0.1:9443/")
        assert webhook["namespaceSelector"]["matchExpressions"][0]["values"] == ["trainer-abc"]


def test_locks_live_in_the_projects_cache_under_xdg_cache_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    assert peers.locks_dir() == tmp_path / "kubetrain" / "locks"
    assert peers.locks_dir().is_dir()


def test_locks_live_in_the_homes_cache_without_xdg_cache_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))

    assert peers.locks_dir() == tmp_path / ".cache" / "kubetrain" / "locks"
