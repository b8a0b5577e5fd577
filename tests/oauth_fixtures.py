"""What the OAuth tests need around the app: an HTTPS server on loopback
that serves Client ID Metadata Documents (with a throw-away certificate
authority the app is told to trust) and receives the browser at the
client's redirect URI."""

from __future__ import annotations

import base64
import datetime
import functools
import hashlib
import ipaddress
import json
import secrets
import socket
import ssl
import struct
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from conftest import load_file
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

if TYPE_CHECKING:
    from flask import Flask

#: The repository's example OAuth app (example/oauth_app.py), which the OAuth tests serve.
EXAMPLE_APP = Path(__file__).resolve().parents[1] / "example" / "oauth_app.py"


@functools.cache
def _example_create_app() -> Any:
    """example/oauth_app.py's ``create_app`` (a file of the repository, not an installed package)."""
    return load_file("example_oauth_app", EXAMPLE_APP).create_app


def example_app(tmp_path: Path, site: ClientSite, **config: Any) -> Flask:
    """The example OAuth app on SQLite files in ``tmp_path``, fetching metadata documents
    from ``site`` (on loopback, trusting its certificate); ``config`` adds or overrides keys."""
    app: Flask = _example_create_app()({
        "TESTING": True,
        "MCP_BACKEND": f"sqlite:///{tmp_path / 'sessions.sqlite3'}",
        "MCP_OAUTH_STORE": f"sqlite:///{tmp_path / 'oauth.sqlite3'}",
        "MCP_OAUTH_CIMD_ALLOW_LOOPBACK": True,
        "MCP_OAUTH_CIMD_CA_BUNDLE": str(site.cert_file),
        **config,
    })
    return app


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and the name ``cimd.test`` (its own CA): (certificate file, key file)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                    x509.DNSName("cimd.test")]),
                       critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cimd-cert.pem", directory / "cimd-key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


class ClientSite:
    """The client's own web site on https://127.0.0.1:PORT: ``/clients/<name>.json``
    documents, other ``files`` (a logo: path -> (body, content type), each
    request recorded in ``file_fetches``) and ``/callback`` (records each query
    it receives, and the Host header of each document fetch)."""

    def __init__(self, directory: Path) -> None:
        self.cert_file, key_file = self_signed_certificate(directory)
        self.documents: dict[str, dict[str, Any]] = {}
        self.files: dict[str, tuple[bytes, str]] = {}
        self.file_fetches: list[str] = []
        self.callbacks: list[dict[str, str]] = []
        self.fetches = 0
        self.hosts: list[str | None] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                path = urlsplit(self.path).path
                if path == "/callback":
                    site.callbacks.append({k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()})
                    body, kind = b"<!doctype html><title>Connected</title><p id=done>You may close this window.", \
                        "text/html"
                elif path in site.documents:
                    site.fetches += 1
                    site.hosts.append(self.headers.get("Host"))
                    body, kind = json.dumps(site.documents[path]).encode(), "application/json"
                elif path in site.files:
                    site.file_fetches.append(path)
                    body, kind = site.files[path]
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_file, key_file)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.base = f"https://127.0.0.1:{self.httpd.server_address[1]}"
        self.redirect_uri = self.base + "/callback"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self) -> ClientSite:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def add_client(self, name: str, *, client_name: str | None = None,
                   redirect_uris: list[str] | None = None, host: str = "127.0.0.1", **metadata: Any) -> str:
        """Publish a metadata document (with any other ``metadata``: ``logo_uri``...); its URL
        (on ``host``, which the test resolves to this site) is the client_id."""
        path = f"/clients/{name}.json"
        client_id = f"https://{host}:{self.httpd.server_address[1]}{path}"
        self.documents[path] = {
            "client_id": client_id,
            "client_name": client_name or name,
            "redirect_uris": redirect_uris or [self.redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            **metadata,
        }
        return client_id


def pkce() -> tuple[str, str]:
    """(verifier, S256 challenge)."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def png(size: int = 48, ink: tuple[int, int, int] = (36, 84, 214)) -> bytes:
    """A real PNG: a white diamond on ``ink`` (a client's logo)."""
    middle = (size - 1) / 2
    rows = []
    for y in range(size):
        row = b"".join(b"\xff\xff\xff" if abs(x - middle) + abs(y - middle) < size / 3 else bytes(ink)
                       for x in range(size))
        rows.append(b"\x00" + row)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"".join(rows)))
            + chunk(b"IEND", b""))
class TricklingSite:
    """A server on 127.0.0.1 that answers every request one byte every
    ``interval`` seconds: the status line and headers (``trickle="headers"``),
    or, after complete headers, the body (``trickle="body"``). HTTPS with the
    certificate of ``cert_files`` (a :func:`self_signed_certificate`), or plain
    HTTP without. Records how many requests arrived."""

    def __init__(self, trickle: str, *, cert_files: tuple[Path, Path] | None = None, interval: float = 0.5) -> None:
        self.trickle, self.interval = trickle, interval
        self.context: ssl.SSLContext | None = None
        if cert_files is not None:
            self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.context.load_cert_chain(*cert_files)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.base = f"{'https' if cert_files else 'http'}://127.0.0.1:{self.port}"
        self.requests = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def start(self) -> TricklingSite:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        self.listener.close()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(30)
            if self.context is not None:
                conn = self.context.wrap_socket(conn, server_side=True)
            received = b""
            while b"\r\n\r\n" not in received:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                received += chunk
            self.requests += 1
            body = json.dumps({"keys": [], "active": True, "client_id": "x", "redirect_uris": ["x"]}).encode()
            head = (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                    "Connection: close\r\n\r\n").encode()
            if self.trickle == "body":
                conn.sendall(head)
                slow = body
            else:
                slow = head + body
            for byte in slow:
                if self.stopped.wait(self.interval):
                    return
                conn.sendall(bytes([byte]))
        except OSError:
            pass  # the client gave up: what the tests expect
        finally:
            conn.close()
