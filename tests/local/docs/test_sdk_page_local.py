"""docs/sdk.md's TrainJob snippet runs as written: two nodes of a built-in runtime on this machine, waited
for, read back and deleted through kubetrain's SDK (in a scratch HOME, so the run's state stays in the
test)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from docs_blocks import ROOT, VENV_BIN, docs_env, run_script, section_text
from waiting import PATIENCE

pytestmark = [pytest.mark.local]

PAGE = ROOT / "docs" / "sdk.md"
TRAINJOBS = "Kubeflow Trainer TrainJobs"
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def test_the_trainjob_snippet_runs_two_nodes_locally_to_complete(tmp_path: Path) -> None:
    (snippet,) = PYTHON_BLOCK.findall(section_text(PAGE, TRAINJOBS))
    script = tmp_path / "hello_trainjob.py"
    script.write_text(f"{snippet}print(logs)\n")
    run = run_script(f"{VENV_BIN / 'python'} {script}", docs_env(tmp_path), timeout=PATIENCE)
    assert run.returncode == 0, run.output
    assert "{'hello-trainjob-node-0-0': 'node 0\\n'}" in run.output
