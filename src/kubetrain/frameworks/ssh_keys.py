"""The SSH key pair of an MPIJob v2beta1's ``<job>-ssh`` Secret (§2.8), for both substrates.

A fresh ECDSA P-521 pair per job, as mpi-operator makes: the private key as a PEM ``EC PRIVATE KEY``,
the public key as an OpenSSH ``authorized_keys`` line. The operator puts it in the Secret's data
(``kube/ssh.py``); a container run writes it into the files the Secret volume would hold. Nothing
here logs the private key.
"""

from __future__ import annotations

SSH_AUTH_TYPE = "kubernetes.io/ssh-auth"
PRIVATE_KEY = "ssh-privatekey"
PUBLIC_KEY = "ssh-publickey"
KEY_SET = frozenset({PRIVATE_KEY, PUBLIC_KEY})


def new_key_pair() -> dict[str, bytes]:
    """``ssh-privatekey`` and ``ssh-publickey`` of a freshly generated ECDSA P-521 key."""
    # Imported here: cryptography costs a CLI start 0.05 s and more, and only an MPI v2 run makes keys.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP521R1())
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return {PRIVATE_KEY: private, PUBLIC_KEY: public}
