"""``rediss://``: the Redis backend over TLS, against a private redis-server
that speaks TLS only, with a certificate authority and a server certificate
made here (the ``cryptography`` package) in the test's temporary folder. The
CA is given in the URL's query (``?ssl_ca_certs=/path/ca.pem``, which redis-py
reads); a server whose certificate another CA signed is refused as
"unavailable" (503), never a 500."""

from __future__ import annotations

import datetime
import ipaddress
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import free_port
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from flask import Flask
from redis_server import start_tls_redis_server, stop_redis_server

from flask_mcp import MCP
from flask_mcp.backends import open_backend
from flask_mcp.backends.contracts import BackendUnavailable
from flask_mcp.protocol.session import Session
from flask_mcp.testing import MCPTestClient


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def make_ca(folder: Path, name: str) -> tuple[Path, ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A self-signed certificate authority, written to ``folder/<name>.pem``."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(_name(name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .sign(key, hashes.SHA256())
    )
    return _pem(folder / f"{name}.pem", cert.public_bytes(serialization.Encoding.PEM)), key, cert


def make_server_cert(folder: Path, ca_key: ec.EllipticCurvePrivateKey, ca: x509.Certificate) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost, signed by ``ca``."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("redis test server"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                    x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return (_pem(folder / "server.pem", cert.public_bytes(serialization.Encoding.PEM)),
            _pem(folder / "server.key", key_pem))


@dataclass
class TlsRedis:
    port: int
    ca: Path
    other_ca: Path

    def url(self, ca: Path) -> str:
        return f"rediss://127.0.0.1:{self.port}/0?ssl_ca_certs={ca}"


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsRedis]:
    folder = tmp_path_factory.mktemp("tls")
    ca, ca_key, ca_cert = make_ca(folder, "ca")
    other_ca, _, _ = make_ca(folder, "other-ca")
    cert, key = make_server_cert(folder, ca_key, ca_cert)
    port = free_port()
    server: subprocess.Popen[bytes] = start_tls_redis_server(port, cert, key, ca)
    try:
        yield TlsRedis(port, ca, other_ca)
    finally:
        stop_redis_server(server)


def test_the_backend_works_over_tls_with_the_ca_given_in_the_url(tls_redis: TlsRedis, tmp_path: Path) -> None:
    backend = open_backend(tls_redis.url(tls_redis.ca), timeout=600, instance_path=str(tmp_path))
    try:
        backend.check()
        session = Session(id=uuid.uuid4().hex, protocol_version="2025-06-18", data={"over": "tls"})
        backend.sessions.create(session)
        for _ in range(3):  # the later reads may come from the tracked copy
            found = backend.sessions.get(session.id)
            assert found is not None and found.data == {"over": "tls"}
        assert backend.bus is not None
        subscription = backend.bus.subscribe(["tls"])
        backend.bus.publish("tls", {"jsonrpc": "2.0", "method": "over-tls"})
        assert subscription.get(5) == ("tls", {"jsonrpc": "2.0", "method": "over-tls"})
        subscription.close()
        assert backend.sessions.delete(session.id) is True
    finally:
        backend.close()


def build_app(url: str) -> Flask:
    app = Flask("tls-app")
    app.config.update(MCP_BACKEND=url, MCP_IO_TIMEOUT=2)
    mcp = MCP(app, name="tls-app")

    @mcp.tool
    def echo(text: str) -> str:
        return text

    return app


def test_an_app_on_rediss_serves_a_session(tls_redis: TlsRedis) -> None:
    app = build_app(tls_redis.url(tls_redis.ca))
    client = MCPTestClient(app, protocol_version="2025-06-18")
    try:
        client.initialize()
        response = client.call_tool("echo", {"text": "secure"})
        assert response.status_code == 200 and response.result["content"][0]["text"] == "secure"
    finally:
        app.extensions["mcp"].backend.close()


def test_a_server_certificate_from_another_ca_is_unavailable_with_the_reason(
    tls_redis: TlsRedis, tmp_path: Path
) -> None:
    backend = open_backend(tls_redis.url(tls_redis.other_ca), timeout=600, instance_path=str(tmp_path), io_timeout=2)
    try:
        with pytest.raises(BackendUnavailable, match="(?i)certificate verify failed"):
            backend.check()
    finally:
        backend.close()
    app = build_app(tls_redis.url(tls_redis.other_ca))
    client = MCPTestClient(app, protocol_version="2025-06-18")
    try:
        response = client.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                                 "clientInfo": {"name": "t", "version": "1"}})
        assert response.status_code == 503, response.http.get_data(as_text=True)
        assert "unavailable" in response.error["message"].lower()
    finally:
        app.extensions["mcp"].backend.close()


def test_a_ca_file_that_does_not_exist_is_unavailable_not_a_server_error(tls_redis: TlsRedis, tmp_path: Path) -> None:
    backend = open_backend(tls_redis.url(tmp_path / "missing.pem"), timeout=600, instance_path=str(tmp_path))
    try:
        with pytest.raises(BackendUnavailable):
            backend.check()
    finally:
        backend.close()
