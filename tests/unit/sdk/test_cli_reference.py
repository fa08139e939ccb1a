"""docs/cli.md is the job commands' help, regenerated whenever a command changes."""

from __future__ import annotations

from pathlib import Path

from kubetrain.cli.reference import FILE_COMMANDS, JOB_COMMANDS, render

CLI_REFERENCE = Path(__file__).resolve().parents[3] / "docs" / "cli.md"


def test_the_cli_reference_is_current() -> None:
    assert CLI_REFERENCE.read_text() == render(), "docs/cli.md is stale: run `make docs`"


def test_the_reference_has_a_section_and_an_example_for_every_job_command() -> None:
    text = render()
    for command in (*JOB_COMMANDS, *FILE_COMMANDS):
        section = text.split(f"## kubetrain {command}\n")[1].split("\n## ")[0]
        assert f"Example: kubetrain {command}" in section
