"""Expectations (upstream-behaviour.md §4.8): in-flight creations and deletions hold a reconcile back."""

from __future__ import annotations

from kubetrain.kube.runtime.expectations import Expectations, expectation_key


class Ticker:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


KEY = "ns/mnist/worker/pods"


def test_a_key_never_expected_is_satisfied() -> None:
    assert Expectations().satisfied(KEY)


def test_expected_creations_are_unsatisfied_until_each_is_observed() -> None:
    expectations = Expectations()
    expectations.expect_creations(KEY, 2)
    expectations.creation_observed(KEY)
    assert not expectations.satisfied(KEY)
    expectations.creation_observed(KEY)
    assert expectations.satisfied(KEY)


def test_expected_deletions_are_unsatisfied_until_each_is_observed() -> None:
    expectations = Expectations()
    expectations.expect_deletions(KEY)
    assert not expectations.satisfied(KEY)
    expectations.deletion_observed(KEY)
    assert expectations.satisfied(KEY)


def test_creations_and_deletions_must_both_be_observed() -> None:
    expectations = Expectations()
    expectations.expect_creations(KEY)
    expectations.expect_deletions(KEY)
    expectations.creation_observed(KEY)
    assert not expectations.satisfied(KEY)
    assert expectations.pending(KEY) == (0, 1)


def test_raising_a_pending_key_adds_to_what_is_in_flight() -> None:
    expectations = Expectations()
    expectations.expect_creations(KEY)
    expectations.expect_creations(KEY)
    assert expectations.pending(KEY) == (2, 0)


def test_a_failed_create_stops_being_expected() -> None:
    expectations = Expectations()
    expectations.expect_creations(KEY, 2)
    expectations.creation_observed(KEY)
    expectations.lower_on_error(KEY, creations=1)
    assert expectations.satisfied(KEY)


def test_unfulfilled_expectations_expire_after_five_minutes() -> None:
    clock = Ticker()
    expectations = Expectations(clock=clock)
    expectations.expect_creations(KEY)
    clock.now += 300
    assert not expectations.satisfied(KEY)
    clock.now += 0.001
    assert expectations.satisfied(KEY)


def test_raising_a_pending_key_does_not_postpone_its_expiry() -> None:
    clock = Ticker()
    expectations = Expectations(clock=clock)
    expectations.expect_creations(KEY)
    clock.now += 200
    expectations.expect_creations(KEY)
    clock.now += 101
    assert expectations.satisfied(KEY)


def test_a_new_batch_after_a_fulfilled_one_starts_a_fresh_timeout() -> None:
    clock = Ticker()
    expectations = Expectations(clock=clock)
    expectations.expect_creations(KEY)
    expectations.creation_observed(KEY)
    clock.now += 400
    expectations.expect_creations(KEY)
    assert not expectations.satisfied(KEY)


def test_reset_expects_nothing() -> None:
    expectations = Expectations()
    expectations.expect_creations(KEY, 3)
    expectations.reset(KEY)
    assert expectations.satisfied(KEY)
    assert expectations.pending(KEY) == (0, 0)


def test_observing_an_unexpected_key_changes_nothing() -> None:
    expectations = Expectations()
    expectations.creation_observed(KEY)
    expectations.expect_creations(KEY)
    assert not expectations.satisfied(KEY)


def test_delete_prefix_forgets_every_key_of_a_job() -> None:
    expectations = Expectations()
    expectations.expect_creations("ns/mnist/worker/pods")
    expectations.expect_creations("ns/mnist/master/services")
    expectations.expect_creations("ns/other/worker/pods")
    expectations.delete_prefix("ns/mnist/")
    assert expectations.satisfied("ns/mnist/worker/pods")
    assert expectations.satisfied("ns/mnist/master/services")
    assert not expectations.satisfied("ns/other/worker/pods")


def test_keys_follow_upstream_naming_with_a_lowercase_replica_type() -> None:
    assert expectation_key("ns/mnist", "Worker", "pods") == "ns/mnist/worker/pods"
