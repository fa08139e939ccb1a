"""Golden tests: ``kubetrain plan`` prints exactly these objects for these manifests.

The golden files are the reviewed, upstream-exact output. After a deliberate change, regenerate
them with ``KUBETRAIN_UPDATE_GOLDEN=1 pytest tests/unit/plan`` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from builders import cli_runner
from kubetrain.api.manifest import load_jobs
from kubetrain.cli.main import app
from kubetrain.cli.output import to_yaml
from kubetrain.local.plan import local_plan

HERE = Path(__file__).parent
MANIFESTS = sorted((HERE / "manifests").glob("*.yaml"))
UPDATE = os.environ.get("KUBETRAIN_UPDATE_GOLDEN") == "1"


def _check(golden: Path, output: str) -> None:
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(output)
    assert golden.exists(), f"{golden.name} missing: run KUBETRAIN_UPDATE_GOLDEN=1 pytest {HERE}"
    assert output == golden.read_text(), f"plan output differs from {golden}"


@pytest.mark.parametrize("manifest", MANIFESTS, ids=[m.stem for m in MANIFESTS])
def test_kubernetes_plan_matches_golden(manifest: Path) -> None:
    result = cli_runner().invoke(app, ["plan", str(manifest)])
    assert result.exit_code == 0, result.output
    _check(HERE / "golden" / "kubernetes" / manifest.name, result.stdout)


def test_volcano_plan_adds_the_pod_group_and_pod_decoration() -> None:
    manifest = HERE / "manifests" / "pytorch-master-workers.yaml"
    result = cli_runner().invoke(app, ["plan", str(manifest), "--gang-scheduler-name", "volcano"])
    assert result.exit_code == 0, result.output
    _check(HERE / "golden" / "volcano" / manifest.name, result.stdout)


@pytest.mark.parametrize("manifest", MANIFESTS, ids=[m.stem for m in MANIFESTS])
def test_local_plan_matches_golden(manifest: Path) -> None:
    jobs = load_jobs(manifest)
    keys = [
        (t, i) for job in jobs for t, spec in job.replica_specs.items() for i in range(spec.replicas or 1)
    ]
    ports = {key: 40000 + n for n, key in enumerate(keys)}
    output = to_yaml(
        [p for job in jobs for p in local_plan(job, Path("/work/run"), ports, Path("/work/state"))]
    )
    _check(HERE / "golden" / "local" / manifest.name, output)


def test_an_invalid_manifest_exits_2_naming_the_field(tmp_path: Path) -> None:
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(
        (HERE / "manifests" / "jaxjob.yaml").read_text().replace("replicas: 2", "replicas: -1")
    )
    result = cli_runner().invoke(app, ["plan", str(manifest)])
    assert result.exit_code == 2
    assert "spec.jaxReplicaSpecs.Worker.replicas" in result.stderr
