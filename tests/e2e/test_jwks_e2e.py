"""Forged key ids against two real gunicorn workers (issue 32, item 4): every
answer is ``401 invalid_token`` once the JWKS has answered (never a ``503``
that sends the client away to retry), and the JWKS server sees at most one
fetch per second per worker. tests/auth_app.py verifies JWTs against the
JWKS of tests/auth_servers.py, both real processes on loopback."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jwt
import pytest
import requests
from auth_servers import AuthServer
from conftest import GunicornServer
from cryptography.hazmat.primitives.asymmetric import rsa

pytestmark = pytest.mark.e2e

WORKERS = 2


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def jwks_server(tmp_path: Path) -> Iterator[AuthServer]:
    server = AuthServer(tmp_path / "jwks-state.json").start()
    public: dict[str, str] = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(rsa_key().public_key()))
    server.set_jwks({"keys": [{**public, "kid": "published", "use": "sig", "alg": "RS256"}]})
    yield server
    server.stop()


def forged_tokens(count: int) -> list[str]:
    """Tokens signed by a key nobody published, each naming another key id."""
    key, now = rsa_key(), int(time.time())
    claims = {"sub": "mallory", "iat": now, "exp": now + 600}
    return [jwt.encode(claims, key, algorithm="RS256", headers={"kid": f"forged-{n}-{time.monotonic_ns()}"})
            for n in range(count)]


def post(url: str, token: str) -> requests.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover",
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                 "io.modelcontextprotocol/clientCapabilities": {}}}}
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}
    # A fresh connection per call, so gunicorn spreads them over both workers.
    return requests.post(url, json=body, headers={**headers, "Connection": "close"}, timeout=30)


def test_forged_key_ids_are_401_on_every_worker_and_fetch_at_most_once_per_second_per_worker(
    gunicorn_server: Callable[..., GunicornServer], jwks_server: AuthServer, tmp_path: Path
) -> None:
    server = gunicorn_server("tests.auth_app:app", workers=WORKERS, threads=4, env={
        "FLASK_MCP_AUTH": "true",
        "FLASK_MCP_JWKS_URL": jwks_server.jwks_url,
        "FLASK_MCP_AUTH_SERVERS": json.dumps([jwks_server.url]),
        "FLASK_MCP_BACKEND": f"sqlite:///{tmp_path / 'sessions.sqlite3'}",
    })
    answers: list[requests.Response] = []
    with ThreadPoolExecutor(8) as pool:
        answers += pool.map(lambda token: post(server.url, token), forged_tokens(20))
        time.sleep(2.0)  # past the refetch interval: each worker may fetch once more
        answers += pool.map(lambda token: post(server.url, token), forged_tokens(20))

    assert [a.status_code for a in answers] == [401] * 40, [(a.status_code, a.text) for a in answers]
    assert all('error="invalid_token"' in a.headers["WWW-Authenticate"] for a in answers)
    fetches = sorted(jwks_server.jwks_times())
    assert 1 <= len(fetches) <= 2 * WORKERS, fetches  # one per worker per burst at most
    for i, at in enumerate(fetches):  # in any one second, at most one fetch per worker
        assert len([t for t in fetches[i:] if t - at < 1.0]) <= WORKERS, fetches
