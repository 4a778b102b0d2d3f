"""Throwaway PKI for the test mail servers: a CA and a server certificate it signs.

Clients verify normally (``ssl.create_default_context(cafile=ca_file)``), so a test
exercises the same certificate path as production; nothing is ever disabled.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# EC keys: generating them takes microseconds, RSA would cost ~100 ms per test.
_CURVE = ec.SECP256R1()


@dataclass(frozen=True)
class ServerPki:
    """Files of one test PKI: ``ca_file`` signs the server ``cert_file``/``key_file``."""

    ca_file: Path
    cert_file: Path
    key_file: Path

    def server_context(self) -> ssl.SSLContext:
        """A server-side TLS context presenting the certificate."""
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx

    def client_context(self) -> ssl.SSLContext:
        """A verifying client context that trusts only this PKI's CA."""
        return ssl.create_default_context(cafile=str(self.ca_file))


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "agentmail tests"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _validity() -> tuple[dt.datetime, dt.datetime]:
    # Back-dated an hour so a skewed clock does not make the cert "not yet valid".
    now = dt.datetime.now(dt.UTC)
    return now - dt.timedelta(hours=1), now + dt.timedelta(days=2)


def _write_pem(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0o600)
    return path


def create_pki(
    directory: Path,
    *,
    name: str = "test",
    hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
) -> ServerPki:
    """Create a CA and a server certificate for ``hosts`` under ``directory``.

    Files are named ``<name>-ca.pem``, ``<name>-cert.pem`` and ``<name>-key.pem``.
    Entries of ``hosts`` that parse as IP addresses become IP SANs, the rest DNS SANs.
    """
    not_before, not_after = _validity()

    ca_key = ec.generate_private_key(_CURVE)
    ca_name = _name(f"agentmail {name} CA")
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
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
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))

    key = ec.generate_private_key(_CURVE)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0] if hosts else "server"))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )

    pem = serialization.Encoding.PEM
    return ServerPki(
        ca_file=_write_pem(directory / f"{name}-ca.pem", ca_cert.public_bytes(pem)),
        cert_file=_write_pem(directory / f"{name}-cert.pem", cert.public_bytes(pem)),
        key_file=_write_pem(
            directory / f"{name}-key.pem",
            key.private_bytes(
                pem,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
        ),
    )
