"""The control plane's credentials: a CA, the API server's serving certificate, the service-account signing
key pair and one static bearer token per identity.

Everything is made with the ``cryptography`` package (no openssl subprocess) and written into one directory,
so a run directory is self-contained and is thrown away with it.
"""

from __future__ import annotations

import csv
import datetime
import ipaddress
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# The first address of --service-cluster-ip-range: the in-cluster "kubernetes" Service gets it.
SERVICE_IP = "10.0.0.1"
SERVING_DNS_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")
VALIDITY = datetime.timedelta(days=3650)


@dataclass(frozen=True)
class Identity:
    """One user of the static token file. The scheduler and controller-manager user names are the ones the
    bootstrap RBAC bindings already grant their roles to, so no extra RBAC is needed."""

    name: str
    uid: str
    groups: tuple[str, ...]


ADMIN = Identity("kubetrain-admin", "admin-uid", ("system:masters",))
SCHEDULER = Identity("system:kube-scheduler", "scheduler-uid", ())
CONTROLLER_MANAGER = Identity("system:kube-controller-manager", "kcm-uid", ())
IDENTITIES = (ADMIN, SCHEDULER, CONTROLLER_MANAGER)


@dataclass(frozen=True)
class Pki:
    """Paths of the files in a PKI directory, and the token of each identity."""

    directory: Path
    tokens: dict[str, str]

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    @property
    def serving_cert(self) -> Path:
        return self.directory / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.directory / "apiserver.key"

    @property
    def service_account_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def service_account_pub(self) -> Path:
        return self.directory / "sa.pub"

    @property
    def token_file(self) -> Path:
        return self.directory / "tokens.csv"

    def token(self, identity: Identity) -> str:
        return self.tokens[identity.name]


def generate_pki(directory: Path, extra_ips: tuple[str, ...] = ()) -> Pki:
    """Write a fresh CA, serving certificate (loopback + in-cluster names + ``extra_ips``: the real node's
    address, where the API server then listens), service-account keys and token file."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    pki = Pki(directory, {identity.name: secrets.token_hex(24) for identity in IDENTITIES})

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = _ca_certificate(ca_key)
    serving_key = ec.generate_private_key(ec.SECP256R1())
    serving_cert = _serving_certificate(serving_key.public_key(), ca_key, ca_cert, extra_ips)
    # The service-account issuer signs with RS256 by default, so this key must be RSA.
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    _write_private_key(pki.ca_key, ca_key)
    pki.ca_cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    _write_private_key(pki.serving_key, serving_key)
    pki.serving_cert.write_bytes(serving_cert.public_bytes(serialization.Encoding.PEM))
    _write_private_key(pki.service_account_key, sa_key)
    pki.service_account_pub.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    _write_token_file(pki)
    return pki


def issue_client_certificate(
    pki: Pki, filename: str, common_name: str, organizations: tuple[str, ...] = ()
) -> tuple[Path, Path]:
    """A client certificate signed by the envtest CA (the API server and the kubelet both trust it): the
    user is the common name, the groups the organizations. Returns the certificate and key paths."""
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{pki.ca_key}: not the EC key generate_pki writes")
    ca_cert = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    subject.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(subject))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now())
        .not_valid_after(_now() + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert_path, key_path = pki.directory / f"{filename}.crt", pki.directory / f"{filename}.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    _write_private_key(key_path, key)
    return cert_path, key_path


def issue_serving_certificate(
    pki: Pki,
    directory: Path,
    ips: tuple[str, ...] = ("127.0.0.1",),
    dns_names: tuple[str, ...] = ("localhost",),
) -> Path:
    """A serving certificate signed by the envtest CA, for a webhook server on loopback: ``tls.crt``,
    ``tls.key`` and the CA as ``ca.crt`` in ``directory`` (controller-runtime's file names), which is
    returned. The API server trusts it through the webhook configuration's ``caBundle`` (the CA)."""
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{pki.ca_key}: not the EC key generate_pki writes")
    ca_cert = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    alt_names: list[x509.GeneralName] = [
        *(x509.IPAddress(ipaddress.ip_address(address)) for address in ips),
        *(x509.DNSName(name) for name in dns_names),
    ]
    certificate = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0] if dns_names else ips[0])])
        )
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now())
        .not_valid_after(_now() + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tls.crt").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    _write_private_key(directory / "tls.key", key)
    (directory / "ca.crt").write_bytes(pki.ca_cert.read_bytes())
    return directory


def load_pki(directory: Path) -> Pki:
    """Read back the tokens of a PKI directory written by :func:`generate_pki`."""
    tokens: dict[str, str] = {}
    with (directory / "tokens.csv").open(newline="") as handle:
        for row in csv.reader(handle):
            token, user = row[0], row[1]
            tokens[user] = token
    return Pki(directory, tokens)


def _write_token_file(pki: Pki) -> None:
    with pki.token_file.open("w", newline="") as handle:
        writer = csv.writer(handle, quoting=csv.QUOTE_MINIMAL)
        for identity in IDENTITIES:
            row = [pki.token(identity), identity.name, identity.uid]
            if identity.groups:
                row.append(",".join(identity.groups))
            writer.writerow(row)
    pki.token_file.chmod(0o600)


def _write_private_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _now() -> datetime.datetime:
    # Back-dated a little so a certificate is valid even if clocks of the processes differ slightly.
    return datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)


def _ca_certificate(key: ec.EllipticCurvePrivateKey) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubetrain-envtest-ca")])
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now())
        .not_valid_after(_now() + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )


def _serving_certificate(
    public_key: ec.EllipticCurvePublicKey,
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    extra_ips: tuple[str, ...] = (),
) -> x509.Certificate:
    alt_names: list[x509.GeneralName] = [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address(SERVICE_IP)),
        *(x509.IPAddress(ipaddress.ip_address(address)) for address in extra_ips),
        *(x509.DNSName(name) for name in SERVING_DNS_NAMES),
    ]
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_cert.subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now())
        .not_valid_after(_now() + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
