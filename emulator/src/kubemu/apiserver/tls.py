"""A self-signed certificate for the emulator, made at start-up.

kubectl (client-go) sends a bearer token only over TLS, so the emulator serves HTTPS with a
fresh ECDSA certificate valid for the addresses it listens on; the kubeconfig carries it
as ``certificate-authority-data``. Nothing is written to disk but a private temporary file
that exists only while the SSL context loads it.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import os
import ssl
import tempfile

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def self_signed(hosts: list[str]) -> tuple[bytes, bytes]:
    """(certificate PEM, private key PEM) for ``hosts`` (names or IP addresses)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "testbed-emulator")])
    alt: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alt.append(x509.DNSName(host))
    now = _dt.datetime.now(_dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(minutes=5))
        .not_valid_after(now + _dt.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def server_context(cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    fd, path = tempfile.mkstemp(prefix="testbed-emulator-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(cert_pem + key_pem)
        context.load_cert_chain(path)
    finally:
        os.unlink(path)
    return context
