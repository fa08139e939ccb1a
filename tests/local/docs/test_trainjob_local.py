"""docs/trainjob.md's local section runs as written: both nodes of the example TrainJob train under torchrun
here, the TrainJob reads Complete with its progress, and the plan shows each node's torchrun env."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from docs_blocks import ROOT, TRAINJOB_ON_ONE_MACHINE, docs_env, run_script, sh_blocks

pytestmark = [pytest.mark.local]

PAGE = ROOT / "docs" / "trainjob.md"


def test_the_example_trainjob_trains_on_both_nodes_as_the_page_says(tmp_path: Path) -> None:
    [script] = sh_blocks(PAGE, TRAINJOB_ON_ONE_MACHINE)
    run = run_script(script, docs_env(tmp_path), timeout=240)
    assert run.returncode == 0, run.output
    assert "node-0 | training finished" in run.output
    assert re.search(r"^torch-ddp\s+Complete\s+100%\s+-\s+\d/2\s", run.output, re.M), run.output
    assert re.findall(r"^replica: (node-\d)$", run.output, re.M) == ["node-0", "node-1"]
    assert re.findall(r"^  PET_NODE_RANK: '(\d)'$", run.output, re.M) == ["0", "1"]
