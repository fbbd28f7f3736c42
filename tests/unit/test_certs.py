"""Certificates for those who have none: a CA, and server certificates it signs, made once and kept."""

from __future__ import annotations

import datetime
import ipaddress
import stat
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from jetcron.auth.certs import ensure_local_tls, issue


def test_the_server_certificate_chains_to_the_ca_and_names_its_hosts(tmp_path: Path) -> None:
    files = ensure_local_tls(tmp_path / "tls", hosts=("localhost", "127.0.0.1", "nats.example.internal"))
    ca = x509.load_pem_x509_certificate(files.ca.read_bytes())
    cert = x509.load_pem_x509_certificate(files.cert.read_bytes())

    cert.verify_directly_issued_by(ca)  # raises when the signature or issuer does not match
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost", "nats.example.internal"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert {u.dotted_string for u in usages} == {"1.3.6.1.5.5.7.3.1", "1.3.6.1.5.5.7.3.2"}  # server and client
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert isinstance(ca.public_key(), ec.EllipticCurvePublicKey)
    for key in (files.key, files.ca.with_name("ca-key.pem")):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key


def test_local_certificates_are_made_once_and_reused(tmp_path: Path) -> None:
    first = ensure_local_tls(tmp_path / "tls")
    before = (first.ca.read_bytes(), first.cert.read_bytes())
    again = ensure_local_tls(tmp_path / "tls")
    assert (again.ca.read_bytes(), again.cert.read_bytes()) == before


def test_a_client_certificate_is_signed_by_the_same_ca(tmp_path: Path) -> None:
    files = ensure_local_tls(tmp_path / "tls")
    client = issue(tmp_path / "tls", "ops", [], datetime.datetime.now(datetime.UTC))
    cert = x509.load_pem_x509_certificate(client.cert.read_bytes())
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(files.ca.read_bytes()))
    assert cert.subject.rfc4514_string() == "CN=ops,O=jetcron"


def test_the_certs_command_makes_a_ca_and_server_and_client_certificates(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from jetcron.cli.main import app

    runner = CliRunner()
    made = runner.invoke(app, ["certs", "init", "--dir", str(tmp_path), "--host", "nats.internal"])
    assert made.exit_code == 0, made.output
    assert f"CA {tmp_path / 'ca.pem'}" in made.output
    server = x509.load_pem_x509_certificate((tmp_path / "server.pem").read_bytes())
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["nats.internal"]
    assert runner.invoke(app, ["certs", "client", "ops", "--dir", str(tmp_path)]).exit_code == 0
    assert (tmp_path / "ops.pem").exists()
    missing = runner.invoke(app, ["certs", "client", "ops", "--dir", str(tmp_path / "none")])
    assert missing.exit_code == 2 and "no CA in" in missing.output
