"""https:// endpoints: the client speaks TLS, checks the certificate against the system's CAs,
a given CA bundle, or not at all (``verify: false``) — against the simulator served over TLS
with a certificate made here (no network)."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import ssl
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from testbed.cli import main
from testbed.clients import openai
from testbed.clients.endpoint import Tls
from testbed.clients.http import ConnectionPool, HttpClientError
from testbed.config.sim import SimParams
from testbed.core.errors import InputError
from testbed.servers.sim import serve_in_thread


@dataclass
class Certs:
    ca: Path  # the CA's certificate (PEM): what a client trusts
    server: ssl.SSLContext  # the server's context: a certificate for 127.0.0.1 signed by the CA


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def make_certs(folder: Path) -> Certs:
    """A throwaway CA and a server certificate for 127.0.0.1 that it signed."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("testbed test CA"))
        .issuer_name(_name("testbed test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
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
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    (folder / "ca.pem").write_bytes(ca.public_bytes(pem))
    (folder / "server.pem").write_bytes(cert.public_bytes(pem))
    (folder / "server.key").write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(folder / "server.pem", folder / "server.key")
    return Certs(folder / "ca.pem", server)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def https_url(certs: Certs) -> Iterator[str]:
    with serve_in_thread(SimParams(eos_rate=0.0), tls=certs.server) as url:
        yield url


def complete(url: str, tls: Tls | None) -> str:
    async def main() -> str:
        pool = ConnectionPool(url, tls=tls)
        try:
            response = await openai.complete(pool, {"prompt": "hi", "max_tokens": 3})
            return response.text if response.ok else f"error {response.error}"
        finally:
            await pool.aclose()

    return asyncio.run(main())


def test_the_server_is_https(https_url: str) -> None:
    assert https_url.startswith("https://127.0.0.1:")


def test_an_unknown_ca_is_refused_with_the_fix(https_url: str) -> None:
    with pytest.raises(HttpClientError, match=r"certificate verify failed.*tls\.ca_bundle"):
        complete(https_url, None)


def test_verify_false_accepts_any_certificate(https_url: str) -> None:
    assert len(complete(https_url, Tls(verify=False)).split()) == 3


def test_a_ca_bundle_is_trusted_and_the_host_checked(https_url: str, certs: Certs) -> None:
    assert len(complete(https_url, Tls(ca_bundle=str(certs.ca))).split()) == 3
    # the certificate names 127.0.0.1, not localhost: the name check is on
    other = https_url.replace("127.0.0.1", "localhost")
    with pytest.raises(HttpClientError, match="certificate verify failed"):
        complete(other, Tls(ca_bundle=str(certs.ca)))


def test_a_missing_ca_bundle_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"ca_bundle .*nope\.pem"):
        ConnectionPool("https://127.0.0.1:1", tls=Tls(ca_bundle=str(tmp_path / "nope.pem")))


CAMPAIGN = textwrap.dedent(
    """\
    name: tls
    backend: external
    deployments:
      - name: remote
        server: external
        url: {url}
        model: sim-model
        tls:
          {tls}
    load:
      profile: concurrency
      concurrency: 2
      requests: 6
      plots: false
      dataset: {{kind: synthetic, input_tokens: 8, output_tokens: 4}}
    """
)


def test_a_campaign_runs_against_https_with_a_relative_ca_bundle(
    tmp_path: Path, https_url: str, certs: Certs
) -> None:
    (tmp_path / "ca.pem").write_bytes(certs.ca.read_bytes())
    file = tmp_path / "c.yaml"
    file.write_text(CAMPAIGN.format(url=https_url, tls="ca_bundle: ca.pem"))
    code = main(
        ["run", str(file), "--out", str(tmp_path / "run"), "--index", f"sqlite:///{tmp_path}/i"]
    )
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    row = summary["treatments"][0]
    # the subject is TLS: every request answered; a harness too busy to judge latency (the
    # self-check, on a loaded machine) may make the verdict INCONCLUSIVE, never FAIL/ERROR
    assert code == 0, row["reason"]
    assert row["status"] == "PASS" or (
        row["status"] == "INCONCLUSIVE" and "load process used" in row["reason"]
    ), row["reason"]
    records = (tmp_path / "run" / row["dir"] / "records.jsonl").read_text().splitlines()
    assert len(records) == 6
    assert all(json.loads(r)["error"] is None for r in records)


@pytest.mark.parametrize(
    ("url", "tls", "message"),
    [
        ("https://127.0.0.1:1", "ca_bundle: missing.pem", ":9:18: deployments[0].tls.ca_bundle"),
        ("http://127.0.0.1:1", "verify: false", "tls applies to https:// URLs"),
    ],
)
def test_tls_mistakes_are_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str, tls: str, message: str
) -> None:
    file = tmp_path / "c.yaml"
    file.write_text(CAMPAIGN.format(url=url, tls=tls))
    assert main(["run", str(file), "--out", str(tmp_path / "run")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("processes", [1, 2])
def test_testbed_load_flags(tmp_path: Path, https_url: str, certs: Certs, processes: int) -> None:
    argv = ["load", https_url, "--requests", "4", "--concurrency", "2", "--no-plots"]
    argv += ["--processes", str(processes), "--output-tokens", "3"]
    assert main([*argv, "--ca-bundle", str(certs.ca), "--out", str(tmp_path / "a")]) == 0
    assert main([*argv, "--insecure", "--out", str(tmp_path / "b")]) == 0
    for out in ("a", "b"):
        lines = (tmp_path / out / "records.jsonl").read_text().splitlines()
        assert len(lines) == 4
        assert all(json.loads(r)["error"] is None for r in lines)
