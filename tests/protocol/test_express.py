"""The express lane answers the usual 2026-07-28 ``tools/call`` exactly as the
general path does, and leaves everything else to it.

Each request of the corpus goes through the same app twice, once with the lane
(``server.express``) and once without; status, headers and body must be the
same bytes. Tests that name the lane's own shape also check it answered them
(the general path's 2026 handler is made to fail for the request)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from flask import Flask, g

from flask_mcp import MCP, Context, Header, Text, ToolError, ToolResult
from flask_mcp.auth import Principal
from flask_mcp.errors import MCPError
from flask_mcp.protocol.headers import LITERAL_VALUES
from flask_mcp.protocol.meta import PROTOCOL_VERSION_KEY
from flask_mcp.protocol.server import Server

MODERN = "2026-07-28"
META: dict[str, Any] = {PROTOCOL_VERSION_KEY: MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
HEADERS = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Accept": "application/json, text/event-stream"}


class Refused(MCPError):
    code = -32042
    http_status = 409


def build_app(**config: Any) -> Flask:
    app = Flask("express")
    app.config.update({"MCP_BACKEND": "memory://", **config})
    app.testing = True
    mcp = MCP(app, name="express", version="1.0")
    if config.get("MCP_AUTH"):
        mcp.token_verifier({"alice": Principal(subject="alice", scopes=frozenset({"read"}))}.get)

    @mcp.tool
    def echo(text: str) -> str:
        return text

    @mcp.tool
    def add(a: int, b: int) -> int:
        return a + b

    @mcp.tool
    def nothing() -> str:
        return "nothing"

    @mcp.tool
    def blocks() -> ToolResult:
        return ToolResult([Text("one"), Text("two")], structured={"n": 2})

    @mcp.tool
    def fails() -> str:
        raise ToolError("cannot do that")

    @mcp.tool
    def breaks() -> str:
        raise RuntimeError("a bug")

    @mcp.tool
    def refuses() -> str:
        raise Refused("conflict")

    @mcp.tool
    def who(ctx: Context) -> str:
        return f"{ctx.request_id}:{g.get('marked', '-')}"

    @mcp.tool
    def priced(price: Annotated[int, Header("Price")]) -> str:
        return str(price)

    @mcp.tool(scopes=["write"])
    def guarded() -> str:
        return "written"

    @mcp.tool(rate_limit="2/minute")
    def scarce() -> str:
        return "done"

    return app


@pytest.fixture
def app() -> Flask:
    return build_app()


def server_of(app: Flask) -> Server:
    return app.extensions["mcp"].server  # type: ignore[no-any-return]


def call(name: Any = "echo", arguments: Any = None, *, request_id: Any = 1, meta: Any = None,
         **params: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "_meta": META if meta is None else meta, **params}
    if arguments is not None:
        body["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": body}


def post(app: Flask, message: Any, headers: dict[str, str]) -> tuple[int, list[tuple[str, str]], bytes]:
    data = message if isinstance(message, bytes) else json.dumps(message).encode()
    response = app.test_client().post("/mcp", data=data, headers=headers, content_type="application/json")
    return response.status_code, sorted(response.headers.items()), response.get_data()


def both_ways(app: Flask, message: Any, headers: dict[str, str]) -> tuple[Any, Any]:
    server = server_of(app)
    lane = server.express
    assert lane is not None
    express = post(app, message, headers)
    server.express = None
    try:
        general = post(app, message, headers)
    finally:
        server.express = lane
    return express, general


@pytest.fixture
def general_path_refused(app: Flask, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The 2026 handler of the general path fails: only the lane can answer."""

    def refuse(*args: Any) -> Any:
        raise AssertionError("the general path answered a request the express lane should have")

    for name in ("echo", "add", "nothing", "blocks", "fails", "breaks", "refuses", "who", "guarded"):
        LITERAL_VALUES.add(name)  # as after the first request with each name
    monkeypatch.setattr(server_of(app), "_handle_stateless", refuse)
    yield


def with_name(name: str, **extra: str) -> dict[str, str]:
    return {**HEADERS, "Mcp-Name": name, **extra}


# ---------------------------------------------------------------- the same answer, both ways

CORPUS: list[tuple[str, Any, dict[str, str]]] = [
    ("plain call", call(arguments={"text": "hi"}), with_name("echo")),
    ("string id", call(arguments={"text": "hi"}, request_id="abc"), with_name("echo")),
    ("largest id", call(arguments={"text": "hi"}, request_id=2**63 - 1), with_name("echo")),
    ("id past 64 bits", call(arguments={"text": "hi"}, request_id=2**63), with_name("echo")),
    ("boolean id", call(arguments={"text": "hi"}, request_id=True), with_name("echo")),
    ("float id", call(arguments={"text": "hi"}, request_id=1.5), with_name("echo")),
    ("null id", call(arguments={"text": "hi"}, request_id=None), with_name("echo")),
    ("long string id", call(arguments={"text": "hi"}, request_id="x" * 257), with_name("echo")),
    ("no id", {k: v for k, v in call(arguments={"text": "hi"}).items() if k != "id"}, with_name("echo")),
    ("extra member", {**call(arguments={"text": "hi"}), "extra": 1}, with_name("echo")),
    ("jsonrpc 1.0", {**call(arguments={"text": "hi"}), "jsonrpc": "1.0"}, with_name("echo")),
    ("params an array", {**call(), "params": []}, with_name("echo")),
    ("params null", {**call(), "params": None}, with_name("echo")),
    ("no arguments", call("nothing"), with_name("nothing")),
    ("null arguments", {**call("nothing"), "params": {"name": "nothing", "arguments": None, "_meta": META}},
     with_name("nothing")),
    ("arguments an array", call("echo", ["hi"]), with_name("echo")),
    ("integers", call("add", {"a": 2, "b": 3}), with_name("add")),
    ("wrong argument type", call("add", {"a": "two", "b": 3}), with_name("add")),
    ("missing argument", call("add", {"a": 2}), with_name("add")),
    ("unknown tool", call("nope", {}), with_name("nope")),
    ("name not a string", call(7, {}), with_name("7")),
    ("no _meta", call(arguments={"text": "hi"}, meta={}), with_name("echo")),
    ("_meta an array", call(arguments={"text": "hi"}, meta=[]), with_name("echo")),
    ("older _meta version", call(arguments={"text": "hi"}, meta={**META, PROTOCOL_VERSION_KEY: "2025-11-25"}),
     with_name("echo")),
    ("unknown _meta version", call(arguments={"text": "hi"}, meta={**META, PROTOCOL_VERSION_KEY: "2099-01-01"}),
     with_name("echo")),
    ("version not a string", call(arguments={"text": "hi"}, meta={**META, PROTOCOL_VERSION_KEY: ["x"]}),
     with_name("echo")),
    ("capabilities missing", call(arguments={"text": "hi"}, meta={PROTOCOL_VERSION_KEY: MODERN}), with_name("echo")),
    ("client info", call(arguments={"text": "hi"}, meta={**META, "io.modelcontextprotocol/clientInfo": {
        "name": "c", "version": "1"}}), with_name("echo")),
    ("client info a string", call(arguments={"text": "hi"}, meta={**META, "io.modelcontextprotocol/clientInfo": "c"}),
     with_name("echo")),
    ("a log level", call(arguments={"text": "hi"}, meta={**META, "io.modelcontextprotocol/logLevel": "debug"}),
     with_name("echo")),
    ("a bad log level", call(arguments={"text": "hi"}, meta={**META, "io.modelcontextprotocol/logLevel": "loud"}),
     with_name("echo")),
    ("a progress token", call(arguments={"text": "hi"}, meta={**META, "progressToken": "p"}), with_name("echo")),
    ("trace context", call(arguments={"text": "hi"}, meta={**META, "traceparent": "00-" + "1" * 32 + "-" + "2" * 16
                                                            + "-01"}), with_name("echo")),
    ("a client that can be asked", call(arguments={"text": "hi"}, meta={
        **META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}), with_name("echo")),
    ("request state", call(arguments={"text": "hi"}, requestState="opaque"), with_name("echo")),
    ("input responses", call(arguments={"text": "hi"}, inputResponses={}), with_name("echo")),
    ("no version header", call(arguments={"text": "hi"}), {k: v for k, v in with_name("echo").items()
                                                            if k != "MCP-Protocol-Version"}),
    ("older version header", call(arguments={"text": "hi"}), with_name("echo", **{"MCP-Protocol-Version":
                                                                                   "2025-11-25"})),
    ("no Mcp-Method", call(arguments={"text": "hi"}), {"MCP-Protocol-Version": MODERN, "Mcp-Name": "echo"}),
    ("wrong Mcp-Method", call(arguments={"text": "hi"}), with_name("echo", **{"Mcp-Method": "tools/list"})),
    ("padded Mcp-Method", call(arguments={"text": "hi"}), with_name("echo", **{"Mcp-Method": " tools/call"})),
    ("no Mcp-Name", call(arguments={"text": "hi"}), HEADERS),
    ("wrong Mcp-Name", call(arguments={"text": "hi"}), with_name("add")),
    ("Base64 Mcp-Name", call(arguments={"text": "hi"}), with_name("=?base64?ZWNobw==?=")),
    ("a tool error", call("fails"), with_name("fails")),
    ("a tool bug", call("breaks"), with_name("breaks")),
    ("a tool's MCPError", call("refuses"), with_name("refuses")),
    ("structured result", call("blocks"), with_name("blocks")),
    ("context and g", call("who", request_id=9), with_name("who")),
    ("a header parameter", call("priced", {"price": 3}), with_name("priced", **{"Mcp-Param-Price": "3"})),
    ("a header parameter missing", call("priced", {"price": 3}), with_name("priced")),
    ("a scoped tool, no token", call("guarded"), with_name("guarded")),
    ("a batch", [call(arguments={"text": "hi"})], with_name("echo")),
    ("not JSON", b"{", with_name("echo")),
    ("another method", {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}},
     {**HEADERS, "Mcp-Method": "tools/list"}),
]


@pytest.mark.parametrize(("message", "headers"), [case[1:] for case in CORPUS], ids=[case[0] for case in CORPUS])
def test_the_lane_and_the_general_path_answer_alike(app: Flask, message: Any, headers: dict[str, str]) -> None:
    post(app, message, headers)  # the first request with a name teaches the headers' literal values
    express, general = both_ways(app, message, headers)
    assert express == general
    assert express[0] != 500 or message == call("breaks")


def test_the_corpus_covers_the_lane_and_the_general_path(app: Flask) -> None:
    """Some of the corpus is the lane's, most of it is not: both sides are compared."""
    taken = []
    for name, message, headers in CORPUS:
        post(app, message, headers)
        server = server_of(app)
        answered: list[bool] = []
        original = server._handle_stateless

        def watch(*args: Any, answered: list[bool] = answered, original: Any = original) -> Any:
            answered.append(True)
            return original(*args)

        server._handle_stateless = watch  # type: ignore[method-assign,assignment]
        try:
            post(app, message, headers)
        finally:
            del server._handle_stateless
        if not answered:
            taken.append(name)
    assert {"plain call", "string id", "integers", "a tool error", "structured result", "context and g",
            "wrong argument type", "a tool's MCPError", "a tool bug", "client info", "no arguments",
            "null arguments"} <= set(taken)
    assert not {"a progress token", "a log level", "Base64 Mcp-Name", "a header parameter", "request state",
                "a client that can be asked", "older version header"} & set(taken)


# ---------------------------------------------------------------- the lane's own answers


@pytest.mark.usefixtures("general_path_refused")
def test_the_lane_answers_a_plain_call(app: Flask) -> None:
    status, headers, body = post(app, call(arguments={"text": "hi"}), with_name("echo"))
    assert status == 200
    assert dict(headers)["Content-Type"] == "application/json"
    assert json.loads(body) == {"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": "hi"}], "resultType": "complete",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "express", "version": "1.0"}}}}


@pytest.mark.usefixtures("general_path_refused")
def test_the_lane_runs_the_tool_in_the_request_context(app: Flask) -> None:
    @app.before_request
    def mark() -> None:
        g.marked = "yes"

    status, _, body = post(app, call("who", request_id="r-1"), with_name("who"))
    assert status == 200
    assert json.loads(body)["result"]["content"] == [{"type": "text", "text": "r-1:yes"}]


@pytest.mark.usefixtures("general_path_refused")
def test_invalid_arguments_are_a_result_the_model_can_read(app: Flask) -> None:
    status, _, body = post(app, call("add", {"a": "two", "b": 3}), with_name("add"))
    result = json.loads(body)["result"]
    assert status == 200
    assert result["isError"] is True
    assert "a" in result["content"][0]["text"]


@pytest.mark.usefixtures("general_path_refused")
def test_a_failing_tool_is_logged_and_answered_without_internals(app: Flask, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="flask_mcp"):
        status, _, body = post(app, call("breaks"), with_name("breaks"))
    assert status == 200
    assert "a bug" not in body.decode()
    assert json.loads(body)["result"]["isError"] is True
    assert any("breaks" in record.getMessage() for record in caplog.records)


@pytest.mark.usefixtures("general_path_refused")
def test_a_tools_mcp_error_keeps_its_status(app: Flask) -> None:
    status, _, body = post(app, call("refuses"), with_name("refuses"))
    assert status == 409
    assert json.loads(body)["error"]["code"] == -32042


def test_a_rate_limited_tool_counts_each_call_once(app: Flask) -> None:
    LITERAL_VALUES.add("scarce")
    statuses = [post(app, call("scarce"), with_name("scarce"))[0] for _ in range(3)]
    assert statuses == [200, 200, 429]


def test_the_scopes_of_a_tool_hold_in_the_lane() -> None:
    app = build_app(MCP_AUTH=True)
    headers = with_name("guarded", Authorization="Bearer alice")
    post(app, call("guarded"), headers)
    express, general = both_ways(app, call("guarded"), headers)
    assert express == general
    assert express[0] == 403
    assert "insufficient_scope" in {k.lower(): v for k, v in express[1]}["www-authenticate"]


def test_the_access_log_sends_requests_the_general_way(app: Flask, caplog: pytest.LogCaptureFixture) -> None:
    """An observer that listens gets every call: the lane steps aside for it."""
    LITERAL_VALUES.add("echo")
    with caplog.at_level(logging.INFO, logger="flask_mcp.access"):
        status, _, _ = post(app, call(arguments={"text": "hi"}), with_name("echo"))
    assert status == 200
    records = [r for r in caplog.records if r.name == "flask_mcp.access"]
    assert len(records) == 1
    assert "echo" in records[0].getMessage()
