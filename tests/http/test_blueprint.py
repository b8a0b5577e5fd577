"""The HTTP layer: methods, media types, size limit, Origin and Host checks
(spec digest sections 1, 3.1-3.4, 3.13)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask, Request, Response, request
from werkzeug.test import TestResponse

from flask_mcp import MCP
from flask_mcp.testing import MCPTestClient

MakeClient = Callable[..., MCPTestClient]

V = "2026-07-28"
DISCOVER: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "server/discover",
    "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": V,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    },
}
MODERN_HEADERS = {
    "MCP-Protocol-Version": V,
    "Mcp-Method": "server/discover",
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}


def build_app(**config: Any) -> Flask:
    app = Flask("http")
    app.config.update(config)
    mcp = MCP(app, name="http-server", version="3.1.4")

    @mcp.tool
    def echo(text: str) -> str:
        return text

    return app


@pytest.fixture
def app() -> Flask:
    return build_app()


def post(app: Flask, body: Any = DISCOVER, *, headers: dict[str, str] | None = None, **kwargs: Any) -> TestResponse:
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return app.test_client().post("/mcp", data=data, headers={**MODERN_HEADERS, **(headers or {})}, **kwargs)


def assert_json_error(response: TestResponse, status: int) -> dict[str, Any]:
    assert response.status_code == status
    assert response.mimetype == "application/json"
    body = response.get_json()
    assert body["jsonrpc"] == "2.0"
    assert isinstance(body["error"]["code"], int)
    assert body["error"]["message"]
    assert body.get("id") is None
    return body  # type: ignore[no-any-return]


# ---------------------------------------------------------------------- methods


def test_get_on_the_endpoint_is_405_with_allow_and_a_json_body(app: Flask) -> None:
    response = app.test_client().get("/mcp", headers={"Accept": "text/event-stream"})
    assert_json_error(response, 405)
    assert response.headers["Allow"] == "POST, DELETE"


def test_get_with_a_session_id_is_still_405(make_client: MakeClient, app: Flask) -> None:
    client = make_client(app, "2025-11-25")
    client.initialize()
    response = app.test_client().get(
        "/mcp", headers={"Accept": "text/event-stream", "Mcp-Session-Id": client.session_id or ""}
    )
    assert response.status_code == 405
    assert "POST" in response.headers["Allow"]


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
def test_other_methods_on_the_endpoint_are_405_json(app: Flask, method: str) -> None:
    response = app.test_client().open("/mcp", method=method, data=b"{}", content_type="application/json")
    assert_json_error(response, 405)
    assert "POST" in response.headers["Allow"]


@pytest.mark.parametrize("prefix", ["/mcp", "/", "/api/v1/mcp"])
def test_unlisted_methods_are_405_json_under_any_prefix_and_the_apps_routes_keep_theirs(prefix: str) -> None:
    app = build_app(MCP_URL_PREFIX=prefix)

    @app.route("/own", methods=["GET"])
    def own() -> str:
        return "own"

    client = app.test_client()
    endpoint = prefix
    health = prefix.rstrip("/") + "/health"
    for path, allow in ((endpoint, {"POST", "DELETE"}), (health, {"GET"})):
        response = client.open(path, method="PROPFIND")
        assert_json_error(response, 405)
        assert set(response.headers["Allow"].replace(" ", "").split(",")) == allow
        assert "PROPFIND" in response.get_json()["error"]["message"]
    assert client.open("/own", method="PROPFIND").mimetype == "text/html"  # Werkzeug's, as before
    assert client.get(health).status_code == 200


def test_tools_that_list_routes_see_no_methods_on_the_rules_for_unlisted_ones(app: Flask) -> None:
    # What route-listing tools (API doc generators, `flask routes`) do with every rule.
    listed = {(rule.rule, method) for rule in app.url_map.iter_rules()
              for method in rule.methods.difference({"HEAD", "OPTIONS"})}  # type: ignore[union-attr]
    assert listed == {("/mcp", "POST"), ("/mcp", "GET"), ("/mcp", "DELETE"), ("/mcp/health", "GET"),
                      ("/static/<path:filename>", "GET")}
    assert app.test_client().open("/mcp", method="LOCK").status_code == 405  # the router still sends LOCK there


@pytest.mark.parametrize("prefix", ["/mcp", "/"])
def test_options_answers_200_with_the_methods_served(prefix: str) -> None:
    # As Flask's automatic OPTIONS answered before the rule without methods came.
    client = build_app(MCP_URL_PREFIX=prefix).test_client()
    health = prefix.rstrip("/") + "/health"

    endpoint_options = client.open(prefix, method="OPTIONS")
    health_options = client.open(health, method="OPTIONS")

    assert endpoint_options.status_code == 200 and endpoint_options.data == b""
    assert set(endpoint_options.headers["Allow"].split(", ")) == {"GET", "HEAD", "POST", "DELETE", "OPTIONS"}
    assert health_options.status_code == 200
    assert set(health_options.headers["Allow"].split(", ")) == {"GET", "HEAD", "OPTIONS"}


def test_the_endpoint_puts_no_hook_on_the_apps_other_requests(app: Flask) -> None:
    # An app-wide before_request cost every request of the app ~7 400 instructions (bench/README.md).
    assert app.before_request_funcs.get(None, []) == []
    assert app.url_value_preprocessors.get(None, []) == []


def test_health_reports_ok_with_server_name_and_version(app: Flask) -> None:
    response = app.test_client().get("/mcp/health")
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    assert response.get_json() == {"status": "ok", "server": "http-server", "version": "3.1.4"}


def test_health_needs_no_mcp_headers(app: Flask) -> None:
    response = app.test_client().get("/mcp/health", headers={"Accept": "*/*"})
    assert response.status_code == 200


# ---------------------------------------------------------------------- body, content type


def test_body_over_the_size_limit_is_413_json() -> None:
    app = build_app(MCP_MAX_CONTENT_LENGTH=2048)
    body = {**DISCOVER, "params": {**DISCOVER["params"], "padding": "x" * 5000}}
    assert_json_error(post(app, body), 413)


def test_body_at_the_size_limit_is_served() -> None:
    app = build_app(MCP_MAX_CONTENT_LENGTH=2048)
    body = json.dumps(DISCOVER)
    response = post(app, body + " " * (2048 - len(body)))
    assert response.status_code == 200


def test_body_shorter_than_its_content_length_is_400_json(app: Flask) -> None:
    body = json.dumps(DISCOVER).encode()
    response = post(app, body, environ_overrides={"CONTENT_LENGTH": str(len(body) + 10)})
    assert_json_error(response, 400)


def test_flask_max_content_length_still_applies() -> None:
    app = build_app(MAX_CONTENT_LENGTH=100)
    assert_json_error(post(app), 413)


@pytest.mark.skipif(
    getattr(Request.max_content_length, "fset", None) is None, reason="Flask 3.1 made max_content_length per request"
)
def test_a_per_request_max_content_length_still_applies() -> None:
    app = build_app()
    app.before_request(lambda: setattr(request, "max_content_length", 100))
    assert_json_error(post(app), 413)


def test_a_chunked_body_is_read_through_werkzeug() -> None:
    app = build_app()
    body = json.dumps(DISCOVER).encode()
    environ = {"CONTENT_LENGTH": None, "HTTP_TRANSFER_ENCODING": "chunked", "wsgi.input_terminated": True}
    response = post(app, body, environ_overrides=environ)
    assert response.status_code == 200
    assert response.get_json()["result"]["resultType"] == "complete"


TERMINATED = {"wsgi.input_terminated": True}  # what gunicorn sets: the view reads wsgi.input itself


def test_a_body_the_server_terminates_is_read_from_wsgi_input(app: Flask) -> None:
    response = post(app, environ_overrides=TERMINATED)
    assert response.status_code == 200
    assert response.get_json()["result"]["resultType"] == "complete"


def test_a_body_the_server_terminates_still_meets_the_size_limit() -> None:
    app = build_app(MCP_MAX_CONTENT_LENGTH=2048)
    body = {**DISCOVER, "params": {**DISCOVER["params"], "padding": "x" * 5000}}
    assert_json_error(post(app, body, environ_overrides=TERMINATED), 413)


def test_flask_max_content_length_applies_when_the_server_terminates_the_body() -> None:
    app = build_app(MAX_CONTENT_LENGTH=100)
    assert_json_error(post(app, environ_overrides=TERMINATED), 413)


@pytest.mark.skipif(
    getattr(Request.max_content_length, "fset", None) is None, reason="Flask 3.1 made max_content_length per request"
)
def test_a_per_request_max_content_length_applies_when_the_server_terminates_the_body() -> None:
    app = build_app()
    app.before_request(lambda: setattr(request, "max_content_length", 100))
    assert_json_error(post(app, environ_overrides=TERMINATED), 413)


def test_a_terminated_body_read_by_a_hook_is_still_answered() -> None:
    app = build_app()
    seen: list[bytes] = []

    @app.before_request
    def peek() -> None:
        seen.append(request.get_data())

    response = post(app, environ_overrides=TERMINATED)
    assert seen and json.loads(seen[0])["method"] == "server/discover"
    assert response.status_code == 200, response.get_data(as_text=True)


def test_a_terminated_body_is_empty_to_the_app_after_the_view_read_it(app: Flask) -> None:
    seen: list[bytes] = []

    @app.after_request
    def read_body_again(response: Response) -> Response:
        seen.append(request.get_data())
        return response

    assert post(app, environ_overrides=TERMINATED).status_code == 200
    assert seen == [b""]


def test_the_body_is_empty_to_the_app_after_the_view_read_it(app: Flask) -> None:
    seen: list[bytes] = []

    @app.after_request
    def read_body_again(response: Response) -> Response:
        seen.append(request.get_data())
        return response

    assert post(app).status_code == 200
    assert seen == [b""]


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "text/json"])
def test_wrong_content_type_is_415_json(app: Flask, content_type: str) -> None:
    assert_json_error(post(app, headers={"Content-Type": content_type}), 415)


def test_missing_content_type_is_415_json(app: Flask) -> None:
    client = app.test_client()
    headers = {k: v for k, v in MODERN_HEADERS.items() if k != "Content-Type"}
    response = client.post("/mcp", data=json.dumps(DISCOVER).encode(), headers=headers)
    assert_json_error(response, 415)


def test_json_content_type_with_charset_is_accepted(app: Flask) -> None:
    response = post(app, headers={"Content-Type": "application/json; charset=utf-8"})
    assert response.status_code == 200
    assert response.get_json()["result"]["resultType"] == "complete"


@pytest.mark.parametrize("body", [b"this is not json", b'{"jsonrpc": ', b"\xff\xfe\xfd", b"[1, 2,]"])
def test_non_json_body_is_400_parse_error(app: Flask, body: bytes) -> None:
    error = assert_json_error(post(app, body), 400)
    assert error["error"]["code"] == -32700


@pytest.mark.parametrize("body", [b"", b"  \n "])
def test_empty_body_is_400_parse_error(app: Flask, body: bytes) -> None:
    error = assert_json_error(post(app, body), 400)
    assert error["error"]["code"] == -32700


def test_json_that_is_not_a_message_is_400_invalid_request(app: Flask) -> None:
    error = assert_json_error(post(app, b'"just a string"'), 400)
    assert error["error"]["code"] == -32600


# ---------------------------------------------------------------------- Accept


@pytest.mark.parametrize("accept", ["text/html", "image/png", "application/xml, text/html;q=0.9"])
def test_accept_without_json_or_event_stream_is_406(app: Flask, accept: str) -> None:
    assert_json_error(post(app, headers={"Accept": accept}), 406)


def test_no_accept_header_is_served_json(app: Flask) -> None:
    headers = {k: v for k, v in MODERN_HEADERS.items() if k != "Accept"}
    response = app.test_client().post("/mcp", data=json.dumps(DISCOVER), headers=headers)
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    assert response.get_json()["result"]["supportedVersions"][0] == V


@pytest.mark.parametrize("accept", ["*/*", "application/json", "application/*", "application/json, text/event-stream"])
def test_accept_including_json_is_served_json(app: Flask, accept: str) -> None:
    response = post(app, headers={"Accept": accept})
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    assert "result" in response.get_json()


def test_accept_event_stream_only_is_answered_with_sse(make_client: MakeClient, app: Flask) -> None:
    client = make_client(app, headers={"Accept": "text/event-stream"})
    response = client.discover()
    assert response.status_code == 200
    assert response.http.mimetype == "text/event-stream"
    assert response.headers["Cache-Control"] == "no-cache"
    assert response.headers["X-Accel-Buffering"] == "no"
    assert response.result["supportedVersions"][0] == V
    assert response.http.get_data(as_text=True).count("data:") == 1


def test_sse_answer_carries_errors_too(make_client: MakeClient, app: Flask) -> None:
    client = make_client(app, headers={"Accept": "text/event-stream"})
    response = client.call_tool("no-such-tool", {})
    assert response.http.mimetype == "text/event-stream"
    assert response.error["code"] == -32602


def test_sse_answer_keeps_the_session_id_header(make_client: MakeClient, app: Flask) -> None:
    client = make_client(app, "2025-11-25", headers={"Accept": "text/event-stream"})
    response = client.initialize()
    assert response.http.mimetype == "text/event-stream"
    assert response.headers["Mcp-Session-Id"]
    assert client.list_tools().result["tools"][0]["name"] == "echo"


# ---------------------------------------------------------------------- Origin


@pytest.mark.parametrize(
    "origin",
    [
        None,
        "http://localhost:3000",
        "http://localhost",
        "http://127.0.0.1:9",
        "http://[::1]:8",
        "https://localhost:8443",
    ],
)
def test_local_or_absent_origins_are_allowed(app: Flask, origin: str | None) -> None:
    headers = {"Origin": origin} if origin else {}
    response = post(app, headers=headers)
    assert response.status_code == 200


@pytest.mark.parametrize(
    "origin",
    ["https://evil.example", "http://localhost.evil.example", "http://127.0.0.1.evil.example", "null", "file://"],
)
def test_foreign_origin_is_403_with_a_jsonrpc_body(app: Flask, origin: str) -> None:
    response = post(app, headers={"Origin": origin})
    assert_json_error(response, 403)


def test_foreign_origin_is_refused_before_the_body_is_read(app: Flask) -> None:
    response = post(app, b"not even json", headers={"Origin": "https://evil.example"})
    assert response.status_code == 403


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_foreign_origin_is_403_on_other_methods(app: Flask, method: str) -> None:
    response = app.test_client().open(
        "/mcp", method=method, headers={"Origin": "https://evil.example", "Mcp-Session-Id": "x"}
    )
    assert response.status_code == 403


def test_origin_listed_in_allowed_origins_is_allowed() -> None:
    app = build_app(MCP_ALLOWED_ORIGINS=["https://app.example.com", "https://other.example.com"])
    assert post(app, headers={"Origin": "https://app.example.com"}).status_code == 200
    assert post(app, headers={"Origin": "https://evil.example"}).status_code == 403


def test_callable_allowed_origins_decides() -> None:
    seen: list[str] = []

    def allow(origin: str) -> bool:
        seen.append(origin)
        return origin.endswith(".trusted.example")

    app = build_app(MCP_ALLOWED_ORIGINS=allow)
    assert post(app, headers={"Origin": "https://a.trusted.example"}).status_code == 200
    assert post(app, headers={"Origin": "https://untrusted.example"}).status_code == 403
    assert "https://a.trusted.example" in seen


def test_same_host_https_origin_is_allowed_over_https(app: Flask) -> None:
    response = post(app, headers={"Origin": "https://example.com"}, base_url="https://example.com")
    assert response.status_code == 200


def test_other_https_origin_is_refused_over_https(app: Flask) -> None:
    response = post(app, headers={"Origin": "https://evil.example"}, base_url="https://example.com")
    assert response.status_code == 403


def test_same_host_http_origin_is_refused_when_the_request_is_https(app: Flask) -> None:
    response = post(app, headers={"Origin": "http://example.com"}, base_url="https://example.com")
    assert response.status_code == 403


# ---------------------------------------------------------------------- Host (DNS rebinding)


@pytest.mark.parametrize("host", ["evil.example.com", "evil.example.com:80", "attacker.localhost.example", "10.0.0.1"])
def test_foreign_host_on_a_loopback_server_is_403(app: Flask, host: str) -> None:
    response = post(app, headers={"Host": host})
    assert_json_error(response, 403)


@pytest.mark.parametrize("host", ["localhost", "localhost:5000", "127.0.0.1:8000", "[::1]:8000", "LOCALHOST"])
def test_loopback_host_is_allowed(app: Flask, host: str) -> None:
    assert post(app, headers={"Host": host}).status_code == 200


def test_foreign_host_is_403_on_get_and_delete(app: Flask) -> None:
    client = app.test_client()
    assert client.get("/mcp", headers={"Host": "evil.example.com"}).status_code == 403
    assert client.delete("/mcp", headers={"Host": "evil.example.com", "Mcp-Session-Id": "x"}).status_code == 403


def test_allowed_hosts_admits_a_listed_host() -> None:
    app = build_app(MCP_ALLOWED_HOSTS=["mcp.example.com"])
    assert post(app, headers={"Host": "mcp.example.com"}).status_code == 200
    assert post(app, headers={"Host": "mcp.example.com:8080"}).status_code == 200
    assert post(app, headers={"Host": "evil.example.com"}).status_code == 403


def test_disabling_dns_rebinding_protection_skips_host_and_origin_checks() -> None:
    app = build_app(MCP_DNS_REBINDING_PROTECTION=False)
    response = post(app, headers={"Host": "evil.example.com", "Origin": "https://evil.example"})
    assert response.status_code == 200


# ---------------------------------------------------------------------- no HTML, no 500


ERROR_CASES: list[tuple[str, dict[str, Any]]] = [
    ("GET", {}),
    ("PUT", {"data": b"{}", "content_type": "application/json"}),
    ("POST", {"data": b"nope", "content_type": "application/json"}),
    ("POST", {"data": b"", "content_type": "application/json"}),
    ("POST", {"data": b"{}", "content_type": "text/plain"}),
    ("POST", {"data": b"{}", "content_type": "application/json", "headers": {"Accept": "text/html"}}),
    ("POST", {"data": b"{}", "content_type": "application/json", "headers": {"Origin": "https://evil.example"}}),
    ("POST", {"data": b"{}", "content_type": "application/json", "headers": {"Host": "evil.example.com"}}),
    ("POST", {"data": b"[]", "content_type": "application/json"}),
    ("POST", {"data": b"{}", "content_type": "application/json"}),
    ("POST", {"data": b"[" * 100_000, "content_type": "application/json"}),
    ("POST", {"data": b'{"jsonrpc":"2.0","id":null,"method":"ping"}', "content_type": "application/json"}),
    (
        "POST",
        {
            "data": b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
            "content_type": "application/json",
            "headers": {"MCP-Protocol-Version": "2099-01-01"},
        },
    ),
    (
        "POST",
        {
            "data": b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
            "content_type": "application/json",
            "headers": {"Mcp-Session-Id": "gone"},
        },
    ),
    (
        "POST",
        {
            "data": json.dumps({**DISCOVER, "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": V}}}),
            "content_type": "application/json",
            "headers": {"MCP-Protocol-Version": V},
        },
    ),
    ("DELETE", {"headers": {"Mcp-Session-Id": "gone"}}),
    ("DELETE", {}),
]


@pytest.mark.parametrize("method,kwargs", ERROR_CASES)
def test_error_answers_are_json_without_html_or_tracebacks(app: Flask, method: str, kwargs: dict[str, Any]) -> None:
    response = app.test_client().open("/mcp", method=method, **kwargs)
    assert 400 <= response.status_code < 500
    assert response.mimetype == "application/json"
    text = response.get_data(as_text=True)
    assert "<html" not in text.lower()
    assert "Traceback" not in text
    assert 'File "' not in text
    body = response.get_json()
    assert body["jsonrpc"] == "2.0"
    assert isinstance(body["error"]["code"], int)


def test_the_header_view_finds_what_werkzeug_finds() -> None:
    from werkzeug.datastructures import EnvironHeaders

    from flask_mcp.http.blueprint import EnvironHeaderView

    environ = {"HTTP_MCP_METHOD": "tools/call", "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": "12",
               "HTTP_MCP_PARAM_REGION": "eu", "SERVER_NAME": "localhost"}
    ours, theirs = EnvironHeaderView(environ), EnvironHeaders(environ)
    for name in ("mcp-method", "Mcp-Method", "content-type", "Content-Length", "mcp-param-region", "mcp-name"):
        assert ours.get(name) == theirs.get(name)
    assert ours.get("mcp-name", "none") == "none"
    assert ours["MCP-METHOD"] == "tools/call"
    with pytest.raises(KeyError):
        ours["mcp-name"]
    assert sorted(ours) == sorted(theirs.keys())
    assert len(ours) == len(theirs) == 4


def test_a_body_read_by_a_before_request_hook_is_still_answered() -> None:
    """The view reads the body through ``request.stream``; a hook that read
    it first (and cached it) leaves the view the cached bytes to work with."""
    app = build_app()
    seen: list[bytes] = []

    @app.before_request
    def peek() -> None:
        seen.append(request.get_data())

    response = post(app)
    assert seen and json.loads(seen[0])["method"] == "server/discover"
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.get_json()["result"]["resultType"] == "complete"


def test_no_per_request_cors_hook_without_cors_origins() -> None:
    assert not build_app().after_request_funcs.get(None)
    assert build_app(MCP_CORS_ORIGINS=["https://app.example"]).after_request_funcs.get(None)
