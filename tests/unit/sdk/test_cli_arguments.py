"""How the commands read their arguments: kinds and names, durations, conditions; and help with examples."""

from __future__ import annotations

import pytest
import typer
from typer.main import get_command

from kubetrain.cli.jobs import complete_kind, split_kind_and_name
from kubetrain.cli.main import app
from kubetrain.cli.wait import parse_condition, parse_duration

JOB_COMMANDS = ["submit", "get", "describe", "logs", "wait", "delete", "suspend", "resume", "scale"]


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("10m", 600), ("1h30m", 5400), ("90", 90)])
def test_durations_are_read_as_kubectl_reads_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_a_malformed_duration_names_the_accepted_forms() -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("ten minutes")


def test_for_takes_condition_equals_type_in_any_first_letter_case() -> None:
    assert parse_condition("condition=succeeded") == "Succeeded"


def test_kind_slash_name_is_split() -> None:
    kind, name = split_kind_and_name("tfjobs/mnist", None)
    assert (kind.kind if kind else None, name) == ("TFJob", "mnist")


def test_a_lone_word_that_is_no_kind_is_a_name() -> None:
    assert split_kind_and_name("mnist", None) == (None, "mnist")


def test_an_unknown_kind_before_a_name_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown job kind 'sparkjob'"):
        split_kind_and_name("sparkjob", "x")


@pytest.mark.parametrize("command", JOB_COMMANDS)
def test_every_job_command_has_an_example_and_a_local_flag(command: str) -> None:
    group = get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    click_command = group.commands[command]
    assert "Example: kubetrain " + command in (click_command.help or "")
    assert any("--local" in p.opts for p in click_command.params)


def test_kind_completion_offers_the_plurals_that_match() -> None:
    assert complete_kind("py") == ["pytorchjobs"]
    assert "tfjobs" in complete_kind("")
