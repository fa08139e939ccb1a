"""Resource quantities add exactly, whatever their suffixes."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kubetrain.api.quantity import add_resources, format_quantity, parse_quantity


def test_milli_and_binary_suffixes_parse_to_exact_values() -> None:
    assert parse_quantity("500m") == Fraction(1, 2)
    assert parse_quantity("1Gi") == 2**30
    assert parse_quantity(2) == 2


def test_cpu_sums_print_in_milli_units_when_fractional() -> None:
    total: dict[str, Fraction] = {}
    add_resources(total, {"cpu": "500m"})
    add_resources(total, {"cpu": "1"})
    assert format_quantity(total["cpu"]) == "1500m"


def test_an_invalid_quantity_is_named_in_the_error() -> None:
    with pytest.raises(ValueError, match="'12 apples'"):
        parse_quantity("12 apples")
