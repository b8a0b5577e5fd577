"""Fetching Client ID Metadata Documents without DNS rebinding: the client_id
host is resolved once, every address is checked, and the connection goes to
a checked address with TLS verified for the host name. A test-controlled
resolver stands in for DNS; all traffic stays on loopback (the metadata
document server of tests/oauth_fixtures.py)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from oauth_fixtures import ClientSite, example_app, pkce

pytest.importorskip("authlib")
from flask_mcp.auth.oauth import oauth_server  # noqa: E402


@pytest.fixture
def site(tmp_path: Path) -> Iterator[ClientSite]:
    site = ClientSite(tmp_path).start()
    yield site
    site.stop()


@pytest.fixture
def app(tmp_path: Path, site: ClientSite) -> Flask:
    return example_app(tmp_path, site)


@pytest.fixture
def browser(app: Flask) -> FlaskClient:
    client = app.test_client()
    client.post("/login", data={"username": "alice", "password": "wonderland"})
    return client


class Resolver:
    """Answers with the next list of addresses on each call (the last one repeats) and
    records the calls: a DNS server that may change its answer between lookups."""

    def __init__(self, *answers: list[str]) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, int]] = []

    def __call__(self, host: str, port: int, *args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
        self.calls.append((host, port))
        addresses = self.answers[min(len(self.calls), len(self.answers)) - 1]
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "",
                 (a, port)) for a in addresses]


def authorize(browser: FlaskClient, site: ClientSite, client_id: str) -> Any:
    return browser.get("/oauth/authorize", query_string={
        "response_type": "code", "client_id": client_id, "redirect_uri": site.redirect_uri, "state": "s-1",
        "scope": "books:read", "resource": "http://localhost/mcp", "code_challenge": pkce()[1],
        "code_challenge_method": "S256"})


def test_the_document_is_fetched_from_the_address_that_was_checked(app: Flask, browser: FlaskClient,
                                                                   site: ClientSite) -> None:
    # A rebinding DNS server: loopback (allowed by the test setting) to the first lookup, an
    # internal address to any later one. Only one lookup may happen, and the fetch must use it.
    resolver = Resolver(["127.0.0.1"], ["10.0.0.1"])
    oauth_server(app).documents.resolve = resolver
    client_id = site.add_client("pinned", client_name="Pinned Client", host="cimd.test")
    page = authorize(browser, site, client_id)
    assert page.status_code == 200, page.get_data(as_text=True)
    assert "Pinned Client" in page.get_data(as_text=True)
    assert resolver.calls == [("cimd.test", site.httpd.server_address[1])]
    assert site.fetches == 1
    assert site.hosts == [f"cimd.test:{site.httpd.server_address[1]}"]


@pytest.mark.parametrize("addresses", [["1.1.1.1", "10.0.0.1"], ["10.0.0.1", "1.1.1.1"],
                                       ["127.0.0.1", "169.254.169.254"], ["2606:4700::1111", "fd00::1"]])
def test_a_host_with_any_internal_address_is_refused(app: Flask, browser: FlaskClient, site: ClientSite,
                                                     addresses: list[str]) -> None:
    resolver = Resolver(addresses)
    oauth_server(app).documents.resolve = resolver
    client_id = site.add_client("mixed", host="cimd.test")
    response = authorize(browser, site, client_id)
    assert response.status_code == 400
    assert response.json["error"] == "invalid_client"
    internal = next(a for a in addresses if a not in ("1.1.1.1", "127.0.0.1", "2606:4700::1111"))
    assert f"private or internal address ({internal})" in response.json["error_description"]
    assert len(resolver.calls) == 1 and site.fetches == 0


def test_tls_is_verified_for_the_host_name_not_the_pinned_address(app: Flask, browser: FlaskClient,
                                                                  site: ClientSite) -> None:
    # The site's certificate names 127.0.0.1 and cimd.test: another name resolving to the
    # same checked address must fail verification rather than be trusted for the address.
    oauth_server(app).documents.resolve = Resolver(["127.0.0.1"])
    client_id = site.add_client("impostor", host="impostor.test")
    response = authorize(browser, site, client_id)
    assert response.status_code == 400
    assert response.json["error"] == "invalid_client"
    assert "could not be fetched (SSLError)" in response.json["error_description"]
    assert site.fetches == 0


def test_a_host_that_does_not_resolve_is_refused(app: Flask, browser: FlaskClient, site: ClientSite) -> None:
    def nowhere(host: str, port: int, *args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    oauth_server(app).documents.resolve = nowhere
    response = authorize(browser, site, site.add_client("gone", host="gone.test"))
    assert response.status_code == 400
    assert "'gone.test' does not resolve" in response.json["error_description"]


def test_a_non_ascii_host_is_resolved_by_its_idna_name(app: Flask, browser: FlaskClient, site: ClientSite) -> None:
    resolver = Resolver(["10.0.0.1"])
    oauth_server(app).documents.resolve = resolver
    response = authorize(browser, site, "https://bücher.example/clients/idn.json")
    assert response.status_code == 400
    assert resolver.calls == [("xn--bcher-kva.example", 443)]
    assert "private or internal address (10.0.0.1)" in response.json["error_description"]
