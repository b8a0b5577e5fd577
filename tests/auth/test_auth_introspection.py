"""RFC 7662 introspection end to end: the app (Flask test client) checks
tokens against a real authorization server running as a second process on
loopback (tests/auth_servers.py), which counts the requests it gets."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from auth_servers import AuthServer
from conftest import validate_message
from flask import Flask

from flask_mcp import MCP, Context
from flask_mcp.auth import token_hash
from flask_mcp.auth.verifiers import IntrospectionVerifier
from flask_mcp.testing import MCPTestClient

MakeClient = Callable[..., MCPTestClient]

RESOURCE = "https://mcp.example.com/mcp"


@pytest.fixture
def auth_server(tmp_path: Path) -> Iterator[AuthServer]:
    server = AuthServer(tmp_path / "as-state.json").start()
    yield server
    server.stop()


def claims(
    subject: str, scope: str = "files:read", *, audience: Any = RESOURCE, expires_in: float = 3600
) -> dict[str, Any]:
    return {"sub": subject, "scope": scope, "aud": audience, "exp": int(time.time() + expires_in),
            "client_id": "test-client", "iss": "http://127.0.0.1"}


def build_app(server: AuthServer, **config: Any) -> Flask:
    app = Flask("introspected")
    app.config.update({
        "MCP_AUTH": True,
        "MCP_BACKEND": "memory://",
        "MCP_INTROSPECTION_URL": server.introspection_url,
        "MCP_RESOURCE_URL": RESOURCE,
        "MCP_AUTH_SERVERS": [server.url],
        "MCP_AUTH_TIMEOUT": 1.0,
        **config,
    })
    app.testing = True
    mcp = MCP(app, name="introspected")

    @mcp.tool
    def whoami(ctx: Context) -> dict[str, Any]:
        assert ctx.principal is not None
        return {"subject": ctx.principal.subject, "scopes": sorted(ctx.principal.scopes),
                "client_id": ctx.principal.client_id, "token": ctx.access_token}

    @mcp.tool(scopes=["files:write"])
    def write_file(path: str) -> str:
        return f"wrote {path}"

    return app


def verifier_of(app: Flask) -> IntrospectionVerifier:
    verifier = app.extensions["mcp"].authenticator.configured
    assert isinstance(verifier, IntrospectionVerifier)
    return verifier


def call(make_client: MakeClient, app: Flask, token: str, tool: str = "whoami", **arguments: Any) -> Any:
    return make_client(app, headers={"Authorization": f"Bearer {token}"}).call_tool(tool, arguments)


def test_a_valid_token_is_introspected_and_reaches_the_tool(make_client: MakeClient, auth_server: AuthServer) -> None:
    auth_server.add_tokens({"valid-1": claims("alice", "files:read profile")})
    app = build_app(auth_server)

    response = call(make_client, app, "valid-1")

    assert response.status_code == 200
    assert response.result["structuredContent"] == {
        "subject": "alice", "scopes": ["files:read", "profile"], "client_id": "test-client", "token": "valid-1",
    }
    assert auth_server.stats()["introspect"] == 1


@pytest.mark.parametrize(
    ("token_claims", "revoke", "status", "reason"),
    [
        (claims("bob", expires_in=-30), False, 401, "expired"),
        (claims("carol"), True, 401, "not active"),
        (claims("dave", audience="https://other.example.com/mcp"), False, 401, "not issued for this server"),
        (claims("erin", audience=["https://other.example.com/mcp", RESOURCE]), False, 200, None),
        ({k: v for k, v in claims("frank").items() if k != "aud"}, False, 401, "not issued for this server"),
    ],
    ids=["expired", "revoked", "wrong-audience", "audience-list", "no-audience"],
)
def test_each_token_gets_the_right_answer(
    make_client: MakeClient, auth_server: AuthServer, token_claims: dict[str, Any], revoke: bool,
    status: int, reason: str | None,
) -> None:
    auth_server.add_tokens({"token-under-test": token_claims})
    if revoke:
        auth_server.revoke("token-under-test")
    app = build_app(auth_server)

    response = call(make_client, app, "token-under-test")

    assert response.status_code == status
    if reason is not None:
        assert 'error="invalid_token"' in response.headers["WWW-Authenticate"]
        assert reason in response.headers["WWW-Authenticate"]
        body = response.http.get_json()
        validate_message("2026-07-28", None, body)
        assert reason in body["error"]["message"] and "id" not in body


def test_an_insufficient_scope_token_gets_403_with_a_step_up_challenge(
    make_client: MakeClient, auth_server: AuthServer
) -> None:
    auth_server.add_tokens({"reader": claims("gina", "files:read")})
    app = build_app(auth_server)

    response = call(make_client, app, "reader", "write_file", path="notes.txt")

    assert response.status_code == 403
    challenge = response.headers["WWW-Authenticate"]
    assert challenge.startswith('Bearer error="insufficient_scope", scope="files:write", ')
    assert 'resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"' in challenge
    validate_message("2026-07-28", "tools/call", response.message)
    assert response.error["data"] == {"error": "insufficient_scope", "scope": "files:write"}


def test_repeated_calls_hit_the_cache_not_the_authorization_server(
    make_client: MakeClient, auth_server: AuthServer
) -> None:
    auth_server.add_tokens({"cached-a": claims("hana"), "cached-b": claims("ivan")})
    app = build_app(auth_server)
    verifier = verifier_of(app)

    for _ in range(10):
        assert call(make_client, app, "cached-a").status_code == 200
    for _ in range(5):
        assert call(make_client, app, "cached-b").status_code == 200
        assert call(make_client, app, "never-issued").status_code == 401

    assert auth_server.stats()["introspect"] == 3  # one per distinct token, refusals included
    assert verifier.cache_hits == 10 + 5 + 5 - 3
    # Keyed by a hash of the token, never the token itself.
    keys = list(verifier._cache._entries)
    assert sorted(keys) == sorted(token_hash(t) for t in ("cached-a", "cached-b", "never-issued"))
    assert not any("cached" in key or "never" in key for key in keys)


def test_a_cached_answer_expires_with_the_ttl_and_a_revocation_is_then_seen(
    make_client: MakeClient, auth_server: AuthServer
) -> None:
    auth_server.add_tokens({"short-lived-cache": claims("judy")})
    app = build_app(auth_server, MCP_AUTH_CACHE_TTL=0.3)

    assert call(make_client, app, "short-lived-cache").status_code == 200
    auth_server.revoke("short-lived-cache")
    assert call(make_client, app, "short-lived-cache").status_code == 200  # still cached
    time.sleep(0.35)
    assert call(make_client, app, "short-lived-cache").status_code == 401
    assert auth_server.stats()["introspect"] == 2


def test_the_cache_never_outlives_the_token(make_client: MakeClient, auth_server: AuthServer) -> None:
    auth_server.add_tokens({"nearly-expired": claims("kim", expires_in=1.2)})
    app = build_app(auth_server, MCP_AUTH_CACHE_TTL=60)

    assert call(make_client, app, "nearly-expired").status_code == 200
    time.sleep(1.3)
    assert call(make_client, app, "nearly-expired").status_code == 401


def test_client_credentials_are_sent_and_wrong_ones_are_a_503(make_client: MakeClient, auth_server: AuthServer) -> None:
    auth_server.require_client("mcp-server", "s3cret")
    auth_server.add_tokens({"cred-token": claims("leo")})
    good = build_app(auth_server, MCP_INTROSPECTION_CLIENT_ID="mcp-server", MCP_INTROSPECTION_CLIENT_SECRET="s3cret")
    bad = build_app(auth_server, MCP_INTROSPECTION_CLIENT_ID="mcp-server", MCP_INTROSPECTION_CLIENT_SECRET="wrong")

    assert call(make_client, good, "cred-token").status_code == 200
    # The AS refusing *us* says nothing about the token: 503, not 401.
    assert call(make_client, bad, "cred-token").status_code == 503
    assert "s3cret" not in repr(good.extensions["mcp"].settings)


def test_the_authorization_server_stopped_mid_test_gives_503_then_recovery(
    make_client: MakeClient, auth_server: AuthServer, caplog: pytest.LogCaptureFixture
) -> None:
    auth_server.add_tokens({"before-outage": claims("mia"), "during-outage": claims("ned")})
    app = build_app(auth_server)
    assert call(make_client, app, "before-outage").status_code == 200

    auth_server.stop()
    started = time.monotonic()
    with caplog.at_level(logging.ERROR, "flask_mcp"):
        response = call(make_client, app, "during-outage")
    elapsed = time.monotonic() - started

    assert response.status_code == 503
    assert response.headers["Retry-After"] == "5"
    body = response.http.get_json()
    validate_message("2026-07-28", None, body)
    assert body["error"]["code"] == -32603
    assert "could not be reached" in body["error"]["message"]
    assert elapsed < 1.0, f"a refused connection is answered at once (took {elapsed:.3f}s)"
    assert [r.getMessage() for r in caplog.records if "503" in r.getMessage()]
    # A token checked before the outage is still served from the cache.
    assert call(make_client, app, "before-outage").status_code == 200

    auth_server.start()  # same port, same state file
    assert call(make_client, app, "during-outage").status_code == 200


def test_an_authorization_server_that_hangs_is_a_503_after_the_timeout(
    make_client: MakeClient, auth_server: AuthServer
) -> None:
    black_hole = socket.socket()
    black_hole.bind(("127.0.0.1", 0))
    black_hole.listen(16)  # accepts connections (kernel backlog), never answers
    try:
        url = f"http://127.0.0.1:{black_hole.getsockname()[1]}/introspect"
        app = build_app(auth_server, MCP_INTROSPECTION_URL=url, MCP_AUTH_TIMEOUT=0.5)
        started = time.monotonic()
        response = call(make_client, app, "any-token")
        elapsed = time.monotonic() - started
    finally:
        black_hole.close()

    assert response.status_code == 503
    assert 0.5 <= elapsed < 2.0, f"bounded by MCP_AUTH_TIMEOUT (took {elapsed:.3f}s)"


def test_the_verifier_reuses_pooled_connections(auth_server: AuthServer) -> None:
    auth_server.add_tokens({f"pool-{n}": claims(f"user{n}") for n in range(5)})
    verifier = IntrospectionVerifier(auth_server.introspection_url, audience=RESOURCE, timeout=2)

    for n in range(5):
        assert verifier.verify(f"pool-{n}") is not None

    stats = auth_server.stats()
    assert stats["introspect"] == 5
    assert stats["introspect_connections"] == 1  # one pooled connection, kept alive


def test_introspection_never_logs_the_token(
    make_client: MakeClient, auth_server: AuthServer, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "intro-s3cret-token-value"
    auth_server.add_tokens({secret: claims("olga", "files:read")})
    app = build_app(auth_server)

    with caplog.at_level(logging.DEBUG):  # urllib3 and requests included
        call(make_client, app, secret)
        call(make_client, app, secret, "write_file", path="x")
        call(make_client, app, secret + "-unknown")
        auth_server.stop()
        call(make_client, app, secret + "-during-outage")

    assert any(r.name.startswith("urllib3") for r in caplog.records)
    for record in caplog.records:
        assert secret not in record.getMessage()
