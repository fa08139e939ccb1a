"""docs/progress.md says what the code does: the loop it shows is the one the local tier runs, its report is
one the endpoint accepts, its numbers are the endpoint's and the helper's limits, and its output is printed
today."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from docs_blocks import ROOT, ConsoleBlock, console_blocks, console_output, docs_env, section_text
from kubetrain import reporting
from kubetrain.api import progress
from kubetrain.api.progress import parse_report
from kubetrain.local.status_access import CREDENTIALS_MOUNT
from kubetrain.progress import server

PAGE = ROOT / "docs" / "progress.md"
FENCED = re.compile(r"^```(?P<language>\w*)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks(language: str, section: str | None = None) -> list[str]:
    return [m["body"] for m in FENCED.finditer(section_text(PAGE, section)) if m["language"] == language]


def test_every_fence_is_one_the_tests_check() -> None:
    assert {m["language"] for m in FENCED.finditer(PAGE.read_text())} <= {"sh", "console", "python", "json"}


def test_the_loop_shown_is_the_file_the_local_tier_runs() -> None:
    [loop] = blocks("python", "Reporting from a training loop")
    assert loop == (ROOT / "docs" / "examples" / "train_loop.py").read_text()


def test_the_report_shown_is_one_the_endpoint_accepts() -> None:
    [body] = blocks("json", "The protocol")
    status = parse_report(body.encode(), datetime(2026, 11, 26, tzinfo=UTC)).status
    assert status is not None and status.progress_percentage == 45
    assert status.metric("loss") == "0.2347"


@pytest.mark.parametrize(
    "sentence",
    [
        f"at most {progress.MAX_METRICS}, each",
        f"a name of 1 to {progress.MAX_METRIC_NAME} characters",
        f"and a value of 1 to {progress.MAX_METRIC_VALUE}",
        f"0 to {progress.MAX_REMAINING_SECONDS}",
        f"A body is at most {progress.MAX_REPORT_BYTES // 1024} KiB",
        f"One token may send {server.TOKEN_BURST} reports at once and then {server.TOKEN_RATE:g} a second",
        f"one job, all its replicas together, {server.JOB_BURST} and then {server.JOB_RATE:g} a second",
        f"at most one request every `interval` seconds ({reporting.DEFAULT_INTERVAL:g} by default)",
        f"if that takes at most {reporting.EXIT_FLUSH_SECONDS:g} seconds",
        f"at most {progress.MAX_HISTORY_POINTS} points over the job's whole life",
        f"mounted read-only at `{CREDENTIALS_MOUNT}`",
        *(f"`{name}`" for name in reporting.VARIABLE_SPELLINGS[0]),
    ],
)
def test_the_numbers_and_names_on_the_page_are_the_codes(sentence: str) -> None:
    text = " ".join(PAGE.read_text().split())
    assert sentence in text


@pytest.mark.parametrize("block", console_blocks(PAGE), ids=lambda b: b.command)
def test_the_output_shown_is_printed_today(block: ConsoleBlock, tmp_path: Path) -> None:
    run = console_output(block, docs_env(tmp_path))
    assert run.returncode == 0, run.output
    assert run.output == block.output, "docs/progress.md is stale: run `make docs` and review the diff"
