"""Kubernetes resource quantities (``500m``, ``1Gi``, ``2``): parse, add, and print canonically.

Needed to compute a PodGroup's ``minResources`` as upstream does (the sum of pod requests).
"""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

_SUFFIXES: dict[str, Fraction] = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")


def parse_quantity(value: str | int | float) -> Fraction:
    """The exact value of a quantity; raises ``ValueError`` naming the bad input."""
    match = _QUANTITY.match(str(value).strip())
    if not match or match.group(2) not in _SUFFIXES:
        raise ValueError(f"invalid resource quantity {value!r}: expected a number with an optional suffix")
    return Fraction(Decimal(match.group(1))) * _SUFFIXES[match.group(2)]


def format_quantity(value: Fraction) -> str:
    """Whole numbers plainly, otherwise in milli-units (``1500m``), as Kubernetes prints CPU."""
    if value.denominator == 1:
        return str(value.numerator)
    milli = value * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return str(float(value))


def add_resources(total: dict[str, Fraction], resources: dict[str, str | int]) -> None:
    for name, quantity in resources.items():
        total[name] = total.get(name, Fraction(0)) + parse_quantity(quantity)


_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def quantity_format(value: str | int | float) -> str:
    """The format Kubernetes keeps for a quantity as written: ``BinarySI`` (``Ki``...), ``DecimalExponent``
    (``1e3``) or ``DecimalSI``."""
    text = str(value).strip()
    if text.endswith("i"):
        return "BinarySI"
    if re.search(r"[eE][+-]?[0-9]+$", text):
        return "DecimalExponent"
    return "DecimalSI"


def canonical_quantity(value: Fraction, format_: str = "DecimalSI") -> str:
    """A quantity as Kubernetes' Go ``resource.Quantity.String()`` prints it in ``format_`` (the format of the
    first quantity summed): ``2Gi``, ``1500m``, ``2k``, ``1536``. Amounts below a nano round up to one."""
    if value == 0:
        return "0"
    if format_ == "BinarySI" and not -1024 < value < 1024 and value.denominator == 1:
        number, power = value.numerator, 0
        while number % 1024 == 0 and power < len(_BINARY_SUFFIXES) - 1:
            number, power = number // 1024, power + 1
        return f"{number}{_BINARY_SUFFIXES[power]}"
    nanos = value * 10**9
    units = -((-nanos.numerator) // nanos.denominator) if value > 0 else nanos.numerator // nanos.denominator
    scale = -9
    while units != 0 and units % 10 == 0:
        units, scale = units // 10, scale + 1
    exponent = (scale // 3) * 3
    mantissa = units * 10 ** (scale - exponent)
    if format_ == "DecimalExponent":
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    if exponent > 18:
        mantissa, exponent = mantissa * 10 ** (exponent - 18), 18
    return f"{mantissa}{_DECIMAL_SUFFIXES[exponent]}"
