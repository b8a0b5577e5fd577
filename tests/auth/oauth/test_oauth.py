"""The app as its own authorization server (MCP_OAUTH), through Flask's test
client: the whole code flow, then each way it must refuse. Client ID
Metadata Documents are served for real over HTTPS on loopback (tests/oauth_fixtures.py)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from flask import Flask
from flask.testing import FlaskClient
from oauth_fixtures import ClientSite, example_app, pkce
from werkzeug.test import TestResponse

pytest.importorskip("authlib")
from flask_mcp.auth.oauth import oauth_server  # noqa: E402

RESOURCE = "http://localhost/mcp"
REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture
def site(tmp_path: Path) -> Iterator[ClientSite]:
    site = ClientSite(tmp_path).start()
    yield site
    site.stop()


make_app = example_app


def redis_store_url(request: pytest.FixtureRequest, kind: str) -> str:
    """A Redis for the OAuth store: the one on 127.0.0.1:6379, or a Sentinel deployment or a
    cluster the tests start (tests/redis_server.py), as the backend tests use them."""
    redis = pytest.importorskip("redis")
    if kind == "redis-sentinel":
        url: str = request.getfixturevalue("sentinel_deployment").url()
        return url
    if kind == "redis-cluster":
        from redis_server import shared_cluster

        cluster_url: str = shared_cluster().url
        return cluster_url
    try:
        redis.Redis.from_url(REDIS_URL).ping()
    except redis.RedisError:
        if os.environ.get("CI"):
            pytest.fail("Redis is not reachable on 127.0.0.1:6379")
        pytest.skip("Redis is not reachable on 127.0.0.1:6379")
    return REDIS_URL


@pytest.fixture(params=["sqlite", "redis", "redis-sentinel", "redis-cluster", "postgresql"])
def app(request: pytest.FixtureRequest, tmp_path: Path, site: ClientSite) -> Iterator[Flask]:
    """The example members' app, its OAuth state in SQLite (the default), Redis, the primary a
    Sentinel names, a Redis Cluster (each by its MCP_BACKEND-style URL), or a PostgreSQL
    database of its own on the test session's cluster (tests/postgres_server.py)."""
    if request.param == "sqlite":
        yield make_app(tmp_path, site)
        return
    if request.param == "postgresql":
        from postgres_server import contract_database, empty_sql_tables

        app = make_app(tmp_path, site, MCP_OAUTH_STORE=contract_database())
        store = oauth_server(app).store
        empty_sql_tables(store.database)  # the session's one database, emptied for each test
        yield app
        store.database.close()
        return
    url = redis_store_url(request, request.param)
    prefix = f"flask-mcp-test-oauth-{os.getpid()}-{time.monotonic_ns()}:"
    app = make_app(tmp_path, site, MCP_OAUTH_STORE=url, MCP_OAUTH_STORE_PREFIX=prefix)
    yield app
    client = oauth_server(app).store.redis
    for key in client.scan_iter(prefix + "*"):
        client.delete(key)
    client.close()


@pytest.fixture
def browser(app: Flask) -> FlaskClient:
    """A signed-in member's browser."""
    client = app.test_client()
    response = client.post("/login", data={"username": "alice", "password": "wonderland", "next": "/login"})
    assert response.status_code == 302
    return client


def authorize_params(client_id: str, challenge: str | None, redirect_uri: str, **extra: str) -> dict[str, str]:
    params = {"response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri, "state": "s-1",
              "scope": "books:read", "resource": RESOURCE}
    if challenge is not None:
        params.update(code_challenge=challenge, code_challenge_method="S256")
    params.update(extra)
    return {k: v for k, v in params.items() if v != ""}


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found, page
    return found.group(1)


def consent(browser: FlaskClient, params: dict[str, str], decision: str = "allow") -> dict[str, str]:
    """Open the consent page, answer it; the query the client's redirect URI receives."""
    page = browser.get("/oauth/authorize", query_string=params)
    assert page.status_code == 200, page.data
    answer = browser.post("/oauth/authorize", query_string=params,
                          data={"csrf_token": csrf_of(page.text), "decision": decision})
    assert answer.status_code == 302, answer.data
    location = urlsplit(answer.headers["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == params["redirect_uri"]
    return {k: v[0] for k, v in parse_qs(location.query).items()}


def exchange(client: FlaskClient, **form: str) -> TestResponse:
    return client.post("/oauth/token", data={"grant_type": "authorization_code", "resource": RESOURCE, **form})


def json_of(response: TestResponse) -> Any:
    """The response's JSON body; the test fails here when it has none."""
    body = response.json
    assert body is not None, response.data
    return body


def get_code(browser: FlaskClient, site: ClientSite, client_id: str) -> tuple[str, str]:
    verifier, challenge = pkce()
    answer = consent(browser, authorize_params(client_id, challenge, site.redirect_uri))
    assert answer["state"] == "s-1"
    return answer["code"], verifier


def call(
    client: FlaskClient, token: str, method: str = "tools/list", params: dict[str, Any] | None = None
) -> TestResponse:
    """A stateless (2026-07-28) request with the bearer token."""
    params = dict(params or {})
    params["_meta"] = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                       "io.modelcontextprotocol/clientCapabilities": {}}
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
    if "name" in params:
        headers["Mcp-Name"] = params["name"]
    return client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                       headers=headers)


# ---------------------------------------------------------------------- discovery


def test_metadata_names_the_app_as_its_own_authorization_server(app: Flask) -> None:
    client = app.test_client()
    server = json_of(client.get("/.well-known/oauth-authorization-server"))
    assert server["issuer"] == "http://localhost"
    assert server["token_endpoint"] == "http://localhost/oauth/token"
    assert server["code_challenge_methods_supported"] == ["S256"]
    assert server["client_id_metadata_document_supported"] is True
    resource = json_of(client.get("/.well-known/oauth-protected-resource/mcp"))
    assert resource["authorization_servers"] == ["http://localhost"]
    assert "books:read" in resource["scopes_supported"]


def test_authorize_sends_a_visitor_to_the_login_page_first(app: Flask, site: ClientSite) -> None:
    params = authorize_params(site.add_client("host"), pkce()[1], site.redirect_uri)
    response = app.test_client().get("/oauth/authorize", query_string=params)
    assert response.status_code == 302
    location = urlsplit(response.headers["Location"])
    assert location.path == "/login"
    assert parse_qs(location.query)["next"][0].startswith("/oauth/authorize?")


# ---------------------------------------------------------------------- the flow


def test_consent_page_names_client_redirect_host_and_scopes_and_refuses_framing(
        browser: FlaskClient, site: ClientSite) -> None:
    client_id = site.add_client("host", client_name="Claude Test Host")
    page = browser.get("/oauth/authorize", query_string=authorize_params(client_id, pkce()[1], site.redirect_uri))
    assert page.status_code == 200
    assert "Claude Test Host" in page.text
    assert urlsplit(site.redirect_uri).netloc in page.text
    assert "books:read" in page.text
    assert page.headers["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]


def test_code_token_tools_refresh_rotation_and_reuse_detection(browser: FlaskClient, site: ClientSite) -> None:
    client_id = site.add_client("host")
    code, verifier = get_code(browser, site, client_id)
    api = browser.application.test_client()
    tokens = exchange(api, code=code, code_verifier=verifier, client_id=client_id, redirect_uri=site.redirect_uri)
    assert tokens.status_code == 200, tokens.data
    first = json_of(tokens)
    assert first["token_type"].lower() == "bearer" and first["refresh_token"]
    answer = call(api, first["access_token"], "tools/call", {"name": "whoami", "arguments": {}})
    assert answer.status_code == 200, answer.data
    assert json_of(answer)["result"]["content"][0]["text"] == "alice"

    refreshed = api.post("/oauth/token", data={"grant_type": "refresh_token", "client_id": client_id,
                                               "refresh_token": first["refresh_token"], "resource": RESOURCE})
    assert refreshed.status_code == 200, refreshed.data
    second = json_of(refreshed)
    assert second["refresh_token"] != first["refresh_token"]
    assert call(api, second["access_token"]).status_code == 200

    # The rotated refresh token used again: refused, and the whole family is revoked.
    reused = api.post("/oauth/token", data={"grant_type": "refresh_token", "client_id": client_id,
                                            "refresh_token": first["refresh_token"]})
    assert reused.status_code == 400 and json_of(reused)["error"] == "invalid_grant"
    refused = call(api, second["access_token"])
    assert refused.status_code == 401
    assert "revoked" in json_of(refused)["error"]["message"]


def test_denying_consent_sends_access_denied(browser: FlaskClient, site: ClientSite) -> None:
    params = authorize_params(site.add_client("host"), pkce()[1], site.redirect_uri)
    answer = consent(browser, params, decision="deny")
    assert answer["error"] == "access_denied" and "code" not in answer


def test_revocation_endpoint_stops_the_token(browser: FlaskClient, site: ClientSite) -> None:
    client_id = site.add_client("host")
    code, verifier = get_code(browser, site, client_id)
    api = browser.application.test_client()
    access = json_of(exchange(api, code=code, code_verifier=verifier, client_id=client_id,
                              redirect_uri=site.redirect_uri))["access_token"]
    assert call(api, access).status_code == 200
    revoked = api.post("/oauth/revoke", data={"token": access, "client_id": client_id})
    assert revoked.status_code == 200
    assert call(api, access).status_code == 401


def test_user_sees_and_disconnects_a_client(browser: FlaskClient, site: ClientSite) -> None:
    client_id = site.add_client("host", client_name="Desk Agent")
    code, verifier = get_code(browser, site, client_id)
    api = browser.application.test_client()
    access = json_of(exchange(api, code=code, code_verifier=verifier, client_id=client_id,
                              redirect_uri=site.redirect_uri))["access_token"]
    server = oauth_server(browser.application)
    assert [c.client_id for c in server.connections("alice")] == [client_id]
    page = browser.get("/oauth/connections")
    assert "Desk Agent" in page.text and page.headers["X-Frame-Options"] == "DENY"
    forged = browser.post("/oauth/connections", data={"client_id": client_id})
    assert forged.status_code == 400
    assert call(api, access).status_code == 200
    done = browser.post("/oauth/connections", data={"client_id": client_id, "csrf_token": csrf_of(page.text)})
    assert done.status_code == 302
    assert server.connections("alice") == []
    assert call(api, access).status_code == 401


# ---------------------------------------------------------------------- refusals


@pytest.mark.parametrize("pkce_params", [{}, {"code_challenge_method": "plain"}], ids=["missing", "plain"])
def test_authorize_refuses_missing_or_plain_pkce(browser: FlaskClient, site: ClientSite,
                                                 pkce_params: dict[str, str]) -> None:
    verifier, _ = pkce()
    params = authorize_params(site.add_client("host"), None, site.redirect_uri)
    if pkce_params:
        params.update(code_challenge=verifier, **pkce_params)
    response = browser.get("/oauth/authorize", query_string=params)
    assert response.status_code == 302
    answer = parse_qs(urlsplit(response.headers["Location"]).query)
    assert answer["error"] == ["invalid_request"] and "code" not in answer
    assert "S256" in answer["error_description"][0] or "PKCE" in answer["error_description"][0]


def test_token_refuses_a_wrong_code_verifier(browser: FlaskClient, site: ClientSite) -> None:
    client_id = site.add_client("host")
    code, _ = get_code(browser, site, client_id)
    response = exchange(browser.application.test_client(), code=code, code_verifier=pkce()[0],
                        client_id=client_id, redirect_uri=site.redirect_uri)
    assert response.status_code == 400 and json_of(response)["error"] == "invalid_grant"


def test_authorize_refuses_an_unregistered_redirect_uri_without_redirecting(
        browser: FlaskClient, site: ClientSite) -> None:
    params = authorize_params(site.add_client("host"), pkce()[1], "https://attacker.example/cb")
    response = browser.get("/oauth/authorize", query_string=params)
    assert response.status_code == 400
    assert "Location" not in response.headers
    assert json_of(response)["error"] == "invalid_request"


def test_token_refuses_a_mismatched_redirect_uri(browser: FlaskClient, site: ClientSite) -> None:
    other = site.base + "/other-callback"
    client_id = site.add_client("host", redirect_uris=[site.redirect_uri, other])
    code, verifier = get_code(browser, site, client_id)
    response = exchange(browser.application.test_client(), code=code, code_verifier=verifier,
                        client_id=client_id, redirect_uri=other)
    assert response.status_code == 400 and json_of(response)["error"] == "invalid_grant"


def test_a_code_works_once(browser: FlaskClient, site: ClientSite) -> None:
    client_id = site.add_client("host")
    code, verifier = get_code(browser, site, client_id)
    api = browser.application.test_client()
    form = {"code": code, "code_verifier": verifier, "client_id": client_id, "redirect_uri": site.redirect_uri}
    assert exchange(api, **form).status_code == 200
    again = exchange(api, **form)
    assert again.status_code == 400 and json_of(again)["error"] == "invalid_grant"


def test_a_replayed_code_revokes_the_tokens_of_its_first_exchange(browser: FlaskClient, site: ClientSite) -> None:
    # OAuth 2.1 4.1.3 / RFC 6749 4.1.2: a code used twice was stolen, or the first use was;
    # the tokens it gave must stop working, access and refresh alike.
    client_id = site.add_client("host")
    code, verifier = get_code(browser, site, client_id)
    api = browser.application.test_client()
    form = {"code": code, "code_verifier": verifier, "client_id": client_id, "redirect_uri": site.redirect_uri}
    first = json_of(exchange(api, **form))
    assert call(api, first["access_token"]).status_code == 200  # working before the replay

    again = exchange(api, **form)

    assert again.status_code == 400 and json_of(again)["error"] == "invalid_grant"
    refused = call(api, first["access_token"])
    assert refused.status_code == 401 and 'error="invalid_token"' in refused.headers["WWW-Authenticate"]
    refresh = api.post("/oauth/token", data={"grant_type": "refresh_token", "client_id": client_id,
                                             "refresh_token": first["refresh_token"], "resource": RESOURCE})
    assert refresh.status_code == 400 and json_of(refresh)["error"] == "invalid_grant"


def test_a_replay_racing_the_first_exchange_still_revokes_its_tokens(browser: FlaskClient, site: ClientSite) -> None:
    # The replay lands after the first exchange took the code but before it saved its tokens:
    # the family is empty when the replay revokes it, so the first exchange must notice.
    app = browser.application
    store = oauth_server(app).store
    client_id = site.add_client("host")
    code, verifier = get_code(browser, site, client_id)
    form = {"code": code, "code_verifier": verifier, "client_id": client_id, "redirect_uri": site.redirect_uri}
    save_token = store.save_token
    replays: list[int] = []

    def replay_then_save(*args: Any) -> None:
        if not replays:
            replays.append(exchange(app.test_client(), **form).status_code)
        save_token(*args)

    store.save_token = replay_then_save
    first = exchange(app.test_client(), **form)

    assert replays == [400] and first.status_code == 200
    assert call(app.test_client(), json_of(first)["access_token"]).status_code == 401


def test_a_code_is_refused_to_another_client(browser: FlaskClient, site: ClientSite) -> None:
    victim = site.add_client("host")
    thief = site.add_client("thief")
    code, verifier = get_code(browser, site, victim)
    response = exchange(browser.application.test_client(), code=code, code_verifier=verifier,
                        client_id=thief, redirect_uri=site.redirect_uri)
    assert response.status_code == 400 and json_of(response)["error"] == "invalid_grant"


def test_a_token_for_another_resource_is_refused(browser: FlaskClient, site: ClientSite) -> None:
    client_id = site.add_client("host")
    other = "https://other.example/mcp"
    response = browser.get("/oauth/authorize", query_string=authorize_params(
        client_id, pkce()[1], site.redirect_uri, resource=other))
    assert response.status_code == 302
    assert parse_qs(urlsplit(response.headers["Location"]).query)["error"] == ["invalid_target"]
    code, verifier = get_code(browser, site, client_id)
    refused = exchange(browser.application.test_client(), code=code, code_verifier=verifier, client_id=client_id,
                       redirect_uri=site.redirect_uri, resource=other)
    assert refused.status_code == 400 and json_of(refused)["error"] == "invalid_target"


def test_authorize_refuses_a_scope_the_server_does_not_offer(browser: FlaskClient, site: ClientSite) -> None:
    params = authorize_params(site.add_client("host"), pkce()[1], site.redirect_uri, scope="books:read admin")
    response = browser.get("/oauth/authorize", query_string=params)
    assert response.status_code == 302
    answer = parse_qs(urlsplit(response.headers["Location"]).query)
    assert answer["error"] == ["invalid_scope"] and "admin" in answer["error_description"][0]


def test_consent_post_without_its_csrf_token_issues_no_code(browser: FlaskClient, site: ClientSite) -> None:
    params = authorize_params(site.add_client("host"), pkce()[1], site.redirect_uri)
    assert browser.get("/oauth/authorize", query_string=params).status_code == 200
    for forged in ({"decision": "allow"}, {"decision": "allow", "csrf_token": "guess"}):
        response = browser.post("/oauth/authorize", query_string=params, data=forged)
        assert response.status_code == 400
        assert "Location" not in response.headers


@pytest.mark.parametrize("host", ["10.0.0.7", "192.168.1.20", "169.254.169.254", "[fd00::1]"])
def test_a_metadata_document_on_a_private_address_is_not_fetched(browser: FlaskClient, site: ClientSite,
                                                                  host: str) -> None:
    client_id = f"https://{host}/clients/host.json"
    response = browser.get("/oauth/authorize", query_string=authorize_params(client_id, pkce()[1],
                                                                             site.redirect_uri))
    assert response.status_code == 400
    assert json_of(response)["error"] == "invalid_client"
    assert "private or internal address" in json_of(response)["error_description"]


def test_loopback_documents_need_the_test_only_setting(tmp_path: Path, site: ClientSite) -> None:
    app = make_app(tmp_path, site, MCP_OAUTH_CIMD_ALLOW_LOOPBACK=False)
    browser = app.test_client()
    browser.post("/login", data={"username": "alice", "password": "wonderland"})
    client_id = site.add_client("host")
    response = browser.get("/oauth/authorize", query_string=authorize_params(client_id, pkce()[1],
                                                                             site.redirect_uri))
    assert response.status_code == 400 and json_of(response)["error"] == "invalid_client"
    assert site.fetches == 0


def test_metadata_documents_are_cached(browser: FlaskClient, site: ClientSite) -> None:
    client_id = site.add_client("host")
    for _ in range(3):
        page = browser.get("/oauth/authorize", query_string=authorize_params(client_id, pkce()[1],
                                                                             site.redirect_uri))
        assert page.status_code == 200
    assert site.fetches == 1


def test_mcp_oauth_needs_mcp_auth(tmp_path: Path, site: ClientSite) -> None:
    from flask_mcp.config import ConfigError

    with pytest.raises(ConfigError, match="MCP_AUTH"):
        make_app(tmp_path, site, MCP_AUTH=False)
    with pytest.raises(ConfigError, match="MCP_OAUTH_STORE"):
        make_app(tmp_path, site, MCP_OAUTH_STORE="mongodb://db/oauth")


# ---------------------------------------------------------------------- RFC 7591 (optional)


def test_dynamic_registration_is_off_unless_configured(app: Flask) -> None:
    client = app.test_client()
    assert "registration_endpoint" not in json_of(client.get("/.well-known/oauth-authorization-server"))
    assert client.post("/oauth/register", json={"redirect_uris": ["https://host.example/cb"]}).status_code == 404


def test_a_dynamically_registered_public_client_completes_the_flow(tmp_path: Path, site: ClientSite) -> None:
    app = make_app(tmp_path, site, MCP_OAUTH_DYNAMIC_REGISTRATION=True)
    api = app.test_client()
    metadata = json_of(api.get("/.well-known/oauth-authorization-server"))
    assert metadata["registration_endpoint"] == "http://localhost/oauth/register"
    registered = api.post("/oauth/register", json={
        "client_name": "Registered Host", "redirect_uris": [site.redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
        "token_endpoint_auth_method": "none"})
    assert registered.status_code == 201, registered.data
    body = json_of(registered)
    assert "client_secret" not in body and body["token_endpoint_auth_method"] == "none"
    client_id = body["client_id"]

    browser = app.test_client()
    browser.post("/login", data={"username": "alice", "password": "wonderland"})
    page = browser.get("/oauth/authorize", query_string=authorize_params(client_id, pkce()[1], site.redirect_uri))
    assert "Registered Host" in page.text
    code, _ = get_code(browser, site, client_id)
    tokens = exchange(api, code=code, client_id=client_id, redirect_uri=site.redirect_uri)
    assert tokens.status_code == 400  # no code_verifier: refused like any other client's
    code, verifier = get_code(browser, site, client_id)
    tokens = exchange(api, code=code, code_verifier=verifier, client_id=client_id, redirect_uri=site.redirect_uri)
    assert tokens.status_code == 200, tokens.data
    assert call(api, json_of(tokens)["access_token"]).status_code == 200


@pytest.mark.parametrize("metadata", [
    {"redirect_uris": ["https://host.example/cb"], "token_endpoint_auth_method": "client_secret_basic"},
    {"client_name": "no redirect URIs", "token_endpoint_auth_method": "none"},
], ids=["confidential", "no-redirect-uris"])
def test_dynamic_registration_refuses_what_it_cannot_serve(tmp_path: Path, site: ClientSite,
                                                          metadata: dict[str, Any]) -> None:
    app = make_app(tmp_path, site, MCP_OAUTH_DYNAMIC_REGISTRATION=True)
    response = app.test_client().post("/oauth/register", json=metadata)
    assert response.status_code == 400
    assert json_of(response)["error"] == "invalid_client_metadata"


def test_an_oversized_or_mismatched_metadata_document_is_refused(browser: FlaskClient, site: ClientSite) -> None:
    big = site.add_client("big")
    site.documents["/clients/big.json"]["padding"] = "x" * 6000
    liar = site.add_client("liar")
    site.documents["/clients/liar.json"]["client_id"] = "https://claude.example/client.json"
    for client_id, reason in ((big, "over 5120 bytes"), (liar, "another client_id")):
        response = browser.get("/oauth/authorize", query_string=authorize_params(client_id, pkce()[1],
                                                                                 site.redirect_uri))
        assert response.status_code == 400
        assert json_of(response)["error"] == "invalid_client"
        assert reason in json_of(response)["error_description"]


def test_one_client_cannot_revoke_another_clients_token(browser: FlaskClient, site: ClientSite) -> None:
    client_id = site.add_client("host")
    other = site.add_client("other")
    code, verifier = get_code(browser, site, client_id)
    api = browser.application.test_client()
    access = json_of(exchange(api, code=code, code_verifier=verifier, client_id=client_id,
                              redirect_uri=site.redirect_uri))["access_token"]
    api.post("/oauth/revoke", data={"token": access, "client_id": other})
    assert call(api, access).status_code == 200


def test_the_flow_works_in_an_app_with_flask_wtf_csrf_protection(tmp_path: Path, site: ClientSite) -> None:
    from flask_wtf.csrf import CSRFProtect

    app = make_app(tmp_path, site)
    CSRFProtect(app).exempt(app.view_functions["login"])  # the example's login form has no Flask-WTF token
    browser = app.test_client()
    assert browser.post("/login", data={"username": "alice", "password": "wonderland"}).status_code == 302
    client_id = site.add_client("host")
    code, verifier = get_code(browser, site, client_id)
    tokens = exchange(app.test_client(), code=code, code_verifier=verifier, client_id=client_id,
                      redirect_uri=site.redirect_uri)
    assert tokens.status_code == 200, tokens.data


@pytest.mark.parametrize("kind", ["redis", "redis-cluster"])
def test_the_store_may_be_the_apps_own_redis_client(request: pytest.FixtureRequest, tmp_path: Path,
                                                    site: ClientSite, kind: str) -> None:
    redis = pytest.importorskip("redis")
    from redis.cluster import RedisCluster

    url = redis_store_url(request, kind)
    first_node = url.partition("://")[2].split(",")[0]  # redis+cluster://host:port,host:port...
    client = RedisCluster.from_url(f"redis://{first_node}") if kind == "redis-cluster" else redis.Redis.from_url(url)
    app = make_app(tmp_path, site, MCP_OAUTH_STORE=client, MCP_OAUTH_STORE_PREFIX=f"flask-mcp-test-own-{kind}:")
    assert oauth_server(app).store.redis is client
    browser = app.test_client()
    browser.post("/login", data={"username": "alice", "password": "wonderland"})
    client_id = site.add_client("own")
    code, verifier = get_code(browser, site, client_id)
    tokens = exchange(app.test_client(), code=code, code_verifier=verifier, client_id=client_id,
                      redirect_uri=site.redirect_uri)
    assert call(app.test_client(), json_of(tokens)["access_token"]).status_code == 200
    for key in client.scan_iter(f"flask-mcp-test-own-{kind}:*"):
        client.delete(key)
    client.close()


@pytest.mark.parametrize("url", ["redis+sentinel://127.0.0.1:1", "redis+cluster://:nope@", "memcached://x"])
def test_a_bad_store_url_is_refused_at_start_up_without_its_password(tmp_path: Path, site: ClientSite,
                                                                      url: str) -> None:
    from flask_mcp.config import ConfigError

    with pytest.raises(ConfigError) as refused:
        make_app(tmp_path, site, MCP_OAUTH_STORE=url)
    assert "MCP_OAUTH_STORE" in str(refused.value) and "nope" not in str(refused.value)
