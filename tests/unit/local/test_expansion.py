"""``$(VAR)`` expansion behaves exactly like the kubelet's (``third_party/forked/golang/expansion``)."""

from __future__ import annotations

from kubetrain.local.expansion import expand

VARS = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "EMPTY": ""}


def test_a_reference_to_a_defined_variable_is_replaced() -> None:
    assert expand("tcp://$(MASTER_ADDR):$(MASTER_PORT)", VARS) == "tcp://127.0.0.1:29500"


def test_a_reference_to_an_unknown_variable_is_left_as_written() -> None:
    assert expand("--dir=$(NOT_DEFINED)/x", VARS) == "--dir=$(NOT_DEFINED)/x"


def test_a_doubled_dollar_escapes_a_reference() -> None:
    assert expand("$$(MASTER_ADDR)", VARS) == "$(MASTER_ADDR)"


def test_a_doubled_dollar_alone_becomes_one_dollar() -> None:
    assert expand("cost: $$5", VARS) == "cost: $5"


def test_a_dollar_not_followed_by_a_parenthesis_is_kept() -> None:
    assert expand("$HOME and $MASTER_ADDR", VARS) == "$HOME and $MASTER_ADDR"


def test_an_unclosed_reference_is_kept() -> None:
    assert expand("$(MASTER_ADDR", VARS) == "$(MASTER_ADDR"


def test_a_trailing_dollar_is_kept() -> None:
    assert expand("price$", VARS) == "price$"


def test_a_variable_may_expand_to_the_empty_string() -> None:
    assert expand("a$(EMPTY)b", VARS) == "ab"


def test_expanded_values_are_not_expanded_again() -> None:
    assert expand("$(X)", {"X": "$(MASTER_ADDR)"}) == "$(MASTER_ADDR)"
