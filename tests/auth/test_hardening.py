"""Hardening: the CORS preset for browser clients, exemption from Flask-WTF's
CSRF protection, and the limits on JSON nesting, id and method length."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from conftest import ALL_VERSIONS, validate_message
from flask import Flask
from flask_wtf.csrf import CSRFProtect

from flask_mcp import MCP
from flask_mcp.auth import Principal

BROWSER = "https://app.example.com"
V = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": {}}
HEADERS = {"MCP-Protocol-Version": V, "Accept": "application/json, text/event-stream"}


def build_app(**config: Any) -> Flask:
    app = Flask("hardened")
    app.config.update({"MCP_BACKEND": "memory://", "SECRET_KEY": "test", **config})
    app.testing = True
    mcp = MCP(app, name="hardened")
    mcp.token_verifier(lambda token: Principal(subject="s") if token == "good" else None)

    @mcp.tool
    def echo(text: str) -> str:
        return text

    return app


def discover(app: Flask, **headers: str) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}}
    return app.test_client().post("/mcp", json=body, headers={**HEADERS, "Mcp-Method": "server/discover", **headers})


# ---------------------------------------------------------------------- CORS


def test_a_preflight_from_a_listed_origin_allows_the_mcp_headers() -> None:
    app = build_app(MCP_CORS_ORIGINS=[BROWSER])
    requested = "content-type, authorization, mcp-protocol-version, mcp-method, mcp-name, mcp-param-region, x-other"

    response = app.test_client().options("/mcp", headers={
        "Origin": BROWSER, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": requested,
    })

    assert response.status_code == 200
    assert response.headers["Access-Control-Allow-Origin"] == BROWSER
    assert set(response.headers["Access-Control-Allow-Methods"].split(", ")) == {"GET", "POST", "DELETE", "OPTIONS"}
    allowed = {name.strip() for name in response.headers["Access-Control-Allow-Headers"].split(",")}
    assert allowed == {"content-type", "authorization", "mcp-protocol-version", "mcp-method", "mcp-name",
                       "mcp-param-region"}  # not x-other
    assert response.headers["Access-Control-Max-Age"] == "600"
    assert "Origin" in response.headers["Vary"]


def test_a_listed_origin_may_post_and_read_the_session_id() -> None:
    app = build_app(MCP_CORS_ORIGINS=[BROWSER + "/"])
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}

    response = app.test_client().post("/mcp", json=body, headers={"Origin": BROWSER, "Accept": HEADERS["Accept"]})

    assert response.status_code == 200 and response.headers["Mcp-Session-Id"]
    assert response.headers["Access-Control-Allow-Origin"] == BROWSER
    exposed = response.headers["Access-Control-Expose-Headers"]
    assert "Mcp-Session-Id" in exposed and "WWW-Authenticate" in exposed


def test_an_unlisted_origin_gets_403_and_no_cors_headers() -> None:
    app = build_app(MCP_CORS_ORIGINS=[BROWSER])

    response = discover(app, Origin="https://evil.example.com")

    assert response.status_code == 403
    assert "Access-Control-Allow-Origin" not in response.headers


def test_no_cors_headers_without_the_preset() -> None:
    app = build_app(MCP_ALLOWED_ORIGINS=[BROWSER])

    response = discover(app, Origin=BROWSER)

    assert response.status_code == 200
    assert "Access-Control-Allow-Origin" not in response.headers


def test_a_browser_can_read_the_401_challenge() -> None:
    app = build_app(MCP_CORS_ORIGINS=["*"], MCP_AUTH=True)

    response = discover(app, Origin=BROWSER)

    assert response.status_code == 401
    assert response.headers["Access-Control-Allow-Origin"] == BROWSER
    assert "WWW-Authenticate" in response.headers["Access-Control-Expose-Headers"]
    assert discover(app, Origin=BROWSER, Authorization="Bearer good").status_code == 200


# ---------------------------------------------------------------------- CSRF


@pytest.mark.parametrize("csrf_first", [True, False], ids=["csrf-then-mcp", "mcp-then-csrf"])
def test_the_mcp_endpoint_is_exempt_from_flask_wtf_csrf(csrf_first: bool) -> None:
    app = Flask("forms")
    app.config.update({"SECRET_KEY": "s", "MCP_BACKEND": "memory://"})
    csrf = CSRFProtect()
    if csrf_first:
        csrf.init_app(app)
    MCP(app, name="forms")
    if not csrf_first:
        csrf.init_app(app)

    @app.post("/profile")
    def profile() -> str:
        return "saved"

    client = app.test_client()
    assert discover(app).status_code == 200
    assert client.post("/profile").status_code == 400  # CSRF still guards the app's own forms
    assert discover(app).status_code == 200


def test_a_late_csrf_protect_is_exempted_though_the_app_is_served_first() -> None:
    """``CSRFProtect`` set up after flask-mcp, and the app's own views served
    before the endpoint's first request: the endpoint is exempt all the same."""
    app = Flask("forms_first")
    app.config.update({"SECRET_KEY": "s", "MCP_BACKEND": "memory://"})
    MCP(app, name="forms")
    CSRFProtect(app)

    @app.post("/profile")
    def profile() -> str:
        return "saved"

    client = app.test_client()
    assert client.post("/profile").status_code == 400
    assert discover(app).status_code == 200
    assert discover(app).status_code == 200
    assert client.post("/profile").status_code == 400


# ---------------------------------------------------------------------- JSON limits


def post_raw(app: Flask, data: bytes | str) -> Any:
    return app.test_client().post(
        "/mcp", data=data, headers={**HEADERS, "Mcp-Method": "server/discover", "Content-Type": "application/json"}
    )


def nested(depth: int) -> str:
    """A request whose params nest to ``depth`` levels in total."""
    inner = "[" * (depth - 2) + "]" * (depth - 2)  # inside the message object and params
    return json.dumps({"jsonrpc": "2.0", "id": 7, "method": "server/discover",
                       "params": {"_meta": META, "x": "PLACEHOLDER"}}).replace('"PLACEHOLDER"', inner)


def test_json_nested_up_to_the_limit_is_read() -> None:
    app = build_app()

    response = post_raw(app, nested(64))

    assert response.status_code != 400 or "nested" not in response.get_json()["error"]["message"]


@pytest.mark.parametrize("depth", [65, 500, 100_000])
def test_json_nested_deeper_than_the_limit_is_a_clean_400(depth: int) -> None:
    app = build_app()
    started = time.monotonic()

    response = post_raw(app, nested(depth))

    assert time.monotonic() - started < 1
    assert response.status_code == 400
    body = response.get_json()
    for version in ALL_VERSIONS:
        validate_message(version, None, body)
    assert "nested" in body["error"]["message"]


def test_the_depth_limit_is_configurable() -> None:
    app = build_app(MCP_MAX_JSON_DEPTH=8)

    assert post_raw(app, nested(9)).status_code == 400
    assert "nested more than 8" in post_raw(app, nested(9)).get_json()["error"]["message"]


def test_many_shallow_containers_are_fine() -> None:
    app = build_app()
    message = {"jsonrpc": "2.0", "id": 1, "method": "server/discover",
               "params": {"_meta": META, "rows": [{"a": [1]} for _ in range(20_000)]}}

    assert post_raw(app, json.dumps(message)).status_code == 200


@pytest.mark.parametrize(
    ("message", "fragment"),
    [
        ({"jsonrpc": "2.0", "id": "x" * 257, "method": "server/discover"}, "at most 256 characters"),
        ({"jsonrpc": "2.0", "id": 2**63, "method": "server/discover"}, "64-bit integer"),
        ({"jsonrpc": "2.0", "id": 1, "method": "m" * 129}, "longer than 128"),
    ],
    ids=["long-id", "huge-id", "long-method"],
)
def test_overlong_ids_and_methods_are_a_clean_400(message: dict[str, Any], fragment: str) -> None:
    app = build_app()

    response = post_raw(app, json.dumps(message))

    assert response.status_code == 400
    body = response.get_json()
    assert fragment in body["error"]["message"]
    assert body["id"] == message["id"]  # echoed as sent, so the client can match the error


def test_ids_and_methods_at_the_limits_are_accepted() -> None:
    app = build_app()
    message = {"jsonrpc": "2.0", "id": "x" * 256, "method": "server/discover", "params": {"_meta": META}}

    response = post_raw(app, json.dumps(message))

    assert response.status_code == 200 and response.get_json()["id"] == "x" * 256
