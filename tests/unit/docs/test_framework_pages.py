"""docs/frameworks/*.md show the env each replica gets as `kubetrain plan` prints it today: a change to env
injection fails here until `make docs` regenerates the pages (and the diff is reviewed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from docs_blocks import ROOT, ConsoleBlock, console_blocks, console_output, docs_env, sh_blocks

PAGES = ROOT / "docs" / "frameworks"
FRAMEWORKS = ("pytorch", "tensorflow", "xgboost", "paddle", "jax", "mpi", "mxnet")
BLOCKS = [
    pytest.param(page, block, id=f"{page.name}:{block.command.split()[2]}")
    for page in sorted(PAGES.glob("*.md"))
    for block in console_blocks(page)
]


def test_every_framework_has_a_page() -> None:
    assert sorted(p.stem for p in PAGES.glob("*.md")) == sorted(FRAMEWORKS)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_every_framework_page_shows_the_plan_of_an_example(framework: str) -> None:
    commands = [block.command for block in console_blocks(PAGES / f"{framework}.md")]
    assert any(command.startswith("kubetrain plan ") for command in commands)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_framework_pages_have_no_commands_left_unchecked(framework: str) -> None:
    assert sh_blocks(PAGES / f"{framework}.md") == []


@pytest.mark.parametrize(("page", "block"), BLOCKS)
def test_the_plan_shown_is_the_plan_printed_today(page: Path, block: ConsoleBlock, tmp_path: Path) -> None:
    run = console_output(block, docs_env(tmp_path))
    assert run.returncode == 0, run.output
    assert run.output == block.output, f"{page.name} is stale: run `make docs` and review the diff"
