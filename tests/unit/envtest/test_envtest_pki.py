"""The credentials are what kube-apiserver needs: a CA-signed loopback serving cert, RSA SA keys, tokens."""

from __future__ import annotations

import csv
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from cryptography.x509.oid import ExtendedKeyUsageOID

from kubetrain.envtest.pki import ADMIN, CONTROLLER_MANAGER, SCHEDULER, generate_pki, load_pki


def test_serving_certificate_is_signed_by_the_ca_and_names_loopback_and_the_kubernetes_service(
    tmp_path: Path,
) -> None:
    pki = generate_pki(tmp_path)
    ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    serving = x509.load_pem_x509_certificate(pki.serving_cert.read_bytes())

    serving.verify_directly_issued_by(ca)
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    assert "kubernetes.default.svc" in names.get_values_for_type(x509.DNSName)
    usage = serving.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usage


def test_service_account_signing_key_is_rsa_because_the_issuer_signs_rs256(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path)
    key = load_pem_private_key(pki.service_account_key.read_bytes(), password=None)
    assert isinstance(key, rsa.RSAPrivateKey)


def test_token_file_gives_admin_system_masters_and_components_their_bootstrap_user_names(
    tmp_path: Path,
) -> None:
    pki = generate_pki(tmp_path)
    rows = {row[1]: row for row in csv.reader(pki.token_file.open())}
    assert rows[ADMIN.name][3] == "system:masters"
    assert set(rows) == {ADMIN.name, "system:kube-scheduler", "system:kube-controller-manager"}
    assert rows[SCHEDULER.name][0] == pki.token(SCHEDULER)


def test_tokens_are_unique_per_identity_and_read_back_from_the_token_file(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path)
    assert len({pki.token(ADMIN), pki.token(SCHEDULER), pki.token(CONTROLLER_MANAGER)}) == 3
    assert load_pki(tmp_path).tokens == pki.tokens


def test_private_keys_are_readable_only_by_their_owner(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path)
    for path in (pki.ca_key, pki.serving_key, pki.service_account_key, pki.token_file):
        assert path.stat().st_mode & 0o077 == 0, path
