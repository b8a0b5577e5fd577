"""Local JWT validation end to end: tokens signed here with a real RSA key,
whose public half a second process on loopback (tests/auth_servers.py) serves
as a JWKS document; the app (Flask test client) validates against it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from auth_servers import AuthServer
from conftest import validate_message
from cryptography.hazmat.primitives.asymmetric import rsa
from flask import Flask

from flask_mcp import MCP, Context
from flask_mcp.testing import MCPTestClient

MakeClient = Callable[..., MCPTestClient]

RESOURCE = "https://mcp.example.com/mcp"
ISSUER = "https://auth.example.com"


class Signer:
    """An RSA key pair; the public half is published as a JWK with ``kid``."""

    def __init__(self, kid: str) -> None:
        self.kid = kid
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def jwk(self) -> dict[str, Any]:
        jwk: dict[str, Any] = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {**jwk, "kid": self.kid, "use": "sig", "alg": "RS256"}

    def token(self, subject: str = "alice", scope: str | None = "files:read", **overrides: Any) -> str:
        now = int(time.time())
        claims = {"iss": ISSUER, "sub": subject, "aud": RESOURCE, "scope": scope, "iat": now, "exp": now + 600,
                  "client_id": "jwt-client", **overrides}
        claims = {k: v for k, v in claims.items() if v is not None}
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": self.kid})


@pytest.fixture(scope="module")
def signer() -> Signer:
    return Signer("key-1")


@pytest.fixture
def jwks_server(tmp_path: Path, signer: Signer) -> Iterator[AuthServer]:
    server = AuthServer(tmp_path / "jwks-state.json").start()
    server.set_jwks({"keys": [signer.jwk()]})
    yield server
    server.stop()


def build_app(server: AuthServer, **config: Any) -> Flask:
    app = Flask("jwt-protected")
    app.config.update({
        "MCP_AUTH": True,
        "MCP_BACKEND": "memory://",
        "MCP_JWKS_URL": server.jwks_url,
        "MCP_JWT_ISSUER": ISSUER,
        "MCP_RESOURCE_URL": RESOURCE,
        "MCP_AUTH_SERVERS": [ISSUER],
        "MCP_AUTH_TIMEOUT": 1.0,
        **config,
    })
    app.testing = True
    mcp = MCP(app, name="jwt-protected")

    @mcp.tool
    def whoami(ctx: Context) -> dict[str, Any]:
        assert ctx.principal is not None
        return {"subject": ctx.principal.subject, "scopes": sorted(ctx.principal.scopes),
                "client_id": ctx.principal.client_id, "issuer": ctx.principal.claims["iss"]}

    @mcp.tool(scopes=["files:write"])
    def write_file(path: str) -> str:
        return f"wrote {path}"

    return app


def call(make_client: MakeClient, app: Flask, token: str, tool: str = "whoami", **arguments: Any) -> Any:
    return make_client(app, headers={"Authorization": f"Bearer {token}"}).call_tool(tool, arguments)


def retry_until_accepted(make_client: MakeClient, app: Flask, token: str, *, within: float) -> float:
    """Calls as a client that honours ``Retry-After`` would; the seconds until
    the token was accepted. Every refusal on the way must be a 503 (the token
    is fine, the keys could not be checked), never a 401."""
    started = time.monotonic()
    while True:
        response = call(make_client, app, token)
        if response.status_code == 200:
            return time.monotonic() - started
        assert response.status_code == 503, (response.status_code, response.http.get_json())
        delay = float(response.headers["Retry-After"])
        assert time.monotonic() - started + delay <= within, "not accepted in time"
        time.sleep(delay)


def test_a_valid_jwt_reaches_the_tool_with_its_claims(
    make_client: MakeClient, jwks_server: AuthServer, signer: Signer
) -> None:
    app = build_app(jwks_server)

    response = call(make_client, app, signer.token("alice", "files:read profile"))

    assert response.status_code == 200
    assert response.result["structuredContent"] == {
        "subject": "alice", "scopes": ["files:read", "profile"], "client_id": "jwt-client", "issuer": ISSUER,
    }


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"exp": int(time.time()) - 3600}, "expired"),
        ({"aud": "https://other.example.com/mcp"}, "not issued for this server"),
        ({"iss": "https://evil.example.com"}, "another authorization server"),
        ({"exp": None}, "invalid"),
    ],
    ids=["expired", "wrong-audience", "wrong-issuer", "no-exp"],
)
def test_a_bad_jwt_gets_401_invalid_token(
    make_client: MakeClient, jwks_server: AuthServer, signer: Signer, overrides: dict[str, Any], reason: str
) -> None:
    app = build_app(jwks_server)

    response = call(make_client, app, signer.token(**overrides))

    assert response.status_code == 401
    challenge = response.headers["WWW-Authenticate"]
    assert 'error="invalid_token"' in challenge and reason in challenge
    body = response.http.get_json()
    validate_message("2026-07-28", None, body)
    assert reason in body["error"]["message"]


def test_a_jwt_signed_by_another_key_is_refused(make_client: MakeClient, jwks_server: AuthServer) -> None:
    app = build_app(jwks_server)
    impostor = Signer("key-1")  # same kid, different key

    # The first check fetches the JWKS: the key id is not in it.
    assert call(make_client, app, Signer("unknown-kid").token()).status_code == 401
    assert call(make_client, app, impostor.token()).status_code == 401
    assert call(make_client, app, "not-a-jwt").status_code == 401


def test_an_insufficient_scope_jwt_gets_403(make_client: MakeClient, jwks_server: AuthServer, signer: Signer) -> None:
    app = build_app(jwks_server)

    response = call(make_client, app, signer.token(scope="files:read"), "write_file", path="a")

    assert response.status_code == 403
    assert 'error="insufficient_scope", scope="files:write"' in response.headers["WWW-Authenticate"]
    validate_message("2026-07-28", "tools/call", response.message)


def test_a_broader_scope_in_scp_grants_the_tool(
    make_client: MakeClient, jwks_server: AuthServer, signer: Signer
) -> None:
    app = build_app(jwks_server)

    response = call(make_client, app, signer.token(scope=None, scp=["files"]), "write_file", path="a")

    assert response.result["content"][0]["text"] == "wrote a"


def test_the_jwks_is_fetched_once_for_many_tokens(
    make_client: MakeClient, jwks_server: AuthServer, signer: Signer
) -> None:
    app = build_app(jwks_server)
    jwks_server.reset_stats()

    for n in range(8):
        assert call(make_client, app, signer.token(f"user{n}")).status_code == 200

    assert jwks_server.stats()["jwks"] == 1


def test_an_unreachable_jwks_is_a_503_then_recovery(
    make_client: MakeClient, jwks_server: AuthServer, signer: Signer
) -> None:
    app = build_app(jwks_server)
    jwks_server.stop()

    started = time.monotonic()
    response = call(make_client, app, signer.token())
    elapsed = time.monotonic() - started

    assert response.status_code == 503 and elapsed < 1.5
    assert response.http.get_json()["error"]["code"] == -32603
    assert response.headers["Retry-After"] == "1"
    jwks_server.start()
    assert retry_until_accepted(make_client, app, signer.token(), within=3.0) <= 3.0
