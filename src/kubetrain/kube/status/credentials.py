"""The endpoint's TLS credentials as the operator keeps them in a Secret, and how they are renewed.

Every operator replica serves the same certificate, so the credentials live in one Secret in the operator's
namespace, created by whichever replica comes first and read by all. Reporters trust a CA they read from a
projected ConfigMap, which the kubelet refreshes a minute or so after it changes: a new CA cannot be served
the moment it exists. Renewal therefore goes in two steps, each one resourceVersion-guarded update:

1. ``needs_renewal``: a new CA and serving certificate are made and stored as the *next* credentials; the CA
   bundle reporters get (current + next) now trusts both, while the current certificate is still served;
2. ``PROMOTE_AFTER`` later, time for every namespace's ConfigMap and every pod's volume to have the bundle,
   the next credentials become the current ones; the old CA stays in the bundle until it expires, so a pod
   whose volume is late still trusts it.

A certificate that does not cover the names reporters use (the Service's DNS names, ``--status-server-url``'s
host) is replaced at once: reporters could not verify it anyway.

Pure: the keeper (``keeper.py``) does the reading and writing.
"""

from __future__ import annotations

import base64
import binascii
import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography import x509

from kubetrain.progress.credentials import TlsCredentials, issue

PROMOTE_AFTER = datetime.timedelta(minutes=10)
"""From publishing the next CA to serving a certificate it signed: a ConfigMap update reaches a projected
volume within about a minute (the kubelet's sync period plus its cache), the leader republishes within
``keeper.RELOAD_PERIOD``; ten minutes leaves room for a busy kubelet."""
NEXT_SINCE_ANNOTATION = "kubetrain.dev/next-credentials-since"
_FIELDS = {"ca_cert": "ca.crt", "ca_key": "ca.key", "cert": "tls.crt", "key": "tls.key"}
_NEXT = "next-"
PREVIOUS_CA_KEY = "previous-ca.crt"


class UnreadableSecretError(ValueError):
    """The Secret does not hold credentials this operator wrote (edited, or another program's)."""


@dataclass(frozen=True)
class StoredCredentials:
    current: TlsCredentials
    """What every replica serves."""
    next: TlsCredentials | None = None
    """Renewed credentials, published in the CA bundle and served once ``PROMOTE_AFTER`` has passed."""
    next_since: datetime.datetime | None = None
    previous_ca: str | None = None
    """The CA before the last promotion, trusted until it expires (pods whose volume is behind)."""

    def ca_bundle(self, now: datetime.datetime) -> str:
        """The CA certificates reporters trust: current, next, and the previous one while it is valid."""
        bundle = [self.current.ca_cert]
        if self.next is not None:
            bundle.append(self.next.ca_cert)
        if self.previous_ca is not None and _valid(self.previous_ca, now):
            bundle.append(self.previous_ca)
        return "".join(bundle)


def renewed(
    stored: StoredCredentials | None, names: Sequence[str], now: datetime.datetime
) -> StoredCredentials | None:
    """What the Secret should hold instead of ``stored``; None when it is right as it is."""
    if stored is None:
        return StoredCredentials(issue(names, now))
    if not stored.current.covers(names):
        return StoredCredentials(issue(names, now), previous_ca=_still_valid(stored.current.ca_cert, now))
    if stored.next is not None and stored.next_since is not None and now - stored.next_since >= PROMOTE_AFTER:
        if stored.next.covers(names):
            return StoredCredentials(stored.next, previous_ca=_still_valid(stored.current.ca_cert, now))
        return StoredCredentials(stored.current, previous_ca=stored.previous_ca)  # names changed since
    if stored.next is None and stored.current.needs_renewal(now):
        return StoredCredentials(
            stored.current, issue(names, now), now, _still_valid(stored.previous_ca, now)
        )
    if stored.previous_ca is not None and not _valid(stored.previous_ca, now):
        return StoredCredentials(stored.current, stored.next, stored.next_since)
    return None


def _valid(pem: str, now: datetime.datetime) -> bool:
    return x509.load_pem_x509_certificate(pem.encode()).not_valid_after_utc > now


def _still_valid(pem: str | None, now: datetime.datetime) -> str | None:
    return pem if pem is not None and _valid(pem, now) else None


# --- the Secret ------------------------------------------------------------------------------------


def secret_data(stored: StoredCredentials) -> dict[str, str]:
    """The Secret's ``data``: base64 PEM, the current credentials under the usual kubernetes.io/tls keys."""
    text: dict[str, str] = {key: getattr(stored.current, field) for field, key in _FIELDS.items()}
    if stored.next is not None:
        text.update({_NEXT + key: getattr(stored.next, field) for field, key in _FIELDS.items()})
    if stored.previous_ca is not None:
        text[PREVIOUS_CA_KEY] = stored.previous_ca
    return {key: base64.b64encode(value.encode()).decode() for key, value in text.items()}


def secret_annotations(stored: StoredCredentials) -> dict[str, str]:
    if stored.next_since is None:
        return {}
    return {NEXT_SINCE_ANNOTATION: stored.next_since.astimezone(datetime.UTC).isoformat()}


def from_secret(secret: Mapping[str, Any]) -> StoredCredentials:
    """The credentials a Secret holds; ``UnreadableSecretError`` saying what is wrong otherwise."""
    raw = secret.get("data") or {}
    try:
        text = {str(key): base64.b64decode(str(value), validate=True).decode() for key, value in raw.items()}
    except (binascii.Error, UnicodeDecodeError) as error:
        raise UnreadableSecretError(f"a value is not base64 PEM text: {error}") from None
    current = _credentials(text, "")
    if current is None:
        raise UnreadableSecretError(f"it lacks one of {', '.join(_FIELDS.values())}")
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    since = _time(annotations.get(NEXT_SINCE_ANNOTATION))
    following = _credentials(text, _NEXT)
    return StoredCredentials(
        current=current,
        next=following if since is not None else None,
        next_since=since if following is not None else None,
        previous_ca=text.get(PREVIOUS_CA_KEY),
    )


def _credentials(text: Mapping[str, str], prefix: str) -> TlsCredentials | None:
    values = {field: text.get(prefix + key) for field, key in _FIELDS.items()}
    if any(value is None for value in values.values()):
        return None
    credentials = TlsCredentials(**{field: str(value) for field, value in values.items()})
    try:
        credentials.expires()
    except ValueError as error:
        if prefix:
            return None  # a damaged renewal is made again
        raise UnreadableSecretError(f"its certificates do not parse: {error}") from None
    return credentials


def _time(value: object) -> datetime.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=datetime.UTC)
