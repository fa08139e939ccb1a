"""The e2e tier's gang scheduler: scheduler-plugins' Coscheduling under the name the operator is given, built
against the Kubernetes release envtest runs, with its controller cached apart from it."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from kubetrain.envtest import coscheduler

CHECKOUT = Path(__file__).resolve().parents[3]
OVERLAY = CHECKOUT / "tests" / "e2e" / "operator-overlay" / "kustomization.yaml"


def _replaced_versions(go_mod: Path) -> dict[str, str]:
    return dict(re.findall(r"^\s*(k8s\.io/\S+) => k8s\.io/\S+ (v\S+)$", go_mod.read_text(), re.MULTILINE))


def _profile() -> dict[str, object]:
    profiles = yaml.safe_load(coscheduler.config(Path("/run/admin.kubeconfig")))["profiles"]
    assert len(profiles) == 1
    return dict(profiles[0])


def test_the_scheduler_answers_to_the_name_the_e2e_operator_gang_schedules_with() -> None:
    patches = yaml.safe_load(OVERLAY.read_text())["patches"]
    operator = [p for p in patches if p.get("target") == {"kind": "Deployment", "name": "training-operator"}]
    overlay_args = [op["value"] for patch in operator for op in yaml.safe_load(patch["patch"])]

    assert f"--gang-scheduler-name={coscheduler.SCHEDULER_NAME}" in overlay_args
    assert _profile()["schedulerName"] == coscheduler.SCHEDULER_NAME


def test_coscheduling_alone_orders_the_queue_so_a_gangs_pods_are_tried_together() -> None:
    plugins = _profile()["plugins"]

    assert plugins == {
        "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
        "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
    }


def test_kubernetes_is_held_at_the_release_envtest_builds() -> None:
    envtest = re.search(
        r"^\s*k8s\.io/kubernetes (v\S+)$", (CHECKOUT / "tools/envtest/go.mod").read_text(), re.M
    )
    replaced = _replaced_versions(coscheduler.MODULE / "go.mod")

    assert envtest is not None
    assert replaced["k8s.io/kubernetes"] == envtest.group(1)
    assert set(replaced.values()) == {envtest.group(1), "v0" + envtest.group(1)[2:]}


def test_the_scheduler_and_its_controller_are_cached_apart() -> None:
    # A GoTool replaces its whole version directory when it builds: a shared one would lose the other binary.
    assert coscheduler.tool().directory != coscheduler.controller_tool().directory
