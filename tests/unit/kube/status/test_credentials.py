"""The endpoint's credentials in their Secret: issued once, renewed in two steps so reporters trust the new
CA before it is served, replaced at once when they do not cover the names reporters use."""

from __future__ import annotations

import datetime

import pytest

from kubetrain.kube.status.credentials import (
    PROMOTE_AFTER,
    StoredCredentials,
    UnreadableSecretError,
    from_secret,
    renewed,
    secret_annotations,
    secret_data,
)
from kubetrain.progress.credentials import issue

NAMES = ["training-operator-status.kubeflow.svc", "training-operator-status"]
NOW = datetime.datetime(2026, 11, 25, 12, 0, tzinfo=datetime.UTC)
DAY = datetime.timedelta(days=1)


def _as_secret(stored: StoredCredentials) -> dict[str, object]:
    return {"metadata": {"annotations": secret_annotations(stored)}, "data": secret_data(stored)}


def test_without_a_secret_a_ca_and_a_certificate_for_the_names_are_issued() -> None:
    stored = renewed(None, NAMES, NOW)
    assert stored is not None
    assert stored.current.covers(NAMES)
    assert stored.next is None
    assert stored.ca_bundle(NOW) == stored.current.ca_cert


def test_credentials_far_from_expiry_are_left_as_they_are() -> None:
    assert renewed(StoredCredentials(issue(NAMES, NOW)), NAMES, NOW + 10 * DAY) is None


def test_credentials_due_for_renewal_get_a_successor_that_is_published_before_it_is_served() -> None:
    current = issue(NAMES, NOW - 70 * DAY)  # the serving certificate has 20 days left
    stored = renewed(StoredCredentials(current), NAMES, NOW)
    assert stored is not None and stored.next is not None
    assert stored.current == current, "still served"
    assert stored.next_since == NOW
    assert stored.ca_bundle(NOW) == current.ca_cert + stored.next.ca_cert


def test_the_successor_is_not_served_before_reporters_have_had_time_to_trust_it() -> None:
    pending = StoredCredentials(issue(NAMES, NOW - 70 * DAY), issue(NAMES, NOW), NOW)
    assert renewed(pending, NAMES, NOW + PROMOTE_AFTER - datetime.timedelta(seconds=1)) is None


def test_the_successor_is_served_after_the_delay_and_the_old_ca_stays_trusted() -> None:
    old, new = issue(NAMES, NOW - 70 * DAY), issue(NAMES, NOW)
    promoted = renewed(StoredCredentials(old, new, NOW), NAMES, NOW + PROMOTE_AFTER)
    assert promoted == StoredCredentials(new, previous_ca=old.ca_cert)
    assert promoted.ca_bundle(NOW + PROMOTE_AFTER) == new.ca_cert + old.ca_cert


def test_an_expired_previous_ca_leaves_the_bundle() -> None:
    expired_ca = issue(NAMES, NOW - 400 * DAY).ca_cert
    current = issue(NAMES, NOW)
    assert renewed(StoredCredentials(current, previous_ca=expired_ca), NAMES, NOW) == StoredCredentials(
        current
    )


def test_a_certificate_that_misses_a_name_is_replaced_at_once() -> None:
    old = issue(NAMES, NOW)
    names = [*NAMES, "10.0.0.5"]
    replaced = renewed(StoredCredentials(old), names, NOW)
    assert replaced is not None
    assert replaced.current.covers(names)
    assert replaced.previous_ca == old.ca_cert


def test_the_secret_holds_the_current_next_and_previous_credentials() -> None:
    stored = StoredCredentials(issue(NAMES, NOW), issue(NAMES, NOW), NOW, issue(NAMES, NOW).ca_cert)
    secret = _as_secret(stored)
    data = secret["data"]
    assert isinstance(data, dict)
    assert {"ca.crt", "ca.key", "tls.crt", "tls.key", "next-tls.crt", "previous-ca.crt"} <= set(data)
    assert from_secret(secret) == stored


def test_a_secret_without_a_key_is_unreadable_and_says_which_keys_it_needs() -> None:
    secret = _as_secret(StoredCredentials(issue(NAMES, NOW)))
    data = secret["data"]
    assert isinstance(data, dict)
    del data["tls.key"]
    with pytest.raises(UnreadableSecretError, match=r"ca\.crt, ca\.key, tls\.crt, tls\.key"):
        from_secret(secret)


def test_a_secret_with_text_that_is_not_base64_is_unreadable() -> None:
    with pytest.raises(UnreadableSecretError, match="base64"):
        from_secret({"data": {"ca.crt": "not base64!"}})


def test_a_name_longer_than_a_common_name_may_be_still_gets_credentials() -> None:
    names = [f"training-operator-status.{'a-long-namespace-name-' * 3}.svc"]
    stored = renewed(None, names, NOW)
    assert stored is not None and stored.current.covers(names)
