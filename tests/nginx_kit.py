"""Real nginx for the end-to-end tests of the deployment kit (deploy/).

Also: slow clients (``Trickle``) for the test that nginx shields gunicorn.

The kit's site configuration is used as it is, with only what a test must
change substituted: the ports (loopback only, IPv6 listeners dropped), the
host name, the certificate paths and the upstream address. Each substitution
must match, so a change to the kit that a test would silently stop covering
fails here instead. nginx runs in the foreground (``daemon off``) with its
pid, temp and log files in a temporary folder; it is stopped by its PID.
"""

from __future__ import annotations

import datetime
import http.client
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conftest import ROOT, free_port, unavailable
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SITE = ROOT / "deploy" / "nginx" / "flask-mcp.conf"
GUNICORN_CONF = ROOT / "deploy" / "gunicorn.conf.py"
#: The public host name in the tests: it resolves to loopback everywhere.
PUBLIC_HOST = "localhost"
#: A second name of the site, not a loopback one (reached by connecting to
#: 127.0.0.1 and naming it in SNI and Host): flask-mcp's loopback Host check
#: must not turn it away.
OTHER_HOST = "mcp.example.test"
#: Debian's /etc/nginx/nginx.conf: 768 connections per worker process.
WORKER_CONNECTIONS = 768


def nginx_binary() -> str:
    """Debian's nginx (``apt-get install nginx``; .ci/run installs it)."""
    found = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)
    if found is None:
        unavailable("nginx is not installed (apt-get install nginx): the deployment kit cannot be tested")
    return found


@dataclass(frozen=True)
class Certificate:
    """A private CA and a server certificate for ``PUBLIC_HOST`` signed by it."""

    ca: Path
    cert: Path
    key: Path

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca))


def make_certificate(folder: Path) -> Certificate:
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "flask-mcp test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, PUBLIC_HOST)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(PUBLIC_HOST), x509.DNSName(OTHER_HOST)]),
                       critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = Certificate(ca=folder / "ca.pem", cert=folder / "server.pem", key=folder / "server.key")
    paths.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    return paths


def _replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"the kit's site configuration should contain {old!r} exactly once"
    return text.replace(old, new)


def render_site(*, https_port: int, http_port: int, upstream_port: int, certificate: Certificate,
                changes: dict[str, str] | None = None) -> str:
    """The kit's site configuration with the test's ports, name and certificate.
    ``changes`` replaces directives of the kit (each must occur once): the
    contrast cases, which show what a test would see without the kit's value."""
    text = SITE.read_text()
    text = _replace_once(text, "server 127.0.0.1:8000;", f"server 127.0.0.1:{upstream_port};")
    assert text.count("server_name mcp.example.com;") == 2, "the kit's two servers of the public name"
    text = text.replace("server_name mcp.example.com;", f"server_name {PUBLIC_HOST} {OTHER_HOST};")
    text = _replace_once(text, "/etc/letsencrypt/live/mcp.example.com/fullchain.pem", str(certificate.cert))
    text = _replace_once(text, "/etc/letsencrypt/live/mcp.example.com/privkey.pem", str(certificate.key))
    ports = {"443": https_port, "80": http_port}

    def listen(match: re.Match[str]) -> str:
        if match["ipv6"]:
            return ""  # loopback IPv4 only
        return f"listen 127.0.0.1:{ports[match['port']]}{match['rest']};"

    text, count = re.subn(r"listen\s+(?P<ipv6>\[::\]:)?(?P<port>443|80)(?P<rest>[^;]*);", listen, text)
    assert count == 8, f"expected the kit's 8 listen directives (4 servers, IPv4 and IPv6), found {count}"
    directives = [line.split("#")[0] for line in text.splitlines()]
    assert not any("mcp.example.com" in line for line in directives), "an unsubstituted host name is left"
    for old, new in (changes or {}).items():
        text = _replace_once(text, old, new)
    return text


def kit_directive(name: str, location: str = "/mcp") -> str:
    """The value of a directive inside a location of the kit's site configuration."""
    block = re.search(r"location\s+" + re.escape(location) + r"\s*\{(?P<body>[^}]*)\}", SITE.read_text())
    assert block is not None, f"the kit has no location {location}"
    found = re.search(r"^\s*" + re.escape(name) + r"\s+(?P<value>[^;]+);", block["body"], re.MULTILINE)
    assert found is not None, f"the kit's location {location} sets no {name}"
    return found["value"].strip()


def seconds(value: str) -> float:
    """An nginx time value (``90``, ``75s``, ``10m``, ``1h``, ``1d``) in seconds."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
    match = re.fullmatch(r"(\d+)(ms|s|m|h|d)?", value)
    assert match is not None, f"not an nginx time: {value!r}"
    return int(match[1]) * units[match[2] or "s"]


class Nginx:
    """An nginx master we started in the foreground, stopped by its PID."""

    def __init__(self, folder: Path, *, upstream_port: int, certificate: Certificate,
                 changes: dict[str, str] | None = None) -> None:
        binary = nginx_binary()
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.https_port = free_port()
        self.http_port = free_port()
        self.url = f"https://{PUBLIC_HOST}:{self.https_port}/mcp"
        self.error_log = folder / "error.log"
        self.access_log = folder / "access.log"
        site = folder / "site.conf"
        site.write_text(render_site(https_port=self.https_port, http_port=self.http_port,
                                    upstream_port=upstream_port, certificate=certificate, changes=changes))
        temp = {name: folder / name for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")}
        user = "user root root;" if os.geteuid() == 0 else ""  # root's workers would otherwise be nobody's
        (folder / "nginx.conf").write_text(f"""
daemon off;
{user}
worker_processes 1;
worker_rlimit_nofile 4096;
pid {folder / 'nginx.pid'};
error_log {self.error_log} info;
events {{ worker_connections {WORKER_CONNECTIONS}; }}
http {{
    # As Debian's /etc/nginx/nginx.conf has them.
    sendfile on;
    tcp_nopush on;
    gzip on;
    access_log {self.access_log};
    default_type application/octet-stream;
    {''.join(f'{name}_temp_path {path};' for name, path in temp.items())}
    include {site};
}}
""")
        self.stdio = (folder / "stdio.log").open("wb")
        self.process = subprocess.Popen(
            [binary, "-p", str(folder), "-c", str(folder / "nginx.conf"), "-e", str(self.error_log)],
            stdout=self.stdio, stderr=subprocess.STDOUT,
        )
        self._wait_ready(certificate.client_context())

    def _wait_ready(self, context: ssl.SSLContext, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.stdio.close()
                raise RuntimeError(f"nginx exited early:\n{self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.https_port), timeout=1) as raw:
                    with context.wrap_socket(raw, server_hostname=PUBLIC_HOST):
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"nginx did not start listening:\n{self.log()}")

    def connection(self, host: str, context: ssl.SSLContext, **kwargs: Any) -> http.client.HTTPSConnection:
        """A connection to this nginx that names ``host`` (SNI and ``Host``),
        whatever that name resolves to."""
        connection = http.client.HTTPSConnection(host, self.https_port, timeout=10, context=context, **kwargs)
        connection._create_connection = (  # type: ignore[attr-defined]
            lambda address, *args: socket.create_connection(("127.0.0.1", address[1]), *args)
        )
        return connection

    def log(self) -> str:
        parts = [p.read_text(errors="replace") for p in (self.folder / "stdio.log", self.error_log) if p.exists()]
        return "\n".join(parts)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # fast shutdown of the master and its worker
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.stdio.close()


# ---------------------------------------------------------------- slow clients


SLOW_CLIENTS = 500
HALF_HEADERS = b"POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nX-Slow: "
HALF_BODY = b"POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"a\":\""


class Trickle:
    """``SLOW_CLIENTS`` connections that each send half a request, then one
    more byte every half second until stopped: headers or body never end."""

    def __init__(self, connect: Callable[[], socket.socket], host: bytes) -> None:
        self.sockets: list[socket.socket] = []
        try:
            for number in range(SLOW_CLIENTS):
                sock = connect()
                self.sockets.append(sock)
                sock.sendall((HALF_HEADERS if number % 2 else HALF_BODY) % host)
        except BaseException:
            for sock in self.sockets:
                sock.close()
            raise
        self._stop = threading.Event()
        self._round = threading.Condition()
        self.rounds = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for sock in list(self.sockets):
                try:
                    sock.sendall(b"a")
                except OSError:
                    self.sockets.remove(sock)  # closed by the other side
            with self._round:
                self.rounds += 1
                self._round.notify_all()

    def next_round(self) -> None:
        """Wait until every connection has trickled one more byte."""
        with self._round:
            wanted = self.rounds + 1
            assert self._round.wait_for(lambda: self.rounds >= wanted, timeout=10), "the trickle stalled"

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for sock in self.sockets:
            sock.close()


def timed(call: Callable[[], object]) -> float:
    """Seconds ``call`` took."""
    started = time.monotonic()
    call()
    return time.monotonic() - started
