"""docs/quickstart.md's local path and SDK snippet run as written, in a scratch HOME (so the runs' state
stays in the test)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from docs_blocks import (
    QUICKSTART_LOCAL,
    QUICKSTART_SDK,
    ROOT,
    VENV_BIN,
    docs_env,
    run_script,
    section_text,
    sh_blocks,
)
from waiting import PATIENCE

pytestmark = [pytest.mark.local]

PAGE = ROOT / "docs" / "quickstart.md"
LOCAL = QUICKSTART_LOCAL
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def test_the_local_path_runs_as_written(tmp_path: Path) -> None:
    env = docs_env(tmp_path)
    for script in sh_blocks(PAGE, LOCAL):
        run = run_script(script, env, timeout=PATIENCE)
        assert run.returncode == 0, f"{script}\n--- output:\n{run.output}"


def test_the_local_run_prints_each_replicas_rank(tmp_path: Path) -> None:
    run = run_script(sh_blocks(PAGE, LOCAL)[0], docs_env(tmp_path), timeout=PATIENCE)
    assert "master-0 | rank 0 of 2" in run.output
    assert "worker-0 | rank 1 of 2" in run.output


def test_the_sdk_snippet_runs_a_local_job(tmp_path: Path) -> None:
    (snippet,) = PYTHON_BLOCK.findall(section_text(PAGE, QUICKSTART_SDK))
    script = tmp_path / "hello_sdk.py"
    script.write_text(snippet)
    run = run_script(f"{VENV_BIN / 'python'} {script}", docs_env(tmp_path), timeout=PATIENCE)
    assert run.returncode == 0, run.output
