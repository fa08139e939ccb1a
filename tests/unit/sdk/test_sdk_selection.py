"""Pod selection and label selectors, as upstream selects pods (with replica types in any case)."""

from __future__ import annotations

import pytest

from kubetrain.sdk.client import KNOWN_CONDITIONS, pod_labels
from kubetrain.sdk.selectors import matches


def test_pods_are_selected_by_job_name() -> None:
    assert pod_labels("j", False, None, None) == {"training.kubeflow.org/job-name": "j"}


def test_replica_type_is_accepted_in_any_case() -> None:
    assert pod_labels("j", False, "Worker", 1) == {
        "training.kubeflow.org/job-name": "j",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "1",
    }


def test_the_master_is_selected_by_its_job_role() -> None:
    assert pod_labels("j", True, None, None)["training.kubeflow.org/job-role"] == "master"


def test_an_unknown_replica_type_is_a_value_error_listing_the_known_ones() -> None:
    with pytest.raises(ValueError, match="known: chief"):
        pod_labels("j", False, "driver", None)


def test_suspended_is_a_known_condition() -> None:
    assert "Suspended" in KNOWN_CONDITIONS


@pytest.mark.parametrize(
    ("selector", "expected"),
    [("team=a", True), ("team=b", False), ("team!=b", True), ("team", True), ("!team", False), ("", True)],
)
def test_label_selectors_match_equality_and_existence(selector: str, expected: bool) -> None:
    assert matches(selector, {"team": "a"}) is expected


def test_set_based_selectors_are_refused_with_the_supported_forms() -> None:
    with pytest.raises(ValueError, match="use key=value"):
        matches("team in (a,b)", {"team": "a"})
