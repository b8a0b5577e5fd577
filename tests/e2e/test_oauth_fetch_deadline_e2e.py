"""Slow Client ID Metadata Documents cannot take a worker (issue 32, item 1):
example/oauth_app.py under a real gunicorn worker with 4 threads; as many
authorization requests as ``MCP_OAUTH_CIMD_MAX_FETCHES`` allows (2) name
documents on a server that trickles them one byte every half second, two
more are refused at once (503 ``temporarily_unavailable``), and
``/mcp/health`` keeps answering in under a second meanwhile; every
authorization request is answered within ``MCP_OAUTH_CIMD_TIMEOUT`` plus one
second."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from conftest import GunicornServer
from oauth_fixtures import TricklingSite, pkce, self_signed_certificate

pytestmark = pytest.mark.e2e

TIMEOUT = 3
CAP = 2  # MCP_OAUTH_CIMD_MAX_FETCHES's default


@pytest.fixture(params=["headers", "body"])
def trickling(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TricklingSite]:
    server = TricklingSite(request.param, cert_files=self_signed_certificate(tmp_path)).start()
    yield server
    server.stop()


def test_trickled_documents_leave_the_worker_answering_health(
    gunicorn_server: Callable[..., GunicornServer], trickling: TricklingSite, tmp_path: Path
) -> None:
    server = gunicorn_server("example.oauth_app:app", workers=1, threads=4, env={
        "FLASK_MCP_BACKEND": f"sqlite:///{tmp_path / 'sessions.sqlite3'}",
        "FLASK_MCP_OAUTH_STORE": f"sqlite:///{tmp_path / 'oauth.sqlite3'}",
        "FLASK_MCP_OAUTH_CIMD_ALLOW_LOOPBACK": "true",
        "FLASK_MCP_OAUTH_CIMD_CA_BUNDLE": str(tmp_path / "cimd-cert.pem"),
        "FLASK_MCP_OAUTH_CIMD_TIMEOUT": str(TIMEOUT),
        "FLASK_MEMBERS": "alice:wonderland",
    })
    base = server.url.removesuffix("/mcp")
    signed_in = requests.Session()
    login = signed_in.post(base + "/login", data={"username": "alice", "password": "wonderland"},
                           allow_redirects=False, timeout=30)
    assert login.status_code == 302, login.text
    cookies = signed_in.cookies.get_dict()

    def authorize(n: int) -> tuple[int, str, float]:
        started = time.monotonic()
        answer = requests.get(base + "/oauth/authorize", cookies=cookies, timeout=60, params={
            "response_type": "code", "client_id": f"{trickling.base}/clients/{n}.json",
            "redirect_uri": "https://127.0.0.1/callback", "state": "s", "scope": "books:read",
            "resource": server.url, "code_challenge": pkce()[1], "code_challenge_method": "S256"})
        return answer.status_code, answer.json()["error"], time.monotonic() - started

    with ThreadPoolExecutor(CAP) as slow_pool:
        slow = [slow_pool.submit(authorize, n) for n in range(CAP)]
        deadline = time.monotonic() + 30
        while trickling.requests < CAP and time.monotonic() < deadline:  # both fetches under way
            time.sleep(0.02)
        assert trickling.requests == CAP
        beyond = [authorize(n) for n in range(CAP, CAP + 2)]
        health = []
        while not all(future.done() for future in slow):
            started = time.monotonic()
            assert requests.get(server.url + "/health", timeout=30).status_code == 200
            health.append(time.monotonic() - started)
            time.sleep(0.1)
        answers = [future.result() for future in slow]

    # Each bound is the brief's; the deadline is the server's watchdog, not the test's speed.
    assert [(status, error) for status, error, _ in answers] == [(400, "invalid_client")] * CAP
    assert all(elapsed < TIMEOUT + 1 for _, _, elapsed in answers), answers
    assert [(status, error) for status, error, _ in beyond] == [(503, "temporarily_unavailable")] * 2
    assert all(elapsed < 1 for _, _, elapsed in beyond), beyond
    assert trickling.requests == CAP  # the refused ones fetched nothing
    assert health and max(health) < 1.0, health
