"""The consent and connected-apps pages (MCP_OAUTH), through Flask's test
client: what they show (the client's name, logo and home page, the account,
each scope's description, the resource, the redirect host), the client's
logo fetched by the server under the metadata documents' rules and served by
the app (never hot-linked), the fallbacks, "Not you?", and the last-used time
both stores keep. Client sites are real HTTPS servers on loopback
(tests/oauth_fixtures.py)."""

from __future__ import annotations

import os
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import unavailable
from flask import Blueprint, Flask
from flask.testing import FlaskClient
from oauth_fixtures import ClientSite, example_app, pkce, png

pytest.importorskip("authlib")
from flask_mcp.auth.oauth import oauth_server  # noqa: E402
from flask_mcp.auth.oauth.clients import ClientRejected, MetadataDocuments  # noqa: E402
from flask_mcp.auth.oauth.logos import MAX_LOGO_BYTES, PLACEHOLDER_SVG, Logos, image_type  # noqa: E402
from flask_mcp.auth.oauth.pages import ago  # noqa: E402
from flask_mcp.auth.oauth.sqlite_store import SQLiteOAuthStore  # noqa: E402

DESCRIPTIONS = {"books:read": "See the books you reserved"}
LOGO = png()


@pytest.fixture
def site(tmp_path: Path) -> Iterator[ClientSite]:
    site = ClientSite(tmp_path).start()
    site.files["/logo.png"] = (LOGO, "image/png")
    yield site
    site.stop()


def make_app(tmp_path: Path, site: ClientSite, **config: Any) -> Flask:
    return example_app(tmp_path, site, **{"MCP_OAUTH_SCOPE_DESCRIPTIONS": DESCRIPTIONS, **config})


@pytest.fixture(params=["sqlite", "redis"])
def app(request: pytest.FixtureRequest, tmp_path: Path, site: ClientSite) -> Iterator[Flask]:
    if request.param == "sqlite":
        yield make_app(tmp_path, site)
        return
    redis = pytest.importorskip("redis")
    client = redis.Redis.from_url("redis://127.0.0.1:6379/0")
    try:
        client.ping()
    except redis.RedisError:
        unavailable("Redis is not reachable on 127.0.0.1:6379")
    prefix = f"flask-mcp-test-pages-{os.getpid()}-{time.monotonic_ns()}:"
    yield make_app(tmp_path, site, MCP_OAUTH_STORE="redis://127.0.0.1:6379/0", MCP_OAUTH_STORE_PREFIX=prefix)
    for key in client.scan_iter(prefix + "*"):
        client.delete(key)


def signed_in(app: Flask, name: str = "alice") -> FlaskClient:
    browser = app.test_client()
    assert browser.post("/login", data={"username": name, "password": "wonderland"}).status_code == 302
    return browser


def params(site: ClientSite, client_id: str, scope: str = "books:read") -> dict[str, str]:
    return {"response_type": "code", "client_id": client_id, "redirect_uri": site.redirect_uri, "state": "s-1",
            "scope": scope, "code_challenge": pkce()[1], "code_challenge_method": "S256"}


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found, page
    return found.group(1)


def logo_src(page: str) -> str:
    found = re.search(r'<img class="logo"[^>]* src="([^"]+)"', page)
    assert found, page
    return found.group(1).replace("&amp;", "&")


def logo_client(site: ClientSite, name: str = "host", logo: str = "/logo.png", **metadata: Any) -> str:
    return site.add_client(name, client_name="Desk Agent", logo_uri=site.base + logo,
                           client_uri=site.base + "/about", **metadata)


# ---------------------------------------------------------------------- the consent page


def test_the_consent_page_shows_who_asks_for_what_for_whom_and_where_the_browser_goes(
        tmp_path: Path, site: ClientSite) -> None:
    app = make_app(tmp_path, site)
    browser = signed_in(app)
    page = browser.get("/oauth/authorize", query_string=params(site, logo_client(site)))
    assert page.status_code == 200
    text = page.text
    assert 'id="client-name">Desk Agent<' in text
    assert f'id="client-home" href="{site.base}/about"' in text
    assert 'id="account">alice<' in text
    assert "See the books you reserved<code>books:read</code>" in text
    assert 'id="resource">http://localhost/mcp<' in text
    assert f'id="redirect-host">{urlsplit(site.redirect_uri).netloc}<' in text
    assert "Corner Bookshop members" in text  # the server's title
    assert 'id="allow"' in text and 'id="deny"' in text
    # the logo is the app's own address; the client's origin appears in no img, link or style
    assert logo_src(text).startswith("/oauth/logo?client_id=")
    assert not re.search(r'(src|srcset)="https?://', text)
    assert site.file_fetches == []  # rendering the page fetched no logo: the browser asks the app for it
    policy = page.headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "img-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert page.headers["X-Frame-Options"] == "DENY"


def test_a_scope_without_a_description_is_shown_as_itself(tmp_path: Path, site: ClientSite) -> None:
    app = make_app(tmp_path, site, MCP_OAUTH_SCOPE_DESCRIPTIONS={})
    text = signed_in(app).get("/oauth/authorize", query_string=params(site, logo_client(site))).text
    assert "<code>books:read</code>" in text and "See the books" not in text
    no_scope = signed_in(app).get("/oauth/authorize", query_string=params(site, site.add_client("bare"), scope=""))
    assert "asks for no particular permission" in no_scope.text
    assert "its metadata on" in no_scope.text and 'id="client-home"' not in no_scope.text


@pytest.mark.parametrize("value", [["books:read"], {"books:read": ""}, {"books:read": 3}])
def test_scope_descriptions_must_map_scopes_to_text(tmp_path: Path, site: ClientSite, value: Any) -> None:
    from flask_mcp.config import ConfigError

    with pytest.raises(ConfigError, match="MCP_OAUTH_SCOPE_DESCRIPTIONS"):
        make_app(tmp_path, site, MCP_OAUTH_SCOPE_DESCRIPTIONS=value)


def test_a_client_uri_that_is_not_https_is_not_linked(tmp_path: Path, site: ClientSite) -> None:
    client_id = site.add_client("sly", client_name="Sly", client_uri="javascript:alert(1)",
                                logo_uri="http://127.0.0.1/logo.png")
    app = make_app(tmp_path, site)
    text = signed_in(app).get("/oauth/authorize", query_string=params(site, client_id)).text
    assert "javascript:" not in text and 'id="client-home"' not in text
    assert oauth_server(app).documents.get(client_id).logo_uri is None  # http: never fetched


def test_an_apps_own_consent_template_wins_and_keeps_its_own_assets(tmp_path: Path, site: ClientSite) -> None:
    (tmp_path / "own" / "mcp_oauth").mkdir(parents=True)
    (tmp_path / "own" / "mcp_oauth" / "mine.html").write_text(
        '<link rel="stylesheet" href="https://cdn.example/site.css"><p>{{ client_name }} for {{ account }}: '
        '{% for line in scope_lines %}{{ line.description }}{% endfor %}</p>')
    app = make_app(tmp_path, site, MCP_OAUTH_CONSENT_TEMPLATE="mcp_oauth/mine.html")
    app.register_blueprint(Blueprint("own", __name__, template_folder=str(tmp_path / "own")))
    page = signed_in(app).get("/oauth/authorize", query_string=params(site, logo_client(site)))
    assert page.text.endswith("Desk Agent for alice: See the books you reserved</p>")
    assert page.headers["Content-Security-Policy"] == "frame-ancestors 'none'"


# ---------------------------------------------------------------------- the logo


def test_the_logo_is_fetched_by_the_server_checked_and_served_by_the_app(tmp_path: Path, site: ClientSite) -> None:
    app = make_app(tmp_path, site)
    browser = signed_in(app)
    src = logo_src(browser.get("/oauth/authorize", query_string=params(site, logo_client(site))).text)
    for _ in range(2):
        image = browser.get(src)
        assert image.status_code == 200
        assert image.data == LOGO and image.mimetype == "image/png"
        assert image.headers["X-Content-Type-Options"] == "nosniff"
        assert "sandbox" in image.headers["Content-Security-Policy"]
        assert image.headers["Cross-Origin-Resource-Policy"] == "same-origin"
    assert site.file_fetches == ["/logo.png"]  # once: cached


@pytest.mark.parametrize(("body", "kind", "reason"), [
    (b"\x89PNG\r\n\x1a\n" + b"\0" * MAX_LOGO_BYTES, "image/png", f"over {MAX_LOGO_BYTES} bytes"),
    (b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>', "image/svg+xml",
     "not a PNG, JPEG, GIF or WebP image"),
    (b"<!doctype html><p>hello", "image/png", "not a PNG, JPEG, GIF or WebP image"),
], ids=["oversized", "svg", "html-labelled-png"])
def test_an_oversized_or_non_image_logo_is_refused_for_the_placeholder(
        tmp_path: Path, site: ClientSite, body: bytes, kind: str, reason: str) -> None:
    site.files["/bad-logo"] = (body, kind)
    app = make_app(tmp_path, site)
    server = oauth_server(app)
    with pytest.raises(ClientRejected, match=reason):
        server.logos.fetch(site.base + "/bad-logo")
    browser = signed_in(app)
    image = browser.get("/oauth/logo", query_string={"client_id": logo_client(site, logo="/bad-logo")})
    assert image.status_code == 200 and image.mimetype == "image/svg+xml" and image.data == PLACEHOLDER_SVG
    assert site.file_fetches.count("/bad-logo") == 2  # the direct fetch, then the route's (then cached)
    assert browser.get("/oauth/logo", query_string={"client_id": logo_client(site, logo="/bad-logo")}).data \
        == PLACEHOLDER_SVG
    assert site.file_fetches.count("/bad-logo") == 2


@pytest.mark.parametrize("logo_uri", ["https://10.0.0.7/logo.png", "https://169.254.169.254/latest/logo.png",
                                      "https://[fd00::1]/logo.png"])
def test_a_logo_on_an_unchecked_address_is_never_fetched(tmp_path: Path, site: ClientSite, logo_uri: str) -> None:
    app = make_app(tmp_path, site)
    with pytest.raises(ClientRejected, match="private or internal address"):
        oauth_server(app).logos.fetch(logo_uri)
    client_id = site.add_client("inward", logo_uri=logo_uri)
    image = signed_in(app).get("/oauth/logo", query_string={"client_id": client_id})
    assert image.data == PLACEHOLDER_SVG


def test_a_logo_on_loopback_needs_the_test_only_setting(site: ClientSite) -> None:
    logos = Logos(MetadataDocuments(allow_loopback=False, verify=str(site.cert_file)), cache_ttl=60)
    assert logos.get(site.base + "/logo.png") is None
    assert site.file_fetches == []
    allowed = Logos(MetadataDocuments(allow_loopback=True, verify=str(site.cert_file)), cache_ttl=60)
    assert allowed.get(site.base + "/logo.png") == (LOGO, "image/png")


@pytest.mark.parametrize("case", ["no-logo", "missing", "unknown-client"])
def test_the_placeholder_stands_in_for_a_missing_or_failing_logo(tmp_path: Path, site: ClientSite,
                                                                 case: str) -> None:
    app = make_app(tmp_path, site)
    client_id = {"no-logo": site.add_client("plain"),
                 "missing": logo_client(site, logo="/gone.png"),
                 "unknown-client": site.base + "/clients/nobody.json"}[case]
    image = signed_in(app).get("/oauth/logo", query_string={"client_id": client_id})
    assert image.status_code == 200
    assert image.mimetype == "image/svg+xml" and image.data == PLACEHOLDER_SVG
    assert "sandbox" in image.headers["Content-Security-Policy"]


def test_the_logo_route_needs_a_signed_in_user_and_a_client(tmp_path: Path, site: ClientSite) -> None:
    app = make_app(tmp_path, site)
    client_id = logo_client(site)
    assert app.test_client().get("/oauth/logo", query_string={"client_id": client_id}).status_code == 401
    browser = signed_in(app)
    missing = browser.get("/oauth/logo")
    assert missing.status_code == 400 and "client_id" in missing.text
    assert browser.get("/oauth/logo", query_string={"client_id": "x" * 3000}).status_code == 400
    assert site.file_fetches == []


def test_image_types_are_proven_by_their_bytes() -> None:
    assert image_type(LOGO) == "image/png"
    assert image_type(b"\xff\xd8\xff\xe0rest") == "image/jpeg"
    assert image_type(b"GIF89a...") == "image/gif"
    assert image_type(b"RIFF\0\0\0\0WEBPVP8 ") == "image/webp"
    assert image_type(b"<svg") is None and image_type(b"") is None


# ---------------------------------------------------------------------- "Not you?"


def test_not_you_signs_out_and_comes_back_to_the_consent_page(tmp_path: Path, site: ClientSite) -> None:
    app = make_app(tmp_path, site)
    browser = signed_in(app)
    query = params(site, logo_client(site))
    page = browser.get("/oauth/authorize", query_string=query).text
    back = re.search(r'name="next" value="([^"]+)"', page)
    assert back is not None
    next_path = back.group(1).replace("&amp;", "&")
    assert browser.post("/oauth/switch-account", data={"next": next_path}).status_code == 400  # no CSRF token
    assert browser.post("/oauth/switch-account", data={"next": "https://evil.example/",
                                                       "csrf_token": csrf_of(page)}).status_code == 400
    assert browser.get("/oauth/authorize", query_string=query).status_code == 200  # still signed in
    switched = browser.post("/oauth/switch-account", data={"next": next_path, "csrf_token": csrf_of(page)})
    assert switched.status_code == 302
    location = urlsplit(switched.headers["Location"])
    assert location.path == "/login" and parse_qs(location.query)["next"] == [next_path]
    assert browser.get("/oauth/authorize", query_string=query).status_code == 302  # signed out: to the login page


def test_not_you_is_hidden_when_the_app_gives_no_way_to_sign_out(tmp_path: Path, site: ClientSite) -> None:
    app = make_app(tmp_path, site, MCP_OAUTH_CURRENT_USER=lambda: "carol")
    page = app.test_client().get("/oauth/authorize", query_string=params(site, logo_client(site)))
    assert 'id="account">carol<' in page.text and "switch-account" not in page.text


# ---------------------------------------------------------------------- connected apps


def connect(app: Flask, browser: FlaskClient, site: ClientSite, client_id: str) -> str:
    """Allow ``client_id`` and exchange its code: the access token."""
    verifier, challenge = pkce()
    query = {**params(site, client_id), "code_challenge": challenge}
    page = browser.get("/oauth/authorize", query_string=query)
    answer = browser.post("/oauth/authorize", query_string=query,
                          data={"csrf_token": csrf_of(page.text), "decision": "allow"})
    code = parse_qs(urlsplit(answer.headers["Location"]).query)["code"][0]
    tokens = app.test_client().post("/oauth/token", data={
        "grant_type": "authorization_code", "code": code, "code_verifier": verifier, "client_id": client_id,
        "redirect_uri": site.redirect_uri})
    assert tokens.status_code == 200, tokens.data
    token: str = tokens.json["access_token"] if tokens.json else ""
    return token


def test_connected_apps_shows_name_logo_scopes_and_when_each_was_last_used(app: Flask, site: ClientSite) -> None:
    browser = signed_in(app)
    client_id = logo_client(site)
    token = connect(app, browser, site, client_id)
    page = browser.get("/oauth/connections").text
    assert '<h2 class="app-name">Desk Agent</h2>' in page
    assert logo_src(page).startswith("/oauth/logo?client_id=")
    assert "See the books you reserved<code>books:read</code>" in page
    assert "Not used yet" in page and 'class="revoke danger">Disconnect<' in page
    assert oauth_server(app).connections("alice")[0].last_used is None

    before = time.time()
    answer = app.test_client().post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}}, headers={
        "Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"})
    assert answer.status_code == 200, answer.data
    used = oauth_server(app).connections("alice")[0].last_used
    assert used is not None and before <= used <= time.time()
    page = browser.get("/oauth/connections").text
    assert "Last used <time" in page and ">just now</time>" in page


def test_a_use_is_recorded_at_most_once_a_minute_per_token(app: Flask, site: ClientSite) -> None:
    server = oauth_server(app)
    token = connect(app, signed_in(app), site, logo_client(site))
    server.verifier.verify(token)
    first = server.connections("alice")[0].last_used
    assert first is not None
    server.verifier.verify(token)
    assert server.connections("alice")[0].last_used == first
    server.verifier.use_resolution = 0
    server.verifier.verify(token)
    later = server.connections("alice")[0].last_used
    assert later is not None and later > first


def test_a_store_marks_uses_of_live_tokens_only(app: Flask, site: ClientSite) -> None:
    store = oauth_server(app).store
    store.mark_used("no-such-token", time.time())  # a token that is gone stays gone
    assert store.token_by_access("no-such-token") is None


def test_an_older_sqlite_file_gains_the_last_used_column(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE oauth_tokens (access_hash TEXT PRIMARY KEY, refresh_hash TEXT UNIQUE, family TEXT, "
                "client_id TEXT, user_id TEXT, scope TEXT, resource TEXT, issued_at REAL, expires_at REAL, "
                "refresh_expires_at REAL, revoked INTEGER, rotated INTEGER, client_name TEXT)")
    now = time.time()
    old.execute("INSERT INTO oauth_tokens VALUES ('a', 'r', 'f', 'c', 'u', 's', 'res', ?, ?, ?, 0, 0, 'Old')",
                (now, now + 60, now + 600))
    old.commit()
    old.close()
    store = SQLiteOAuthStore(str(path))
    assert store.connections("u")[0].last_used is None
    store.mark_used("a", now + 1)
    assert store.connections("u")[0].last_used == now + 1


def test_ago_reads_like_a_person() -> None:
    now = 1_000_000_000.0
    assert ago(now - 5, now) == "just now"
    assert ago(now - 60, now) == "1 minute ago"
    assert ago(now - 3 * 3600, now) == "3 hours ago"
    assert ago(now - 2 * 86400, now) == "2 days ago"
    assert ago(now - 90 * 86400, now) == "on 11 Jun 2001"
