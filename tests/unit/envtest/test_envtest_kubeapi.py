"""Kubeconfigs resolve to a server, a CA and credentials; unsupported users are named in the error."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubetrain.envtest.controlplane import write_kubeconfig
from kubetrain.envtest.kubeapi import KubeconfigError, load_connection
from kubetrain.envtest.pki import ADMIN, generate_pki


def test_written_admin_kubeconfig_resolves_to_the_server_with_the_admin_bearer_token(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path / "pki")
    write_kubeconfig(tmp_path / "admin.kubeconfig", "https://127.0.0.1:6443", pki, ADMIN)

    connection = load_connection(tmp_path / "admin.kubeconfig")

    assert connection.server == "https://127.0.0.1:6443"
    assert connection.headers["Authorization"] == f"Bearer {pki.token(ADMIN)}"


def test_exec_credential_users_are_rejected_with_the_user_named(tmp_path: Path) -> None:
    config = {
        "clusters": [{"name": "c", "cluster": {"server": "https://x", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "cloud", "user": {"exec": {"command": "aws"}}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "cloud"}}],
        "current-context": "ctx",
    }
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(KubeconfigError, match=r"users\[cloud\] uses \['exec'\]"):
        load_connection(path)


def test_missing_context_is_an_error_naming_the_context(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump({"current-context": "gone", "contexts": []}))
    with pytest.raises(KubeconfigError, match="contexts has no entry named 'gone'"):
        load_connection(path)
