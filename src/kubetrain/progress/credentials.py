"""The status endpoint's TLS credentials: a CA that reporters trust and a serving certificate it signs.

Made with the ``cryptography`` package (ECDSA P-256: a handshake costs a fraction of an RSA one, which counts
when a thousand pods report). The operator keeps them in a Secret and renews them before they expire; a
local run makes a pair per run. Reporters are given only the CA certificate.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
import ssl
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_VALIDITY = datetime.timedelta(days=365)
SERVING_VALIDITY = datetime.timedelta(days=90)
RENEW_BEFORE = datetime.timedelta(days=30)
"""Credentials this close to their end are renewed (the CA too: reporters then get the new CA)."""
_BACKDATE = datetime.timedelta(minutes=5)
"""Certificates start a little in the past, so a reporter whose clock is behind still accepts them."""


@dataclass(frozen=True)
class TlsCredentials:
    """PEM text of the CA certificate and key, and of the serving certificate and key."""

    ca_cert: str
    ca_key: str
    cert: str
    key: str

    def expires(self) -> datetime.datetime:
        """When the first of the CA and the serving certificate expires."""
        return min(
            x509.load_pem_x509_certificate(pem.encode()).not_valid_after_utc
            for pem in (self.ca_cert, self.cert)
        )

    def needs_renewal(self, now: datetime.datetime) -> bool:
        return self.expires() - now <= RENEW_BEFORE

    def covers(self, names: Sequence[str]) -> bool:
        """Whether the serving certificate is valid for every one of ``names`` (DNS names or IP addresses)."""
        certificate = x509.load_pem_x509_certificate(self.cert.encode())
        try:
            san = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            return False
        dns = set(san.get_values_for_type(x509.DNSName))
        ips = {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}
        return all(name in dns or name in ips for name in names)

    def server_context(self) -> ssl.SSLContext:
        """A server-side TLS context serving the certificate (TLS 1.2 at least)."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.load_into(context)
        return context

    def load_into(self, context: ssl.SSLContext) -> None:
        """Serve these credentials from ``context`` from the next handshake on (renewal without a restart)."""
        # load_cert_chain reads files only. On Linux the PEM goes through anonymous memory files, so the key
        # never touches a disk and a read-only root filesystem (the operator's pod) is no obstacle;
        # elsewhere through a private temporary directory.
        if hasattr(os, "memfd_create"):
            with _memory_file(self.cert + self.ca_cert) as cert, _memory_file(self.key) as key:
                context.load_cert_chain(cert, key)
            return
        with tempfile.TemporaryDirectory(prefix="kubetrain-tls-") as directory:
            cert_path, key_path = Path(directory) / "tls.crt", Path(directory) / "tls.key"
            cert_path.write_text(self.cert + self.ca_cert, encoding="ascii")
            key_path.write_text(self.key, encoding="ascii")
            context.load_cert_chain(cert_path, key_path)


@contextlib.contextmanager
def _memory_file(text: str) -> Iterator[str]:
    """A path to ``text`` held in memory only (``/proc/self/fd`` of a memfd), valid inside the block."""
    descriptor = os.memfd_create("kubetrain-tls", os.MFD_CLOEXEC)
    try:
        os.write(descriptor, text.encode("ascii"))
        yield f"/proc/self/fd/{descriptor}"
    finally:
        os.close(descriptor)


def issue(names: Sequence[str], now: datetime.datetime | None = None) -> TlsCredentials:
    """A new CA and a serving certificate for ``names``: DNS names and IP addresses it is reached at."""
    now = now or datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubetrain status endpoint CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(
            # Clients match the SAN, not the CN, which may not exceed 64 characters (a long FQDN would).
            x509.Name(
                [
                    x509.NameAttribute(
                        NameOID.COMMON_NAME, names[0] if names and len(names[0]) <= 64 else "kubetrain"
                    )
                ]
            )
        )
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + SERVING_VALIDITY)
        .add_extension(x509.SubjectAlternativeName([_general_name(n) for n in names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return TlsCredentials(
        ca_cert=_pem(ca),
        ca_key=_key_pem(ca_key),
        cert=_pem(cert),
        key=_key_pem(key),
    )


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _pem(certificate: x509.Certificate) -> str:
    return certificate.public_bytes(serialization.Encoding.PEM).decode("ascii")


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode("ascii")
