"""What a kubelet would do when a replica's process exits: the pure rules the supervisor follows."""

from __future__ import annotations

from kubetrain.local.process import InPlaceRestart, exit_code_of


def test_death_by_signal_is_reported_as_128_plus_the_signal() -> None:
    assert exit_code_of(-9) == 137
    assert exit_code_of(-15) == 143


def test_a_normal_exit_code_is_reported_as_is() -> None:
    assert exit_code_of(3) == 3


def test_always_restarts_even_after_success() -> None:
    assert InPlaceRestart.ALWAYS.restarts_after(0)


def test_on_failure_restarts_after_a_non_zero_exit_only() -> None:
    assert InPlaceRestart.ON_FAILURE.restarts_after(1)
    assert not InPlaceRestart.ON_FAILURE.restarts_after(0)


def test_never_leaves_the_process_exited_for_the_engine_to_decide() -> None:
    # ExitCode replicas run with pod policy Never: the engine recreates them on codes >= 128.
    assert not InPlaceRestart.NEVER.restarts_after(137)
