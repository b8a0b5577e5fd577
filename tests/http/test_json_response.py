"""What the hot path prepares instead of rebuilding per request: JSON responses
built without Werkzeug's constructor, and capabilities built once per revision
(and dropped when a feature is added)."""

from __future__ import annotations

import json
from typing import Any

from flask import Flask, Response
from werkzeug.test import TestResponse

from flask_mcp import MCP
from flask_mcp.http import json_response as prepared
from flask_mcp.http.json_response import json_response

V = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": {}}
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def post_2026(app: Flask, method: str, params: dict[str, Any], name: str | None = None) -> TestResponse:
    """One 2026-07-28 request, with its ``_meta`` and standard headers."""
    headers = {**JSON_HEADERS, "MCP-Protocol-Version": V, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
    return app.test_client().post("/mcp", data=json.dumps(body), headers=headers)


def _state(response: Response) -> dict[str, Any]:
    state = dict(vars(response))
    state["headers"] = list(response.headers.items())
    return state


def test_the_direct_build_is_used_with_this_werkzeug() -> None:
    assert prepared._DIRECT  # if a Werkzeug upgrade turns this off, the check below says what differs


def test_a_prepared_response_is_what_werkzeugs_constructor_builds() -> None:
    for status in (200, 202, 400, 404, 500, 503):
        body = b'{"jsonrpc":"2.0","id":1,"result":{}}'
        assert _state(json_response(body, status)) == _state(Response(body, status, content_type="application/json"))


def test_a_prepared_response_answers_like_any_flask_response() -> None:
    response = json_response(b'{"ok":true}', 200)
    response.headers["X-Extra"] = "1"
    environ = {"REQUEST_METHOD": "POST", "SERVER_NAME": "localhost", "SERVER_PORT": "80", "wsgi.url_scheme": "http"}
    app_iter, status, headers = response.get_wsgi_response(environ)
    assert status == "200 OK"
    assert b"".join(app_iter) == b'{"ok":true}'
    assert dict(headers) == {"Content-Type": "application/json", "Content-Length": "11", "X-Extra": "1"}


def test_with_the_shortcut_off_answers_are_the_same(monkeypatch: Any) -> None:
    """The public path (Werkzeug's constructor), which a Werkzeug release that
    stores responses differently would switch to, answers exactly alike."""

    def answers() -> list[tuple[int, list[tuple[str, str]], bytes]]:
        app = Flask("fallback")
        mcp = MCP(app, name="fallback", version="1")

        @mcp.tool
        def echo(text: str) -> str:
            return text

        client = app.test_client()
        got = [post_2026(app, "tools/call", {"name": "echo", "arguments": {"text": "hi"}}, name="echo"),
               post_2026(app, "server/discover", {}),
               post_2026(app, "tools/call", {"name": "nope", "arguments": {}}, name="nope"),
               client.post("/mcp", data=b"{", headers=JSON_HEADERS),
               client.get("/mcp/health")]
        return [(r.status_code, sorted(r.headers.items()), r.data) for r in got]

    direct = answers()
    monkeypatch.setattr(prepared, "_DIRECT", False)
    monkeypatch.setattr(prepared, "_STATUS_LINES", {})
    assert answers() == direct
    assert prepared._STATUS_LINES == {}  # no status line kept: every answer came from the constructor
    assert [status for status, _, _ in direct] == [200, 200, 200, 400, 200]


def test_an_unusual_status_goes_through_the_constructor() -> None:
    response = json_response(b"{}", 599)
    assert response.status == "599 UNKNOWN"
    assert response.headers["Content-Length"] == "2"


def test_after_request_hooks_see_and_change_the_answer() -> None:
    app = Flask("hooks")
    mcp = MCP(app, name="hooks", version="1")

    @mcp.tool
    def echo(text: str) -> str:
        return text

    @app.after_request
    def stamp(response: Response) -> Response:
        response.headers["X-Request-Cost"] = str(len(response.get_data()))
        return response

    answer = post_2026(app, "tools/call", {"name": "echo", "arguments": {"text": "hi"}}, name="echo")
    assert answer.status_code == 200
    assert answer.headers["X-Request-Cost"] == answer.headers["Content-Length"] == str(len(answer.data))
    assert answer.get_json()["result"]["content"] == [{"type": "text", "text": "hi"}]


def _discover(app: Flask) -> dict[str, Any]:
    answer = post_2026(app, "server/discover", {})
    assert answer.status_code == 200
    return answer.get_json()["result"]["capabilities"]  # type: ignore[no-any-return]


def _initialize(app: Flask) -> dict[str, Any]:
    answer = app.test_client().post("/mcp", data=json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    ), headers=JSON_HEADERS)
    assert answer.status_code == 200
    return answer.get_json()["result"]["capabilities"]  # type: ignore[no-any-return]


def test_capabilities_follow_features_added_after_the_first_answer() -> None:
    app = Flask("growing")
    app.config["MCP_BACKEND"] = "memory://"
    mcp = MCP(app, name="growing", version="1")
    assert set(_discover(app)) == {"logging", "tools"}
    assert set(_initialize(app)) == {"logging", "tools"}

    @mcp.prompt
    def greet(name: str) -> str:
        return f"Hello {name}"

    assert "prompts" in _discover(app) and "prompts" in _initialize(app)

    @mcp.resource("notes://today")
    def today() -> str:
        return "nothing"

    assert "resources" in _discover(app) and "resources" in _initialize(app)
    assert "completions" not in _discover(app)

    @mcp.completion(prompt="greet", argument="name")
    def names(value: str) -> list[str]:
        return ["Ada"]

    assert "completions" in _discover(app) and "completions" in _initialize(app)
    mcp.resources.remove("notes://today")
    assert "resources" not in _discover(app)


def test_a_task_tool_added_later_declares_the_tasks_extension() -> None:
    app = Flask("tasks-later")
    app.config["MCP_BACKEND"] = "memory://"
    mcp = MCP(app, name="tasks-later", version="1")
    assert "extensions" not in _discover(app)

    @mcp.tool(task="optional")
    def slow() -> str:
        return "done"

    assert "io.modelcontextprotocol/tasks" in _discover(app).get("extensions", {})


def test_one_extension_on_two_apps_keeps_both_current() -> None:
    mcp = MCP(name="shared", version="1")
    first, second = Flask("first"), Flask("second")
    for app in (first, second):
        app.config["MCP_BACKEND"] = "memory://"
        mcp.init_app(app)
    assert "prompts" not in _discover(first) and "prompts" not in _discover(second)

    @mcp.prompt
    def hello() -> str:
        return "hi"

    assert "prompts" in _discover(first) and "prompts" in _discover(second)


def test_a_prepared_list_encodes_as_its_items() -> None:
    from flask_mcp.protocol import jsonrpc

    items = [{"name": "a", "inputSchema": {"type": "object"}}, {"name": "b"}]
    prepared_items = jsonrpc.prepared_list(items)
    assert prepared_items == items and prepared_items is not items
    assert json.loads(jsonrpc.encode({"tools": prepared_items, "id": 2**70})) == {"tools": items, "id": 2**70}
    assert jsonrpc.encode({"tools": prepared_items}) == jsonrpc.encode_stdlib({"tools": items})


def test_subclasses_of_json_types_encode_as_what_they_hold() -> None:
    from collections import OrderedDict

    from flask_mcp.protocol import jsonrpc

    class Shouting(str):
        def __str__(self) -> str:
            return "NOT THIS"

    class Count(int):
        def __int__(self) -> int:
            return -1

    payload = {"s": Shouting("quiet"), "n": Count(3), "o": OrderedDict(b=1, a=2), "l": type("L", (list,), {})([1])}
    assert json.loads(jsonrpc.encode(payload)) == {"s": "quiet", "n": 3, "o": {"b": 1, "a": 2}, "l": [1]}


def test_tools_list_serves_the_prepared_listing_and_follows_changes() -> None:
    app = Flask("listing")
    app.config["MCP_BACKEND"] = "memory://"
    mcp = MCP(app, name="listing", version="1")

    @mcp.tool
    def first(text: str) -> str:
        return text

    def names() -> list[str]:
        answer = post_2026(app, "tools/list", {})
        assert answer.status_code == 200
        tools = answer.get_json()["result"]["tools"]
        assert tools[0]["inputSchema"]["properties"]["text"]["type"] == "string"
        return [tool["name"] for tool in tools]

    assert names() == ["first"]
    assert names() == ["first"]  # served from the prepared listing

    @mcp.tool
    def second() -> str:
        return "2"

    assert names() == ["first", "second"]
