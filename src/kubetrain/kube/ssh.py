"""The SSH key pair of an MPIJob v2beta1's ``<job>-ssh`` Secret (§2.8).

A fresh ECDSA P-521 pair per job, as mpi-operator makes: the private key as a PEM ``EC PRIVATE KEY``,
the public key as an OpenSSH ``authorized_keys`` line. The private key only ever goes into the Secret's
data; nothing here logs it.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

SSH_AUTH_TYPE = "kubernetes.io/ssh-auth"
PRIVATE_KEY = "ssh-privatekey"
PUBLIC_KEY = "ssh-publickey"
KEY_SET = frozenset({PRIVATE_KEY, PUBLIC_KEY})


def new_key_pair() -> dict[str, bytes]:
    """``ssh-privatekey`` and ``ssh-publickey`` of a freshly generated ECDSA P-521 key."""
    key = ec.generate_private_key(ec.SECP521R1())
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return {PRIVATE_KEY: private, PUBLIC_KEY: public}


def needs_keys(secret: Mapping[str, Any]) -> bool:
    """An SSH-auth Secret whose data is not exactly the key pair (missing, or a different key set)."""
    if secret.get("type") != SSH_AUTH_TYPE:
        return False
    return set((secret.get("data") or {}).keys()) != KEY_SET


def with_keys(secret: Mapping[str, Any]) -> dict[str, Any]:
    """``secret`` with a fresh key pair as its data (base64, as the API expects ``data``)."""
    data = {name: base64.b64encode(value).decode() for name, value in new_key_pair().items()}
    return {**secret, "data": data}
