"""Every command block of the user docs is run by some tier: nothing shown to a reader escapes the tests."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from docs_blocks import QUICKSTART_SDK, ROOT, SECTIONS_RUN, console_blocks, section_text, sh_blocks

DOCS = ROOT / "docs"
FRAMEWORK_PAGES = sorted((DOCS / "frameworks").glob("*.md"))
PAGES_WITH_CONSOLE_BLOCKS_ONLY = [
    DOCS / "migration.md",
    *FRAMEWORK_PAGES,
]
FENCE = re.compile(r"^```(\w*)$", re.MULTILINE)


@pytest.mark.parametrize("page", sorted(SECTIONS_RUN))
def test_every_sh_block_lies_in_a_section_a_tier_runs(page: str) -> None:
    run = sum(len(sh_blocks(DOCS / page, section)) for section in SECTIONS_RUN[page])
    assert run == len(sh_blocks(DOCS / page))


@pytest.mark.parametrize("page", PAGES_WITH_CONSOLE_BLOCKS_ONLY, ids=lambda p: p.name)
def test_pages_checked_in_the_unit_tier_have_no_sh_blocks(page: Path) -> None:
    assert sh_blocks(page) == []


def test_the_quick_start_has_no_unchecked_output() -> None:
    assert console_blocks(DOCS / "quickstart.md") == []


def test_the_only_python_block_of_the_quick_start_is_the_sdk_one_the_local_tier_runs() -> None:
    languages = FENCE.findall(section_text(DOCS / "quickstart.md"))[::2]
    assert languages.count("python") == 1
    assert "```python" in section_text(DOCS / "quickstart.md", QUICKSTART_SDK)


@pytest.mark.parametrize(
    "page",
    [DOCS / "quickstart.md", DOCS / "operations.md", *PAGES_WITH_CONSOLE_BLOCKS_ONLY],
    ids=lambda p: p.name,
)
def test_every_fence_is_one_the_tests_run(page: Path) -> None:
    """A ```bash or unlabelled block would show commands no test runs. A ```text block shows output a test
    checks line by line (operations.md's diagnosis examples: test_diagnosis_examples.py)."""
    languages = set(FENCE.findall(page.read_text())[::2])
    assert languages <= {"sh", "console", "python", "text"}
