"""Authentication and authorization over the Flask test client: the 401/403
answers and their challenges, protected resource metadata, scopes and their
hierarchy, filtered tool lists, accounts, sessions bound to principals.

The verifiers here are plain functions (the app's own code path); the shipped
network verifiers are tested against real loopback servers in
test_auth_introspection.py and test_auth_jwt.py.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
from conftest import ALL_VERSIONS, validate_message
from flask import Flask

from flask_mcp import MCP, Context
from flask_mcp.auth import InvalidToken, Principal, VerifierUnavailable, permits, require_scopes, scope_granted
from flask_mcp.config import ConfigError
from flask_mcp.protocol.request_info import RequestInfo
from flask_mcp.protocol.versions import REVISIONS
from flask_mcp.testing import MCPTestClient

MakeClient = Callable[..., MCPTestClient]

RESOURCE = "http://localhost/mcp"
METADATA = "http://localhost/.well-known/oauth-protected-resource/mcp"
AS_URL = "https://auth.example.com"

TOKENS = {
    "reader-token": Principal(subject="reader", scopes=frozenset({"files:read"}), audience=(RESOURCE,)),
    "writer-token": Principal(subject="writer", scopes=frozenset({"files"}), audience=(RESOURCE,)),
    "admin-token": Principal(subject="admin", scopes=frozenset({"files", "admin"}), audience=(RESOURCE,)),
    "other-audience": Principal(subject="mallory", scopes=frozenset({"files"}), audience=("https://elsewhere.example/mcp",)),
    "expired-token": Principal(subject="late", scopes=frozenset({"files"}), audience=(RESOURCE,),
                               expires_at=time.time() - 60),
    "no-audience-known": Principal(subject="legacy-as", scopes=frozenset()),
}


def verify(token: str) -> Principal | None:
    if token == "revoked-token":
        raise InvalidToken("The access token was revoked.")
    if token == "as-down":
        raise VerifierUnavailable("authorization server unreachable")
    return TOKENS.get(token)


def build_app(verifier: Callable[[str], Principal | None] | None = verify, **config: Any) -> Flask:
    app = Flask("auth")
    app.config.update({"MCP_AUTH": True, "MCP_AUTH_SERVERS": [AS_URL], "MCP_BACKEND": "memory://", **config})
    app.testing = True
    mcp = MCP(app, name="auth-server", version="1.0")
    if verifier is not None:
        mcp.token_verifier(verifier)

    @mcp.tool
    def whoami(ctx: Context) -> dict[str, Any]:
        """Who is calling, for which account."""
        principal = ctx.principal
        return {
            "subject": principal.subject if principal else None,
            "scopes": sorted(principal.scopes) if principal else [],
            "token": ctx.access_token,
            "account": ctx.account,
        }

    @mcp.tool(scopes=["files:read"])
    def read_file(path: str) -> str:
        return f"contents of {path}"

    @mcp.tool(scopes=["files:write"])
    def write_file(path: str, text: str) -> str:
        return f"wrote {len(text)} characters to {path}"

    @mcp.tool(scopes=["admin"])
    def purge() -> str:
        return "purged"

    return app


@pytest.fixture
def app() -> Flask:
    return build_app()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def raw_post(app: Flask, headers: dict[str, str] | None = None, query: str = "") -> Any:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "server/discover",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                             "io.modelcontextprotocol/clientCapabilities": {}}},
    }
    return app.test_client().post(
        "/mcp" + query,
        json=body,
        headers={"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover",
                 "Accept": "application/json, text/event-stream", **(headers or {})},
    )


def challenge_params(value: str) -> dict[str, str]:
    assert value.startswith("Bearer ")
    params = {}
    for part in value[len("Bearer "):].split('", '):
        key, _, raw = part.partition("=")
        params[key.strip()] = raw.strip().strip('"')
    return params


def assert_jsonrpc_error(body: dict[str, Any]) -> dict[str, Any]:
    for version in ALL_VERSIONS:
        validate_message(version, None, body)
    return body["error"]  # type: ignore[no-any-return]


# ---------------------------------------------------------------------- 401 and friends


def test_a_request_without_a_token_gets_401_with_a_resource_metadata_challenge(app: Flask) -> None:
    response = raw_post(app)

    assert response.status_code == 401
    params = challenge_params(response.headers["WWW-Authenticate"])
    assert params == {"resource_metadata": METADATA}
    error = assert_jsonrpc_error(response.get_json())
    assert "Authorization: Bearer" in error["message"] and METADATA in error["message"]


def test_the_401_challenge_names_the_configured_scopes() -> None:
    app = build_app(MCP_AUTH_SCOPES=["files:read", "files:write"])

    params = challenge_params(raw_post(app).headers["WWW-Authenticate"])

    assert params["scope"] == "files:read files:write"


def test_the_health_endpoint_stays_open_with_auth_on(app: Flask) -> None:
    response = app.test_client().get("/mcp/health")

    assert response.status_code == 200 and response.get_json()["status"] == "ok"


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_get_and_delete_need_a_token_too(app: Flask, method: str) -> None:
    response = app.test_client().open("/mcp", method=method, headers={"Mcp-Session-Id": "abc"})

    assert response.status_code == 401
    assert "resource_metadata" in response.headers["WWW-Authenticate"]


def test_another_authorization_scheme_gets_401(app: Flask) -> None:
    response = raw_post(app, {"Authorization": "Basic dXNlcjpwYXNz"})

    assert response.status_code == 401
    assert_jsonrpc_error(response.get_json())


@pytest.mark.parametrize("header", ["Bearer", "Bearer two words", 'Bearer "quoted"', "Bearer " + "a" * 20000])
def test_a_malformed_bearer_header_gets_400_invalid_request(app: Flask, header: str) -> None:
    response = raw_post(app, {"Authorization": header})

    assert response.status_code == 400
    assert challenge_params(response.headers["WWW-Authenticate"])["error"] == "invalid_request"
    assert assert_jsonrpc_error(response.get_json())["data"]["error"] == "invalid_request"


def test_a_token_in_the_query_string_is_refused(app: Flask) -> None:
    response = raw_post(app, bearer("reader-token"), query="?access_token=reader-token")

    assert response.status_code == 400
    assert "query string" in response.get_json()["error"]["message"]


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        ("unknown-token", "not valid"),
        ("revoked-token", "revoked"),
        ("expired-token", "expired"),
        ("other-audience", "not issued for this server"),
    ],
)
def test_an_unacceptable_token_gets_401_invalid_token(app: Flask, token: str, reason: str) -> None:
    response = raw_post(app, bearer(token))

    assert response.status_code == 401
    params = challenge_params(response.headers["WWW-Authenticate"])
    assert params["error"] == "invalid_token"
    assert params["resource_metadata"] == METADATA
    assert reason in params["error_description"]
    error = assert_jsonrpc_error(response.get_json())
    assert reason in error["message"]
    assert error["data"]["error"] == "invalid_token"


def test_an_unreachable_authorization_server_gets_503_not_401(app: Flask) -> None:
    response = raw_post(app, bearer("as-down"))

    assert response.status_code == 503
    assert response.headers["Retry-After"] == "5"
    assert "WWW-Authenticate" not in response.headers
    error = assert_jsonrpc_error(response.get_json())
    assert error["code"] == -32603 and "could not be reached" in error["message"]


def test_auth_on_without_any_verifier_is_a_clear_503_and_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    app = build_app(verifier=None)

    with caplog.at_level(logging.ERROR, "flask_mcp"):
        response = raw_post(app, bearer("reader-token"))

    assert response.status_code == 503
    assert "no token verifier" in response.get_json()["error"]["message"]
    assert any("@mcp.token_verifier" in record.getMessage() for record in caplog.records)


def test_a_valid_token_reaches_the_tools_with_its_principal(make_client: MakeClient, app: Flask) -> None:
    client = make_client(app, headers=bearer("reader-token"))

    result = client.call_tool("whoami", {}).result

    assert result["structuredContent"] == {
        "subject": "reader", "scopes": ["files:read"], "token": "reader-token", "account": None,
    }


def test_a_principal_whose_audience_is_unknown_is_left_to_its_verifier(make_client: MakeClient, app: Flask) -> None:
    client = make_client(app, headers=bearer("no-audience-known"))

    assert client.call_tool("whoami", {}).result["structuredContent"]["subject"] == "legacy-as"


def test_the_audience_is_mcp_resource_url_when_configured() -> None:
    app = build_app(MCP_RESOURCE_URL="https://mcp.example.com/mcp")

    assert raw_post(app, bearer("reader-token")).status_code == 401  # issued for http://localhost/mcp
    tokens = {"t": Principal(subject="s", audience=("https://mcp.example.com/mcp/",))}
    app = build_app(tokens.get, MCP_RESOURCE_URL="https://mcp.example.com/mcp")
    assert raw_post(app, bearer("t")).status_code == 200  # a trailing slash is the same resource


def test_auth_off_needs_no_token_and_tools_see_no_principal(make_client: MakeClient) -> None:
    app = build_app(MCP_AUTH=False)
    client = make_client(app)

    assert client.call_tool("whoami", {}).result["structuredContent"]["subject"] is None
    # Scopes are not enforced without authentication: every tool is listed and callable.
    assert {t["name"] for t in client.list_tools().result["tools"]} == {"whoami", "read_file", "write_file", "purge"}
    assert client.call_tool("purge", {}).result["content"][0]["text"] == "purged"
    assert app.test_client().get("/.well-known/oauth-protected-resource").status_code == 404


def test_the_decorated_verifier_beats_the_configured_one(make_client: MakeClient) -> None:
    app = build_app(verifier=None, MCP_TOKEN_VERIFIER=lambda token: Principal(subject="from-config"))
    client = make_client(app, headers=bearer("anything"))
    assert client.call_tool("whoami", {}).result["structuredContent"]["subject"] == "from-config"

    app.extensions["mcp"].extension.token_verifier(lambda token: Principal(subject="from-decorator"))

    assert client.call_tool("whoami", {}).result["structuredContent"]["subject"] == "from-decorator"


def test_the_presence_verifier_hands_any_token_to_the_tools(make_client: MakeClient) -> None:
    app = build_app(verifier=None, MCP_TOKEN_VERIFIER="presence")
    client = make_client(app, headers=bearer("opaque.upstream-token"))

    who = client.call_tool("whoami", {}).result["structuredContent"]

    assert who["token"] == "opaque.upstream-token"
    assert who["subject"].startswith("token:") and "opaque" not in who["subject"]
    # It grants no scopes: tools that declare some stay out of reach.
    assert {t["name"] for t in client.list_tools().result["tools"]} == {"whoami"}
    assert client.call_tool("read_file", {"path": "a"}).status_code == 403


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({"MCP_AUTH": "yes"}, "MCP_AUTH"),
        ({"MCP_RESOURCE_URL": "https://mcp.example.com/mcp#frag"}, "MCP_RESOURCE_URL"),
        ({"MCP_RESOURCE_URL": "/mcp"}, "MCP_RESOURCE_URL"),
        ({"MCP_AUTH_SERVERS": ["not a url"]}, "MCP_AUTH_SERVERS"),
        ({"MCP_TOKEN_VERIFIER": "bogus"}, "MCP_TOKEN_VERIFIER"),
        ({"MCP_TOKEN_VERIFIER": 42}, "MCP_TOKEN_VERIFIER"),
        ({"MCP_TOKEN_VERIFIER": "introspection"}, "MCP_INTROSPECTION_URL"),
        ({"MCP_TOKEN_VERIFIER": "jwt"}, "MCP_JWKS_URL"),
        ({"MCP_AUTH_TIMEOUT": 0}, "MCP_AUTH_TIMEOUT"),
    ],
)
def test_bad_auth_configuration_fails_at_init_app(config: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        build_app(**config)


def test_a_bad_scope_fails_at_decoration_time() -> None:
    mcp = MCP()
    with pytest.raises(ValueError, match="invalid scope"):
        mcp.tool(name="read", scopes=['files "read"'])(lambda: None)


# ---------------------------------------------------------------------- protected resource metadata


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"])
def test_protected_resource_metadata_is_served_at_both_well_known_urls(app: Flask, path: str) -> None:
    response = app.test_client().get(path)

    assert response.status_code == 200
    assert response.headers["Access-Control-Allow-Origin"] == "*"
    assert response.get_json() == {
        "resource": RESOURCE,
        "authorization_servers": [AS_URL],
        "bearer_methods_supported": ["header"],
        "resource_name": "auth-server",
        # None configured: the scopes the tools declare.
        "scopes_supported": ["admin", "files:read", "files:write"],
    }


def test_metadata_follows_the_configured_resource_url_prefix_and_scopes() -> None:
    app = build_app(
        MCP_URL_PREFIX="/api/mcp",
        MCP_RESOURCE_URL="https://tools.example.com/api/mcp",
        MCP_AUTH_SCOPES=["files", "admin"],
    )
    client = app.test_client()

    document = client.get("/.well-known/oauth-protected-resource/api/mcp").get_json()
    assert document["resource"] == "https://tools.example.com/api/mcp"
    assert document["scopes_supported"] == ["files", "admin"]
    challenge = challenge_params(client.post("/api/mcp", json={}).headers["WWW-Authenticate"])
    assert challenge["resource_metadata"] == "https://tools.example.com/.well-known/oauth-protected-resource/api/mcp"


def test_metadata_resource_follows_the_request_host_behind_a_proxy() -> None:
    from werkzeug.middleware.proxy_fix import ProxyFix

    app = build_app()
    app.wsgi_app = ProxyFix(app.wsgi_app, x_proto=1, x_host=1)  # type: ignore[method-assign]

    response = app.test_client().get(
        "/.well-known/oauth-protected-resource/mcp",
        headers={"X-Forwarded-Proto": "https", "X-Forwarded-Host": "mcp.example.com"},
    )

    assert response.get_json()["resource"] == "https://mcp.example.com/mcp"


# ---------------------------------------------------------------------- scopes


def test_scope_hierarchy_a_broader_scope_implies_the_narrower_ones() -> None:
    assert scope_granted({"files"}, "files:read")
    assert scope_granted({"files"}, "files:read:meta")
    assert scope_granted({"files:read"}, "files:read")
    assert not scope_granted({"files:read"}, "files")
    assert not scope_granted({"files:read"}, "files:write")
    assert not scope_granted({"file"}, "files:read")  # a prefix is not a parent


@pytest.mark.parametrize("version", ALL_VERSIONS)
@pytest.mark.parametrize(
    ("token", "visible"),
    [
        ("reader-token", {"whoami", "read_file"}),
        ("writer-token", {"whoami", "read_file", "write_file"}),
        ("admin-token", {"whoami", "read_file", "write_file", "purge"}),
    ],
)
def test_tools_list_shows_each_caller_only_what_it_may_call(
    make_client: MakeClient, app: Flask, version: str, token: str, visible: set[str]
) -> None:
    client = make_client(app, version, headers=bearer(token))
    if version != "2026-07-28":
        client.initialize()

    result = client.list_tools().result

    assert {tool["name"] for tool in result["tools"]} == visible
    if version == "2026-07-28":
        assert result["cacheScope"] == "private"  # the list depends on the token


def test_the_filtered_listing_is_per_request_even_though_the_core_caches_it(make_client: MakeClient) -> None:
    app = build_app(MCP_PAGE_SIZE=1)
    reader = make_client(app, headers=bearer("reader-token"))
    admin = make_client(app, headers=bearer("admin-token"))

    for _ in range(2):
        assert len(admin.list_tools().result["tools"]) == 1  # page size 1
        page = reader.list_tools().result
        names = [page["tools"][0]["name"]]
        while "nextCursor" in page:
            page = reader.list_tools(page["nextCursor"]).result
            names.append(page["tools"][0]["name"])
        assert names == ["whoami", "read_file"]


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_calling_a_tool_without_its_scope_gets_403_insufficient_scope(
    make_client: MakeClient, app: Flask, version: str
) -> None:
    client = make_client(app, version, headers=bearer("reader-token"))
    if version != "2026-07-28":
        client.initialize()

    response = client.call_tool("write_file", {"path": "a.txt", "text": "hi"}, id=41)

    assert response.status_code == 403
    params = challenge_params(response.headers["WWW-Authenticate"])
    assert params["error"] == "insufficient_scope"
    assert params["scope"] == "files:write"
    assert params["resource_metadata"] == METADATA
    assert "files:write" in params["error_description"]
    message = response.message
    assert message["id"] == 41
    assert message["error"]["data"] == {"error": "insufficient_scope", "scope": "files:write"}
    assert "files:read" in message["error"]["message"]  # what the token does grant


def test_a_broader_scope_grants_the_narrower_tool(make_client: MakeClient, app: Flask) -> None:
    client = make_client(app, headers=bearer("writer-token"))  # scope "files"

    result = client.call_tool("write_file", {"path": "a.txt", "text": "hi"}).result

    assert result["content"][0]["text"] == "wrote 2 characters to a.txt"


def test_the_scope_helper_serves_resources_and_prompts_too() -> None:
    def request(auth: Any) -> RequestInfo:
        return RequestInfo(revision=REVISIONS["2026-07-28"], method="resources/read", params={}, headers={}, auth=auth)

    reader = TOKENS["reader-token"]
    assert permits(["files:read"], request(reader)) and not permits(["admin"], request(reader))
    assert permits(["admin"], request(None))  # auth off
    with pytest.raises(Exception) as raised:
        require_scopes(["admin"], request(reader), "Resource 'file:///etc'")
    error = raised.value
    assert getattr(error, "http_status", None) == 403
    assert "Resource 'file:///etc' needs the scope admin" in str(error)


# ---------------------------------------------------------------------- accounts


def test_the_account_comes_from_meta_then_the_argument_then_the_header(make_client: MakeClient) -> None:
    app = build_app()
    mcp: MCP = app.extensions["mcp"].extension

    @mcp.tool
    def book(account_id: str, ctx: Context) -> str:
        return str(ctx.account)

    client = make_client(app, headers={**bearer("reader-token"), "X-Account-Id": "from-header"})
    client.list_tools()

    def account(tool: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None) -> Any:
        result = client.call_tool(tool, arguments, meta=meta).result
        return result.get("structuredContent", {}).get("account", result["content"][0]["text"])

    assert account("whoami", {}) == "from-header"
    assert account("book", {"account_id": "acct-7"}) == "acct-7"
    assert account("book", {"account_id": "acct-7"}, {"com.flask-mcp/account": "from-meta"}) == "from-meta"
    assert account("whoami", {}, {"com.flask-mcp/account": 42}) == "42"


def test_the_account_header_name_is_configurable(make_client: MakeClient) -> None:
    app = build_app(MCP_ACCOUNT_HEADER="X-Tenant")
    client = make_client(app, headers={**bearer("reader-token"), "X-Tenant": "tenant-1", "X-Account-Id": "no"})

    assert client.call_tool("whoami", {}).result["structuredContent"]["account"] == "tenant-1"


# ---------------------------------------------------------------------- sessions


def test_a_legacy_session_answers_only_the_principal_that_created_it(make_client: MakeClient, app: Flask) -> None:
    owner = make_client(app, "2025-11-25", headers=bearer("reader-token"))
    owner.initialize()
    thief = make_client(app, "2025-11-25", headers=bearer("admin-token"))
    thief.session_id, thief.negotiated_version = owner.session_id, owner.negotiated_version

    def delete(token: str) -> int:
        headers = {**bearer(token), "Mcp-Session-Id": str(owner.session_id)}
        return app.test_client().delete("/mcp", headers=headers).status_code

    assert thief.request("tools/list").status_code == 404
    assert delete("admin-token") == 404
    assert owner.request("tools/list").status_code == 200
    assert delete("reader-token") == 200


def test_a_session_survives_a_new_token_for_the_same_subject(make_client: MakeClient) -> None:
    tokens = {
        "first": Principal(subject="carol", scopes=frozenset({"files"})),
        "refreshed": Principal(subject="carol", scopes=frozenset({"files"})),
    }
    app = build_app(tokens.get)
    client = make_client(app, "2025-06-18", headers=bearer("first"))
    client.initialize()

    client.extra_headers = bearer("refreshed")

    assert client.call_tool("read_file", {"path": "x"}).result["content"][0]["text"] == "contents of x"


# ---------------------------------------------------------------------- tokens never logged


def test_tokens_never_reach_the_logs(make_client: MakeClient, caplog: pytest.LogCaptureFixture) -> None:
    secret = "sup3r-secret-t0ken"
    tokens = {secret: Principal(subject="s", scopes=frozenset({"files:read"}))}

    def verifier(token: str) -> Principal | None:
        if token.startswith("down-"):
            raise VerifierUnavailable("unreachable")
        return tokens.get(token)

    app = build_app(verifier)
    with caplog.at_level(logging.DEBUG):
        make_client(app, headers=bearer(secret)).call_tool("purge", {})
        make_client(app, headers=bearer(secret + "x")).call_tool("whoami", {})
        make_client(app, headers=bearer("down-" + secret)).call_tool("whoami", {})
        legacy = make_client(app, "2025-11-25", headers=bearer(secret))
        legacy.initialize()
        legacy.call_tool("whoami", {})
        assert repr(tokens[secret]).count(secret) == 0

    assert caplog.records, "the failures above are logged"
    for record in caplog.records:
        assert secret not in record.getMessage()
        assert secret not in str(record.__dict__)
