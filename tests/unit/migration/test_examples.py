"""Every v1 example migrates to a TrainJob its runtime accepts, or is refused with its reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from migrating import jobset

from docs_blocks import ROOT
from kubetrain.api.manifest import load_jobs
from kubetrain.frameworks.migration import NotMigratableError, migrate

EXAMPLES = sorted((ROOT / "examples").glob("*/job*.yaml"))
REFUSED = {"tensorflow", "paddle"}


@pytest.mark.parametrize(
    "path", [p for p in EXAMPLES if p.parent.name not in REFUSED], ids=lambda p: p.parent.name + "/" + p.name
)
def test_the_example_plans_on_its_runtime_as_trainer_would(path: Path) -> None:
    (job,) = load_jobs(path)
    migration = migrate(job)
    planned = jobset(migration)
    assert planned["metadata"]["name"] == job.name


@pytest.mark.parametrize(
    "path", [p for p in EXAMPLES if p.parent.name in REFUSED], ids=lambda p: p.parent.name
)
def test_the_example_is_refused(path: Path) -> None:
    (job,) = load_jobs(path)
    with pytest.raises(NotMigratableError):
        migrate(job)
