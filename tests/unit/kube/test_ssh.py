"""The MPIJob v2beta1 SSH Secret's key pair (§2.8)."""

from __future__ import annotations

import base64

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from kubetrain.kube.ssh import PRIVATE_KEY, PUBLIC_KEY, SSH_AUTH_TYPE, needs_keys, with_keys

EMPTY_SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pi-ssh"}, "type": SSH_AUTH_TYPE}


def _decoded(secret: dict[str, object], key: str) -> bytes:
    data = secret["data"]
    assert isinstance(data, dict)
    return base64.b64decode(data[key])


def test_the_private_key_is_a_pem_ec_private_key_on_p521() -> None:
    pem = _decoded(with_keys(EMPTY_SECRET), PRIVATE_KEY)
    assert pem.startswith(b"-----BEGIN EC PRIVATE KEY-----")
    key = serialization.load_pem_private_key(pem, password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    assert key.curve.name == "secp521r1"


def test_the_public_key_is_the_authorized_keys_line_of_the_private_key() -> None:
    secret = with_keys(EMPTY_SECRET)
    private = serialization.load_pem_private_key(_decoded(secret, PRIVATE_KEY), password=None)
    expected = private.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    assert _decoded(secret, PUBLIC_KEY) == expected
    assert expected.startswith(b"ecdsa-sha2-nistp521 ")


def test_every_secret_gets_its_own_key_pair() -> None:
    assert _decoded(with_keys(EMPTY_SECRET), PRIVATE_KEY) != _decoded(with_keys(EMPTY_SECRET), PRIVATE_KEY)


def test_a_secret_with_the_key_pair_keeps_it() -> None:
    assert not needs_keys(with_keys(EMPTY_SECRET))


def test_a_secret_whose_key_set_differs_is_given_new_keys() -> None:
    assert needs_keys(EMPTY_SECRET)
    assert needs_keys({**EMPTY_SECRET, "data": {PRIVATE_KEY: "eA=="}})


def test_other_secrets_are_left_alone() -> None:
    assert not needs_keys({"kind": "Secret", "type": "Opaque"})
