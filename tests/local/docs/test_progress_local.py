"""docs/progress.md's local sections run as written, in a scratch HOME: the plain PyTorch loop reports through
``kubetrain run`` into ``get --local`` and the SDK, and the stalled job is flagged and then resumes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from docs_blocks import PROGRESS_ON_ONE_MACHINE, ROOT, docs_env, run_script, sh_blocks
from waiting import PATIENCE

pytestmark = [pytest.mark.local]

PAGE = ROOT / "docs" / "progress.md"
ON_ONE_MACHINE, HANG_DETECTION = PROGRESS_ON_ONE_MACHINE


def test_the_loop_reports_into_get_local_and_the_sdk_as_the_page_says(tmp_path: Path) -> None:
    env = docs_env(tmp_path)
    run, read_back = (run_script(script, env, timeout=180) for script in sh_blocks(PAGE, ON_ONE_MACHINE))
    assert run.returncode == 0, run.output
    assert "master-0 | trained 100 steps, loss " in run.output
    assert re.search(r"^progress-demo\s+PyTorchJob\s+Succeeded\s+100%\s+-\s+.*\sloss=\S+\s", run.output, re.M)
    assert read_back.returncode == 0, read_back.output
    assert read_back.output.splitlines()[:2] == ["100 True", "100 ['loss']"]
    assert 'pytorchjob.kubeflow.org "progress-demo" deleted' in read_back.output


def test_the_stalled_job_is_flagged_then_resumes_as_the_page_says(tmp_path: Path) -> None:
    [script] = sh_blocks(PAGE, HANG_DETECTION)
    run = run_script(script, docs_env(tmp_path), timeout=PATIENCE)
    assert run.returncode == 0, run.output
    assert (
        "kubetrain: Warning ProgressDeadlineExceeded: PyTorchJob stalled-demo has had no progress"
        in run.output
    )
    assert re.search(r"^\s+Normal\s+ProgressResumed\s+.*reported progress again at ", run.output, re.M)
    assert "PyTorchJob stalled-demo Succeeded" in run.output
