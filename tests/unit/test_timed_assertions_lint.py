"""`make lint` refuses a test that asserts a measured duration against an upper bound (tools/lint/
timed_assertions.py): load only makes things slower, so such a test fails on a busy machine, not on a bug."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from scripts import load_script

if TYPE_CHECKING:
    import timed_assertions
else:
    timed_assertions = load_script("tools/lint/timed_assertions.py", "timed_assertions")


def refused(test_body: str) -> list[str]:
    """The refused lines of a test function with this body, as written."""
    source = "import time\n\n\ndef test_something(self, started, deadline):\n" + textwrap.indent(
        textwrap.dedent(test_body), "    "
    )
    return [finding.source for finding in timed_assertions.check_source(source)]


# What it refuses.


def test_an_upper_bound_on_what_a_name_says_took_is_refused() -> None:
    assert refused("assert took < 5") == ["assert took < 5"]


@pytest.mark.parametrize(
    "name",
    [
        "elapsed",
        "delay",
        "duration",
        "latency",
        "lag",
        "reporting_took",
        "take_over_delay",
        "firstByteLatency",
    ],
)
def test_a_name_with_a_duration_word_among_its_parts_is_a_measured_duration(name: str) -> None:
    assert refused(f"assert {name} <= 2.0") == [f"assert {name} <= 2.0"]


def test_an_attribute_with_a_duration_word_is_a_measured_duration() -> None:
    assert refused("assert result.elapsed < 1") == ["assert result.elapsed < 1"]


def test_a_bound_computed_from_constants_is_still_a_bound() -> None:
    assert refused("assert elapsed <= LIMIT + 1") == ["assert elapsed <= LIMIT + 1"]


def test_the_message_of_an_assertion_does_not_excuse_it() -> None:
    assert refused('assert delay < 5, "shown late"') == ['assert delay < 5, "shown late"']


@pytest.mark.parametrize(
    "clock",
    [
        "time.monotonic()",
        "time.time()",
        "time.perf_counter()",
        "monotonic()",
        "asyncio.get_running_loop().time()",
        "loop.time()",
    ],
)
def test_a_clock_reading_minus_a_start_is_a_measured_duration(clock: str) -> None:
    assert refused(f"assert {clock} - started < 3") == [f"assert {clock} - started < 3"]


def test_the_seconds_of_now_minus_a_start_are_a_measured_duration() -> None:
    assertion = "assert (datetime.now(UTC) - started).total_seconds() < 3"
    assert refused(assertion) == [assertion]


def test_the_difference_of_two_clock_readings_is_a_measured_duration() -> None:
    body = """
        start = time.perf_counter()
        run()
        end = time.perf_counter()
        assert (end - start) < 2.0
    """
    assert refused(body) == ["assert (end - start) < 2.0"]


def test_a_name_assigned_from_a_clock_reading_minus_a_start_is_a_measured_duration() -> None:
    body = """
        waited = time.monotonic() - started
        assert waited < 2
    """
    assert refused(body) == ["assert waited < 2"]


def test_a_nested_function_sees_the_clock_readings_of_the_function_around_it() -> None:
    body = """
        begun = time.monotonic()

        def check():
            assert time.monotonic() - begun < 2
    """
    assert refused(body) == ["assert time.monotonic() - begun < 2"]


@pytest.mark.parametrize("assertion", ["assert 5 > took", "assert LIMIT >= took"])
def test_an_upper_bound_written_bound_first_is_refused(assertion: str) -> None:
    assert refused(assertion) == [assertion]


def test_a_range_with_an_upper_bound_is_refused() -> None:
    assert refused("assert 1 <= took < 5") == ["assert 1 <= took < 5"]


def test_an_upper_bound_joined_to_other_conditions_is_refused() -> None:
    assert refused("assert done and took < 5") == ["assert done and took < 5"]


@pytest.mark.parametrize(
    "call",
    [
        "self.assertLess(took, 5)",
        "self.assertLessEqual(took, 5)",
        "self.assertGreater(5, took)",
        "self.assertGreaterEqual(5, took)",
    ],
)
def test_unittest_upper_bounds_are_refused(call: str) -> None:
    assert refused(call) == [call]


# What it leaves alone.


@pytest.mark.parametrize(
    "assertion",
    ["assert took >= 10", "assert 10 <= took", "assert took > 10", "self.assertGreaterEqual(took, 10)"],
)
def test_a_lower_bound_on_a_duration_is_allowed(assertion: str) -> None:
    assert refused(assertion) == []


@pytest.mark.parametrize(
    "assertion", ["assert len(jobs) < 5", "assert step < total", "assert end - start < 2", "assert flags < 3"]
)
def test_sizes_counts_and_positions_are_not_durations(assertion: str) -> None:
    assert refused(assertion) == []


def test_waiting_for_a_deadline_is_not_a_measured_duration() -> None:
    assert refused("assert time.monotonic() < deadline") == []


def test_a_duration_on_the_bound_side_is_allowed() -> None:
    assert refused("assert reviewed <= 100 + 50 * elapsed + 1") == []


def test_a_configured_constant_is_not_a_measured_duration() -> None:
    assert refused("assert RETRY_DELAY < LEASE_DURATION") == []


def test_equality_with_a_duration_is_allowed() -> None:
    assert refused("assert delays == [0.005, 0.01]\nassert lease.lease_duration_seconds == 15") == []


def test_a_clock_reading_of_another_function_is_not_a_clock_reading_here() -> None:
    source = textwrap.dedent(
        """
        def first():
            end = time.monotonic()

        def second(end, start):
            assert end - start < 2
        """
    )
    assert timed_assertions.check_source(source) == []


# The command.


def test_the_command_lists_each_refused_assertion_with_its_place_and_the_fix_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "tier").mkdir()
    (tmp_path / "tier" / "test_slow.py").write_text("def test_fast(took):\n    assert took < 5\n")
    (tmp_path / "test_fine.py").write_text("def test_sizes(jobs):\n    assert len(jobs) < 5\n")

    assert timed_assertions.main([str(tmp_path)]) == 1

    listed = capsys.readouterr().out.splitlines()
    assert listed[0].startswith(f"{tmp_path / 'tier' / 'test_slow.py'}:2: assert took < 5 — ")
    assert all(fix in listed[0] for fix in ("tests/waiting.py", "timestamps", "bench/", "docs/benchmarks.md"))
    assert listed[1:] == ["1 timed assertion(s)"]


def test_the_command_passes_a_tree_without_timed_assertions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "test_fine.py").write_text("def test_slow_enough(took):\n    assert took >= 10\n")

    assert timed_assertions.main([str(tmp_path)]) == 0
    assert capsys.readouterr().out == ""


def test_the_command_fails_on_a_file_it_cannot_parse_and_says_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "test_broken.py").write_text("def test_half_written(:\n")

    assert timed_assertions.main([str(tmp_path)]) == 1
    assert capsys.readouterr().out.startswith(
        f"{tmp_path / 'test_broken.py'}:1: not checked, it does not parse"
    )
