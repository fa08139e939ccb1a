"""The install manifests stay in step with the generated CRDs."""

from __future__ import annotations

from pathlib import Path

import yaml

CRDS = Path(__file__).resolve().parents[4] / "manifests" / "crds"


def test_the_crd_kustomization_lists_every_generated_crd() -> None:
    kustomization = yaml.safe_load((CRDS / "kustomization.yml").read_text())
    assert sorted(kustomization["resources"]) == sorted(path.name for path in CRDS.glob("*.yaml"))
