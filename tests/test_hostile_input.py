"""Hostile input never gets a 5xx or a non-JSON answer (issue 16, item 1):
lone surrogates wherever a string is echoed, bodies in other encodings,
request methods no rule lists, out-of-range ids in 2025-03-26 batches,
too-deep bodies, parse errors asked for as event streams, and failures
inside an event stream. Flask's test client, the default SQLite backend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import ALL_VERSIONS, JSON_HEADERS, validate_message
from flask import Flask

from flask_mcp import MCP, Context
from flask_mcp.testing import parse_sse

V = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": {}}
LOGGING_META = {**META, "io.modelcontextprotocol/logLevel": "debug"}
MODERN = {**JSON_HEADERS, "MCP-Protocol-Version": V}


def build_app(tmp_path: Path) -> Flask:
    app = Flask("hostile", instance_path=str(tmp_path))
    app.config.update({"SECRET_KEY": "test"})  # the SQLite default backend, in tmp_path
    app.testing = True
    mcp = MCP(app, name="hostile")

    @mcp.tool
    def echo(text: str) -> str:
        return text

    @mcp.tool
    def chatty(text: str, ctx: Context) -> str:
        ctx.info(text)
        return text

    @mcp.tool
    def logs_a_set(ctx: Context) -> str:
        ctx.info({"not", "json"})  # a mistake in the tool: a set is no JSON value
        return "unreachable for the client"

    @mcp.resource("notes://{name}")
    def note(name: str) -> str:
        return name

    @app.route("/own", methods=["GET"])
    def own() -> str:
        return "the app's own route"

    return app


@pytest.fixture
def app(tmp_path: Path) -> Flask:
    return build_app(tmp_path)


def post(app: Flask, body: bytes | str, **headers: str) -> Any:
    return app.test_client().post("/mcp", data=body, headers={**MODERN, **headers})


def modern(method: str, params: dict[str, Any], request_id: str = "1", meta: dict[str, Any] = META) -> str:
    """A 2026-07-28 request as JSON text, with ``request_id`` spliced in raw;
    a ``\\u`` written in a string of ``params`` stays an escape (such as
    ``\\ud800``, which Python's json would never write)."""
    body = json.dumps({"jsonrpc": "2.0", "id": "ID", "method": method, "params": {**params, "_meta": meta}})
    return body.replace('"ID"', f'"{request_id}"', 1).replace("\\\\u", "\\u")


def answer_of(response: Any) -> Any:
    """The JSON-RPC answer, from JSON or the last event of a stream; the body must be UTF-8."""
    response.data.decode("utf-8")
    if response.mimetype == "text/event-stream":
        return json.loads(list(parse_sse(response.data))[-1])
    assert response.mimetype == "application/json", response.headers
    return json.loads(response.data)


# ---------------------------------------------------------------------- lone surrogates


@pytest.mark.parametrize("request_id", ["id-\\ud800420O", "\\udc00", "a\\udfff\\ud800b"])
def test_a_lone_surrogate_in_the_id_is_echoed_escaped(app: Flask, request_id: str) -> None:
    response = post(app, modern("tools/list", {}, request_id), **{"Mcp-Method": "tools/list"})

    assert response.status_code == 200
    assert f'"id":"{request_id}"'.encode() in response.data  # the very escape the client sent
    assert answer_of(response)["id"] == json.loads(f'"{request_id}"')


def test_the_issues_resources_unsubscribe_example_gets_its_id_back(app: Flask) -> None:
    client = app.test_client()
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "f", "version": "1"}}}
    session = client.post("/mcp", json=initialize, headers=JSON_HEADERS).headers["Mcp-Session-Id"]
    body = ('{"jsonrpc":"2.0","id":"id-\\ud800420O","method":"resources/unsubscribe",'
            '"params":{"uri":"notes://a\\ud800"}}')

    response = client.post("/mcp", data=body, headers={
        **JSON_HEADERS, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})

    assert response.status_code < 500
    assert answer_of(response)["id"] == "id-\ud800420O"


def test_a_lone_surrogate_in_an_echoed_argument_is_answered_as_json(app: Flask) -> None:
    body = modern("tools/call", {"name": "echo", "arguments": {"text": "a\\udc00b"}})

    response = post(app, body, **{"Mcp-Method": "tools/call", "Mcp-Name": "echo"})

    assert response.status_code == 200
    assert answer_of(response)["result"]["content"] == [{"type": "text", "text": "a\udc00b"}]


def test_a_lone_surrogate_in_a_log_message_is_streamed_escaped(app: Flask) -> None:
    body = modern("tools/call", {"name": "chatty", "arguments": {"text": "\\ud800!"}}, meta=LOGGING_META)

    response = post(app, body, **{"Mcp-Method": "tools/call", "Mcp-Name": "chatty"})

    assert response.status_code == 200 and response.mimetype == "text/event-stream"
    log, result = (json.loads(data) for data in parse_sse(response.data))
    assert log["params"]["data"] == "\ud800!"
    assert result["result"]["content"][0]["text"] == "\ud800!"


def test_a_client_response_whose_id_holds_a_lone_surrogate_is_accepted(app: Flask) -> None:
    client = app.test_client()
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "f", "version": "1"}}}
    session = client.post("/mcp", json=initialize, headers=JSON_HEADERS).headers["Mcp-Session-Id"]

    response = client.post("/mcp", data='{"jsonrpc":"2.0","id":"x\\ud800","result":{}}', headers={
        **JSON_HEADERS, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})

    assert response.status_code == 202  # an answer to no request of ours: dropped, as any other


def test_a_session_whose_client_info_holds_a_lone_surrogate_works(app: Flask) -> None:
    client = app.test_client()
    body = ('{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
            '"capabilities":{},"clientInfo":{"name":"\\ud800","version":"\\udfff"}}}')
    response = client.post("/mcp", data=body, headers=JSON_HEADERS)
    assert response.status_code == 200
    session = {"Mcp-Session-Id": response.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-11-25"}

    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}
    answered = client.post("/mcp", json=call, headers={**JSON_HEADERS, **session})

    assert answered.status_code == 200 and answer_of(answered)["result"]["content"][0]["text"] == "x"


@pytest.mark.parametrize("raw", [b"\xed\xa0\x80", b"\xed\xbf\xbf"], ids=["high", "low"])
def test_the_raw_bytes_of_a_lone_surrogate_are_a_parse_error(app: Flask, raw: bytes) -> None:
    body = modern("tools/list", {}).encode().replace(b'"1"', b'"id-' + raw + b'"')

    response = post(app, body, **{"Mcp-Method": "tools/list"})

    assert response.status_code == 400
    assert answer_of(response)["error"]["code"] == -32700
    assert "UTF-8" in answer_of(response)["error"]["message"]


# ---------------------------------------------------------------------- encodings


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32", "utf-32-be"])
def test_a_body_in_another_unicode_encoding_is_a_parse_error(app: Flask, encoding: str) -> None:
    body = modern("server/discover", {}).encode(encoding)

    response = post(app, body, **{"Mcp-Method": "server/discover"})

    assert response.status_code == 400
    error = answer_of(response)
    assert error["error"]["code"] == -32700 and "id" not in error


def test_a_batch_in_utf16_is_a_parse_error(app: Flask) -> None:
    client = app.test_client()
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "f", "version": "1"}}}
    session = client.post("/mcp", json=initialize, headers=JSON_HEADERS).headers["Mcp-Session-Id"]
    batch = json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]).encode("utf-16")

    response = client.post("/mcp", data=batch, headers={**JSON_HEADERS, "Mcp-Session-Id": session})

    assert response.status_code == 400 and answer_of(response)["error"]["code"] == -32700


# ---------------------------------------------------------------------- HTTP methods


@pytest.mark.parametrize("method", ["FOO", "TRACE", "PROPFIND", "CONNECT", "PUT", "PATCH"])
def test_a_method_the_endpoint_does_not_serve_gets_a_json_rpc_405_with_allow(app: Flask, method: str) -> None:
    response = app.test_client().open("/mcp", method=method, data=b"{}")

    assert response.status_code == 405
    assert response.mimetype == "application/json"
    assert set(response.headers["Allow"].replace(" ", "").split(",")) == {"POST", "DELETE"}
    body = response.get_json()
    for version in ALL_VERSIONS[1:]:  # 2025-03-26 errors need an id; these have none to give
        validate_message(version, None, body)
    assert method in body["error"]["message"]


@pytest.mark.parametrize("method", ["FOO", "POST", "DELETE"])
def test_the_health_check_refuses_other_methods_as_json_too(app: Flask, method: str) -> None:
    response = app.test_client().open("/mcp/health", method=method)

    assert response.status_code == 405 and response.mimetype == "application/json"
    assert response.headers["Allow"] == "GET"


def test_the_apps_own_routes_keep_werkzeugs_405(app: Flask) -> None:
    response = app.test_client().open("/own", method="FOO")

    assert response.status_code == 405
    assert response.mimetype == "text/html"  # the hook answers only for the MCP endpoint


def test_a_foreign_host_is_refused_before_the_method(app: Flask) -> None:
    response = app.test_client().open("/mcp", method="FOO", headers={"Host": "evil.example.com"},
                                      environ_overrides={"SERVER_NAME": "127.0.0.1"})

    assert response.status_code == 403 and response.mimetype == "application/json"


# ---------------------------------------------------------------------- batches


def test_every_element_of_a_2025_03_26_batch_is_answered_with_its_id(app: Flask) -> None:
    client = app.test_client()
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "f", "version": "1"}}}
    session = client.post("/mcp", json=initialize, headers=JSON_HEADERS).headers["Mcp-Session-Id"]
    ids = [2**63, -(2**63) - 1, 2**80, "x" * 257, 7, "ok", "\\ud800"]
    batch = "[" + ",".join(
        json.dumps({"jsonrpc": "2.0", "id": "ID", "method": "ping"}).replace('"ID"', json.dumps(i) if i != "\\ud800"
                                                                           else '"\\ud800"')
        for i in ids) + "]"

    for accept in (JSON_HEADERS["Accept"], "application/json"):
        response = client.post("/mcp", data=batch, headers={
            "Accept": accept, "Content-Type": "application/json", "Mcp-Session-Id": session})

        assert response.status_code == 200
        answers = answer_of(response)
        assert [answer["id"] for answer in answers] == [*ids[:-1], "\ud800"]
        for answer in answers:
            validate_message("2025-03-26", None, answer)  # that revision's errors must carry their id
        assert [a.get("result") for a in answers] == [None, None, None, None, {}, {}, {}]


# ---------------------------------------------------------------------- depth, parse errors


@pytest.mark.parametrize("depth", [65, 1_200, 100_000])
def test_too_deep_bodies_get_one_code_whatever_the_depth(app: Flask, depth: int) -> None:
    body = modern("server/discover", {"x": "DEEP"}).replace('"DEEP"', "[" * depth + "]" * depth)

    response = post(app, body, **{"Mcp-Method": "server/discover"})

    assert response.status_code == 400
    answer = answer_of(response)
    assert answer["error"]["code"] == -32700 and "nested more than 64" in answer["error"]["message"]  # as README says
    assert answer.get("id") == ("1" if depth < 1_000 else None)  # echoed whenever the body could be read


@pytest.mark.parametrize("body", [b"{", b"\xff\xfe{\x00}\x00", b"[" * 5000])
def test_a_parse_error_is_json_even_for_a_client_that_takes_only_event_streams(app: Flask, body: bytes) -> None:
    response = post(app, body, Accept="text/event-stream")

    assert response.status_code == 400
    assert response.mimetype == "application/json"
    assert response.get_json()["error"]["code"] == -32700


# ---------------------------------------------------------------------- failures inside a stream


def test_a_failure_inside_an_event_stream_ends_it_with_a_json_rpc_error_event(app: Flask) -> None:
    body = modern("tools/call", {"name": "logs_a_set", "arguments": {}}, meta=LOGGING_META)

    response = post(app, body, **{"Mcp-Method": "tools/call", "Mcp-Name": "logs_a_set"})

    assert response.status_code == 200 and response.mimetype == "text/event-stream"
    events = [json.loads(data) for data in parse_sse(response.data)]
    assert events[-1]["error"]["code"] == -32603
    assert "see the server log" in events[-1]["error"]["message"]
    validate_message("2025-11-25", None, events[-1])


# ---------------------------------------------------------------------- what a session keeps


def initialize_with(app: Flask, client_info: dict[str, Any], capabilities: dict[str, Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": "init-1", "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": client_info}}
    return app.test_client().post("/mcp", json=body, headers=JSON_HEADERS)


@pytest.mark.parametrize("where", ["clientInfo", "capabilities"])
def test_an_initialize_whose_client_info_a_session_cannot_keep_gets_invalid_params(
    app: Flask, where: str
) -> None:
    padding = {"x-padding": "p" * 70_000}  # one unused session of this kind would keep it until it expires
    info: dict[str, Any] = {"name": "big", "version": "1"}
    capabilities: dict[str, Any] = {}
    (info if where == "clientInfo" else capabilities).update(padding)

    response = initialize_with(app, info, capabilities)

    assert response.status_code == 400 and "Mcp-Session-Id" not in response.headers
    answer = response.get_json()
    assert answer["id"] == "init-1" and answer["error"]["code"] == -32602
    assert "MCP_MAX_CLIENT_INFO_BYTES" in answer["error"]["message"] and "65536" in answer["error"]["message"]
    validate_message("2025-11-25", None, answer)


def test_client_info_up_to_the_limit_is_kept_and_the_limit_can_be_raised(tmp_path: Path) -> None:
    icon = "data:image/png;base64," + "A" * 60_000  # a client's inline icon: large, but under 64 KiB
    info = {"name": "iconic", "version": "1", "icons": [{"src": icon, "mimeType": "image/png"}]}
    app = build_app(tmp_path)
    assert initialize_with(app, info, {}).status_code == 200
    larger = {**info, "icons": [{"src": icon + "A" * 10_000, "mimeType": "image/png"}]}
    assert initialize_with(app, larger, {}).status_code == 400

    raised = Flask("raised", instance_path=str(tmp_path / "raised"))
    raised.config.update({"SECRET_KEY": "test", "MCP_MAX_CLIENT_INFO_BYTES": 128 * 1024})
    MCP(raised, name="raised")
    response = initialize_with(raised, larger, {})
    assert response.status_code == 200 and response.headers["Mcp-Session-Id"]
