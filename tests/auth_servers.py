"""A tiny authorization server for the authentication tests, run as a second
process on loopback: RFC 7662 introspection and a JWKS document, plus admin
endpoints the tests use to register and revoke tokens and to count requests.

    python tests/auth_servers.py --port 8123 --state /tmp/as.json

Its state (tokens, keys, client credentials) lives in the ``--state`` file,
so a restarted server knows the same tokens. :class:`AuthServer` starts and
stops one from a test (by its PID).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs
from urllib.request import Request, urlopen

# ---------------------------------------------------------------------- the server


class State:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        data = json.loads(path.read_text()) if path.exists() else {}
        self.tokens: dict[str, dict[str, Any]] = data.get("tokens", {})
        self.jwks: dict[str, Any] = data.get("jwks", {"keys": []})
        self.client: list[str] | None = data.get("client")  # [id, secret] required on /introspect
        self.counts = {"introspect": 0, "jwks": 0}
        self.jwks_times: list[float] = []  # time.time() of each JWKS fetch
        self.peers: set[tuple[str, int]] = set()  # client connections seen by /introspect

    def save(self) -> None:
        data = {"tokens": self.tokens, "jwks": self.jwks, "client": self.client}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(self.path)


class Handler(BaseHTTPRequestHandler):
    state: State
    protocol_version = "HTTP/1.1"  # keep-alive, as a real server offers
    disable_nagle_algorithm = True  # headers and body as separate writes must not wait for an ACK

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, payload: Any) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        state = self.state
        if self.path == "/health":
            self._send(200, {"status": "ok"})
        elif self.path == "/jwks.json":
            with state.lock:
                state.counts["jwks"] += 1
                state.jwks_times.append(time.time())
                self._send(200, state.jwks)
        elif self.path == "/admin/jwks-times":
            with state.lock:
                self._send(200, state.jwks_times)
        elif self.path == "/admin/stats":
            with state.lock:
                self._send(200, {**state.counts, "introspect_connections": len(state.peers)})
        else:
            self._send(404, {"error": "not_found"})

    def do_POST(self) -> None:  # noqa: N802
        state = self.state
        if self.path == "/introspect":
            self._introspect()
            return
        payload = json.loads(self._body() or b"{}")
        with state.lock:
            if self.path == "/admin/tokens":
                state.tokens.update(payload)
            elif self.path == "/admin/revoke":
                state.tokens.pop(payload["token"], None)
            elif self.path == "/admin/jwks":
                state.jwks = payload
            elif self.path == "/admin/client":
                state.client = payload.get("client")
            elif self.path == "/admin/reset-stats":
                state.counts = {"introspect": 0, "jwks": 0}
                state.jwks_times.clear()
                state.peers.clear()
            else:
                self._send(404, {"error": "not_found"})
                return
            state.save()
        self._send(200, {"ok": True})

    def _introspect(self) -> None:
        state = self.state
        form = parse_qs(self._body().decode())
        with state.lock:
            state.counts["introspect"] += 1
            state.peers.add(self.client_address[:2])
            if state.client is not None:
                expected = "Basic " + base64.b64encode(":".join(state.client).encode()).decode()
                if self.headers.get("Authorization") != expected:
                    self._send(401, {"error": "invalid_client"})
                    return
            token = (form.get("token") or [""])[0]
            claims = state.tokens.get(token)
        self._send(200, {"active": False} if claims is None else {"active": True, **claims})


def serve(port: int, state_path: Path) -> None:
    Handler.state = State(state_path)
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    server.serve_forever(poll_interval=0.05)
    server.server_close()


# ---------------------------------------------------------------------- driving it from a test


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class AuthServer:
    """The server above in a subprocess we started (stopped by its PID)."""

    def __init__(self, state_path: Path, port: int | None = None) -> None:
        self.state_path = state_path
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.introspection_url = self.url + "/introspect"
        self.jwks_url = self.url + "/jwks.json"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> AuthServer:
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--port", str(self.port), "--state", str(self.state_path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the auth server exited with {self.process.returncode}")
            try:
                self._call("GET", "/health")
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("the auth server did not start")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def _call(self, method: str, path: str, payload: Any = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        request = Request(self.url + path, data=data, method=method, headers={"Content-Type": "application/json"})
        with urlopen(request, timeout=5) as response:
            return json.loads(response.read())

    def add_tokens(self, tokens: dict[str, dict[str, Any]]) -> None:
        self._call("POST", "/admin/tokens", tokens)

    def revoke(self, token: str) -> None:
        self._call("POST", "/admin/revoke", {"token": token})

    def set_jwks(self, jwks: dict[str, Any]) -> None:
        self._call("POST", "/admin/jwks", jwks)

    def require_client(self, client_id: str, secret: str) -> None:
        self._call("POST", "/admin/client", {"client": [client_id, secret]})

    def stats(self) -> dict[str, int]:
        return self._call("GET", "/admin/stats")  # type: ignore[no-any-return]

    def jwks_times(self) -> list[float]:
        """When (``time.time()``) each JWKS fetch arrived."""
        return self._call("GET", "/admin/jwks-times")  # type: ignore[no-any-return]

    def reset_stats(self) -> None:
        self._call("POST", "/admin/reset-stats", {})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--state", type=Path, required=True)
    args = parser.parse_args()
    serve(args.port, args.state)
