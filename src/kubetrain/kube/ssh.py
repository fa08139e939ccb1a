"""The SSH key pair of an MPIJob v2beta1's ``<job>-ssh`` Secret (§2.8).

The pair is ``frameworks/ssh_keys.py``'s (a container run generates the same for its Secret volumes);
here it goes into the Secret's data, and nowhere else: nothing here logs it.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from kubetrain.frameworks.ssh_keys import KEY_SET, PRIVATE_KEY, PUBLIC_KEY, SSH_AUTH_TYPE, new_key_pair

__all__ = ["KEY_SET", "PRIVATE_KEY", "PUBLIC_KEY", "SSH_AUTH_TYPE", "needs_keys", "new_key_pair", "with_keys"]


def needs_keys(secret: Mapping[str, Any]) -> bool:
    """An SSH-auth Secret whose data is not exactly the key pair (missing, or a different key set)."""
    if secret.get("type") != SSH_AUTH_TYPE:
        return False
    return set((secret.get("data") or {}).keys()) != KEY_SET


def with_keys(secret: Mapping[str, Any]) -> dict[str, Any]:
    """``secret`` with a fresh key pair as its data (base64, as the API expects ``data``)."""
    data = {name: base64.b64encode(value).decode() for name, value in new_key_pair().items()}
    return {**secret, "data": data}
