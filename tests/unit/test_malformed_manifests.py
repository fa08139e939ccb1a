"""Malformed input never crashes ``load → admit → plan``: a plan, or an InvalidJobError naming the field.

The manifests are the example manifests and rich builder manifests of every kind, mutated at any
depth (``tests/malformed.py``). Derandomized, so every run (and CI) checks the same cases; each test
runs 1,000 of them per target (2,000 in all: about 14 s of CPU).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from malformed import BASES, TARGETS, malformed_manifests, outcome

CASES = settings(
    max_examples=1000,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_every_unmutated_base_manifest_is_planned(target: str) -> None:
    import yaml

    for document in BASES:
        assert outcome(yaml.safe_dump(document), target) == "accepted"


@CASES
@given(text=malformed_manifests())
def test_a_malformed_manifest_is_planned_or_refused_naming_the_field_for_kubernetes(text: str) -> None:
    outcome(text, "kubernetes")


@CASES
@given(text=malformed_manifests())
def test_a_malformed_manifest_is_planned_or_refused_naming_the_field_locally(text: str) -> None:
    outcome(text, "local")
