"""Property-based and fuzz tests: arbitrary bytes, arbitrary JSON and mutated
valid MCP messages, POSTed to a real app through Flask's test client.

Whatever arrives, the answer is never a 5xx: it is an empty 202, or JSON-RPC
(a response, a batch of them, or an event stream of messages) that is well
formed; and sessions created before the fuzzing still work after it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import validate_message
from flask import Flask
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from json_paths import delete_at, get_at, paths, set_at
from pydantic import BaseModel

from flask_mcp import MCP, Context
from flask_mcp.auth import Principal
from flask_mcp.testing import ACCEPT, MCPTestClient, parse_sse

FUZZ = settings(max_examples=200, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
TOKEN = "fuzz-token"
VERSIONS = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"]
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "fuzzer", "version": "1"},
}


class Address(BaseModel):
    street: str
    number: int


def build_app() -> Flask:
    app = Flask("fuzzed")
    app.config.update({
        "MCP_BACKEND": "memory://",
        "MCP_AUTH": True,
        "MCP_RATE_LIMIT": "1000000/minute",
        "MCP_CLIENT_TIMEOUT": 0.5,
        "SECRET_KEY": "fuzz",
    })
    app.testing = True
    mcp = MCP(app, name="fuzzed", version="1.0")
    fuzzer = Principal(subject="fuzzer", scopes=frozenset({"files"}))
    mcp.token_verifier(lambda token: fuzzer if token == TOKEN else None)

    @mcp.tool
    def echo(text: str) -> str:
        return text

    @mcp.tool(scopes=["files:read"])
    def add(a: int, b: int = 0) -> int:
        return a + b

    @mcp.tool(rate_limit="1000000/minute")
    def ship(to: Address, express: bool = False) -> dict[str, Any]:
        return {"to": to.street, "express": express}

    @mcp.tool
    def chatty(ctx: Context, steps: int = 2) -> str:
        for step in range(min(max(steps, 0), 5)):
            ctx.report_progress(step + 1, 5)
            ctx.info(f"step {step}")
        return f"{ctx.account}"

    return app


class Sessions:
    """Legacy sessions made before the fuzzing, checked after it."""

    def __init__(self, app: Flask) -> None:
        self.clients = {}
        for version in ("2025-11-25", "2025-03-26"):
            client = MCPTestClient(app, protocol_version=version, headers={"Authorization": f"Bearer {TOKEN}"})
            client.initialize()
            self.clients[version] = client

    def ids(self) -> list[str]:
        return [str(client.session_id) for client in self.clients.values()]

    def check(self) -> None:
        for client in self.clients.values():
            result = client.call_tool("echo", {"text": "still here"}).result
            assert result["content"] == [{"type": "text", "text": "still here"}]
            assert client.call_tool("add", {"a": 2, "b": 3}).result["content"][0]["text"] == "5"


@pytest.fixture(scope="module")
def fuzzed() -> Iterator[tuple[Flask, Sessions]]:
    app = build_app()
    sessions = Sessions(app)
    yield app, sessions
    sessions.check()


# ---------------------------------------------------------------------- checking answers


def check_answer(response: Any) -> None:
    """The properties every answer must have."""
    assert response.status_code < 500, (response.status_code, response.data[:500])
    if response.status_code == 202:
        assert response.data == b""
        return
    if response.mimetype == "text/event-stream":
        events = [json.loads(data) for data in parse_sse(response.data)]
        assert events, "an event stream carries at least the final response"
        for message in events[:-1]:
            check_message(message, final=False)
        for message in events[-1] if isinstance(events[-1], list) else [events[-1]]:  # a 2025-03-26 batch
            check_message(message, final=True)
        return
    assert response.mimetype == "application/json", response.headers
    payload = json.loads(response.data)
    for message in payload if isinstance(payload, list) else [payload]:
        check_message(message, final=True)


def check_message(message: Any, *, final: bool) -> None:
    assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", message
    if not final and "method" in message:
        validate_message("2025-11-25", None, message)
        return
    assert ("result" in message) != ("error" in message), message
    if "id" in message:
        assert isinstance(message["id"], (str, int)) and not isinstance(message["id"], bool)
    if "error" in message:
        validate_message("2025-11-25", None, message)
        assert message["error"]["message"]
    else:
        assert isinstance(message["result"], dict)
        validate_message("2025-11-25", None, message)  # the envelope


def post(app: Flask, body: bytes, headers: dict[str, str]) -> Any:
    response = app.test_client().post("/mcp", data=body, headers=headers)
    check_answer(response)
    return response


# ---------------------------------------------------------------------- strategies

#: Text with lone surrogates too (hypothesis leaves them out by default): they
#: must be echoed as the escapes they arrived as, never crash the encoder.
#: (``st.text`` drops surrogates even from an alphabet that holds them: a list of characters does not.)
texts = st.lists(st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr)), max_size=20).map("".join)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | texts,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=25,
)

header_values = st.one_of(st.sampled_from(VERSIONS), st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=20))


def valid_messages(session_ids: list[str]) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """Well-formed requests of every era, with the headers a client sends."""
    modern = {"MCP-Protocol-Version": "2026-07-28"}
    legacy = {"MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": session_ids[0]}
    oldest = {"Mcp-Session-Id": session_ids[1]}
    initialize = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "f", "version": "1"}}
    return [
        ({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}},
         {**modern, "Mcp-Method": "server/discover"}),
        ({"jsonrpc": "2.0", "id": "t", "method": "tools/list", "params": {"_meta": META}},
         {**modern, "Mcp-Method": "tools/list"}),
        ({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
          "params": {"name": "add", "arguments": {"a": 1, "b": 2}, "_meta": META}},
         {**modern, "Mcp-Method": "tools/call", "Mcp-Name": "add"}),
        ({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
          "params": {"name": "chatty", "arguments": {"steps": 2},
                     "_meta": {**META, "progressToken": 9, "io.modelcontextprotocol/logLevel": "debug"}}},
         {**modern, "Mcp-Method": "tools/call", "Mcp-Name": "chatty"}),
        ({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
          "params": {"name": "ship", "arguments": {"to": {"street": "Main", "number": 1}}, "_meta": META}},
         {**modern, "Mcp-Method": "tools/call", "Mcp-Name": "ship"}),
        ({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": initialize}, {}),
        ({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}},
         legacy),
        ({"jsonrpc": "2.0", "id": 7, "method": "logging/setLevel", "params": {"level": "debug"}}, legacy),
        ({"jsonrpc": "2.0", "id": 8, "method": "ping"}, legacy),
        ({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 6}}, legacy),
        ({"jsonrpc": "2.0", "id": 9, "result": {}}, legacy),
        ({"jsonrpc": "2.0", "id": 10, "method": "tools/call",
          "params": {"name": "chatty", "arguments": {"steps": 1}, "_meta": {"progressToken": "p"}}}, oldest),
    ]


@st.composite
def mutated(draw: st.DrawFn, session_ids: list[str]) -> tuple[Any, dict[str, str]]:
    message, headers = copy.deepcopy(draw(st.sampled_from(valid_messages(session_ids))))
    body: Any = message
    if draw(st.integers(0, 3)) == 0:  # the id is what every answer echoes
        body["id"] = draw(texts | st.integers() | st.integers(min_value=2**63))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["replace", "delete", "add", "header", "drop-header", "batch"]))
        inside = list(paths(body))
        if kind == "replace" and inside:
            set_at(body, draw(st.sampled_from(inside)), draw(json_values))
        elif kind == "delete" and inside:
            delete_at(body, draw(st.sampled_from(inside)))
        elif kind == "add":
            containers = [p for p in [(), *inside] if isinstance(get_at(body, p), dict)]
            if containers:
                target = get_at(body, draw(st.sampled_from(containers)))
                target[draw(st.sampled_from(["id", "method", "params", "_meta", "name", "arguments", "cursor",
                                             "requestState", "inputResponses", "com.flask-mcp/account"]))] = \
                    draw(json_values)
        elif kind == "header":
            name = draw(st.sampled_from(["MCP-Protocol-Version", "Mcp-Method", "Mcp-Name", "Mcp-Session-Id",
                                         "Mcp-Param-Region", "X-Account-Id", "Authorization"]))
            headers[name] = draw(header_values)
        elif kind == "drop-header" and headers:
            headers.pop(draw(st.sampled_from(sorted(headers))))
        elif kind == "batch":
            body = [body, draw(json_values)]
    return body, headers


def _never_listens(body: Any) -> bool:
    """``subscriptions/listen`` opens a stream that lasts until the client leaves."""
    return "subscriptions/listen" not in json.dumps(body)


BASE_HEADERS = {"Accept": ACCEPT, "Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}


# ---------------------------------------------------------------------- the properties


@FUZZ
@given(body=st.binary(max_size=1024), version=st.sampled_from([None, *VERSIONS]), with_session=st.booleans())
def test_arbitrary_bytes_never_get_a_5xx(
    fuzzed: tuple[Flask, Sessions], body: bytes, version: str | None, with_session: bool
) -> None:
    app, sessions = fuzzed
    headers = dict(BASE_HEADERS)
    if version:
        headers["MCP-Protocol-Version"] = version
    if with_session:
        headers["Mcp-Session-Id"] = sessions.ids()[0]

    post(app, body, headers)


@FUZZ
@given(value=json_values, version=st.sampled_from([None, *VERSIONS]), method=st.sampled_from(
    [None, "tools/call", "tools/list", "server/discover", "initialize"]))
def test_arbitrary_json_never_gets_a_5xx(
    fuzzed: tuple[Flask, Sessions], value: Any, version: str | None, method: str | None
) -> None:
    app, _ = fuzzed
    headers = dict(BASE_HEADERS)
    if version:
        headers["MCP-Protocol-Version"] = version
    if method:
        headers["Mcp-Method"] = method
    if isinstance(value, dict) and method and "jsonrpc" not in value:
        value = {"jsonrpc": "2.0", "id": 1, "method": method, "params": value}

    post(app, json.dumps(value).encode(), headers)


@FUZZ
@given(data=st.data())
def test_mutated_mcp_messages_never_get_a_5xx(fuzzed: tuple[Flask, Sessions], data: st.DataObject) -> None:
    app, sessions = fuzzed
    body, headers = data.draw(mutated(sessions.ids()).filter(lambda case: _never_listens(case[0])))

    post(app, json.dumps(body).encode(), {**BASE_HEADERS, **headers})


def test_the_valid_messages_behind_the_mutations_are_answered(fuzzed: tuple[Flask, Sessions]) -> None:
    app, sessions = fuzzed
    for message, headers in valid_messages(sessions.ids()):
        response = post(app, json.dumps(message).encode(), {**BASE_HEADERS, **headers})
        assert response.status_code in (200, 202), (message, response.data)
    sessions.check()
