"""docs/operations.md and docs/migration.md: the outputs they show (gang-scheduling decoration, the refusal of
a long job name, the CRDs each MPIJob choice installs) are what the commands print today."""

from __future__ import annotations

from pathlib import Path

import pytest

from docs_blocks import ROOT, ConsoleBlock, console_blocks, console_output, docs_env

PAGES = [ROOT / "docs" / "operations.md", ROOT / "docs" / "migration.md"]
BLOCKS = [
    pytest.param(page, block, id=f"{page.name}:{index}")
    for page in PAGES
    for index, block in enumerate(console_blocks(page))
]


@pytest.mark.parametrize(("page", "block"), BLOCKS)
def test_the_output_shown_is_printed_today(page: Path, block: ConsoleBlock, tmp_path: Path) -> None:
    run = console_output(block, docs_env(tmp_path))
    assert run.returncode == 0, run.output
    assert run.output == block.output, f"{page.name} is stale: run `make docs` and review the diff"


def test_the_long_name_troubleshooting_shows_the_refusal_and_its_fix() -> None:
    (refusal,) = [b for b in console_blocks(PAGES[0]) if "long-name-job.yaml" in b.command]
    assert "shorten metadata.name to at most" in refusal.output
    assert refusal.output.endswith("exit status 2\n")


def test_the_migration_page_shows_both_mpijob_crd_choices() -> None:
    commands = [block.command for block in console_blocks(PAGES[1])]
    assert any("--mpi-api v1" in command for command in commands)
    assert any("--mpi-api" not in command for command in commands)
