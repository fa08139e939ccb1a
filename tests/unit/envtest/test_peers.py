"""The peers as pinned: their versions from tools/<name>/go.mod, how a start is recognised, and the
webhook configuration upstream's cert rotator keeps (which the API server never calls)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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
