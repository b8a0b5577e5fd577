"""A Client ID Metadata Document is fetched within ``MCP_OAUTH_CIMD_TIMEOUT``
seconds however slowly its server sends the headers or the body, and at most
``MCP_OAUTH_CIMD_MAX_FETCHES`` are fetched at once (beyond: 503
``temporarily_unavailable`` at once). A real HTTPS server on loopback sends
one byte every half second (tests/oauth_fixtures.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from oauth_fixtures import ClientSite, TricklingSite, pkce, self_signed_certificate
from test_oauth import RESOURCE, make_app

TIMEOUT = 1.5
#: Seconds past the timeout an answer may take: the brief's bound, and plenty for a loaded machine
#: (the deadline itself is enforced by a watchdog, not by the speed of the test).
SLACK = 1.0


@pytest.fixture
def site(tmp_path: Path) -> Iterator[ClientSite]:
    site = ClientSite(tmp_path).start()
    yield site
    site.stop()


@pytest.fixture(params=["headers", "body"])
def trickling(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TricklingSite]:
    # Its own certificate, in a folder of its own: the app trusts this one (below).
    folder = tmp_path / "trickle"
    folder.mkdir()
    server = TricklingSite(request.param, cert_files=self_signed_certificate(folder)).start()
    yield server
    server.stop()


def app_for(tmp_path: Path, site: ClientSite, trickling: TricklingSite, **config: Any) -> Flask:
    return make_app(tmp_path, site, MCP_OAUTH_CIMD_TIMEOUT=TIMEOUT,
                    MCP_OAUTH_CIMD_CA_BUNDLE=str(tmp_path / "trickle" / "cimd-cert.pem"), **config)


def authorize(app: Flask, client_id: str) -> Any:
    browser = app.test_client()
    browser.post("/login", data={"username": "alice", "password": "wonderland"})
    return browser.get("/oauth/authorize", query_string={
        "response_type": "code", "client_id": client_id, "redirect_uri": "https://127.0.0.1/callback",
        "state": "s-1", "scope": "books:read", "resource": RESOURCE, "code_challenge": pkce()[1],
        "code_challenge_method": "S256"})


def test_a_trickled_document_is_refused_within_the_timeout(tmp_path: Path, site: ClientSite,
                                                           trickling: TricklingSite) -> None:
    app = app_for(tmp_path, site, trickling)
    started = time.monotonic()
    response = authorize(app, trickling.base + "/clients/slow.json")
    elapsed = time.monotonic() - started

    assert trickling.requests == 1  # it was reached, and answered slowly
    assert response.status_code == 400 and response.json["error"] == "invalid_client"
    assert f"took too long to arrive (over {TIMEOUT:g} s)" in response.json["error_description"]
    assert elapsed < TIMEOUT + SLACK, elapsed


def test_fetches_beyond_the_cap_are_refused_at_once(tmp_path: Path, site: ClientSite,
                                                    trickling: TricklingSite) -> None:
    app = app_for(tmp_path, site, trickling, MCP_OAUTH_CIMD_MAX_FETCHES=1)
    slow: list[Any] = []
    first = threading.Thread(target=lambda: slow.append(authorize(app, trickling.base + "/clients/a.json")))
    first.start()
    deadline = time.monotonic() + 10
    while trickling.requests == 0 and time.monotonic() < deadline:  # the first fetch is under way
        time.sleep(0.01)

    started = time.monotonic()
    busy = authorize(app, trickling.base + "/clients/b.json")
    elapsed = time.monotonic() - started
    first.join(30)

    assert busy.status_code == 503 and busy.headers["Retry-After"] == "1"
    assert busy.json["error"] == "temporarily_unavailable"
    assert "being fetched already" in busy.json["error_description"]
    assert elapsed < TIMEOUT  # refused without waiting for the fetch in flight
    assert trickling.requests == 1 and slow[0].status_code == 400
    # The slot is free again once the slow fetch is over.
    assert authorize(app, trickling.base + "/clients/c.json").json["error"] == "invalid_client"
    assert trickling.requests == 2
