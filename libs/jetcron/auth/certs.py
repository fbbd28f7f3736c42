"""A CA and the certificates of a jetcron system, for those who have none (`jetcron certs`, `jetcron up --tls`).

ECDSA P-256 keys (what NATS's Go TLS stack handles best), made and signed by the `cryptography` package. The
server certificate serves both ways: clients verify it, and cluster nodes present it to each other on routes.
Validity: the CA 10 years, a server or client certificate 1 year (rotate: docs/security.md).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
LEAF_DAYS = 365
DEFAULT_HOSTS = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class TlsFiles:
    ca: Path
    cert: Path
    key: Path


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "jetcron"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _san(hosts: tuple[str, ...] | list[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    os.chmod(path, 0o644)


def _load(ca_dir: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert = x509.load_pem_x509_certificate((ca_dir / "ca.pem").read_bytes())
    key = serialization.load_pem_private_key((ca_dir / "ca-key.pem").read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{ca_dir / 'ca-key.pem'} is not an EC key")
    return cert, key


def make_ca(directory: Path, now: datetime.datetime) -> Path:
    """ca.pem and ca-key.pem in `directory` (kept if there)."""
    directory.mkdir(parents=True, exist_ok=True)
    if (directory / "ca.pem").exists():
        return directory / "ca.pem"
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name("jetcron CA")).issuer_name(_name("jetcron CA"))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    _write_key(directory / "ca-key.pem", key)
    _write_cert(directory / "ca.pem", cert)
    return directory / "ca.pem"


def issue(directory: Path, name: str, hosts: tuple[str, ...] | list[str], now: datetime.datetime) -> TlsFiles:
    """<name>.pem and <name>-key.pem signed by the CA in `directory`, for serverAuth and clientAuth."""
    ca_cert, ca_key = _load(directory)
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=LEAF_DAYS))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                     ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
    if hosts:
        builder = builder.add_extension(_san(hosts), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    files = TlsFiles(ca=directory / "ca.pem", cert=directory / f"{name}.pem", key=directory / f"{name}-key.pem")
    _write_key(files.key, key)
    _write_cert(files.cert, cert)
    return files


def ensure_local_tls(directory: Path, hosts: tuple[str, ...] = DEFAULT_HOSTS) -> TlsFiles:
    """A CA and a server certificate for `hosts` in `directory`: made on the first call, reused after."""
    now = datetime.datetime.now(datetime.UTC)
    make_ca(directory, now)
    if (directory / "server.pem").exists():
        return TlsFiles(ca=directory / "ca.pem", cert=directory / "server.pem", key=directory / "server-key.pem")
    return issue(directory, "server", hosts, now)
