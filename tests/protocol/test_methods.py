"""The method table (``Methods.table()`` and each revision's ``core_methods``)
held against the spec: every client request a revision's ``schema.json``
defines is served, a method the revision's schema lacks is refused with
``-32601``, and nothing is served that no schema or extension defines.

The methods come from the vendored schemas (the ``ClientRequest`` union), so a
new revision's schema shows what the table still misses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest
from conftest import ALL_VERSIONS, SPEC, validate_message
from flask import Flask

from flask_mcp import MCP
from flask_mcp.protocol import Reply, Server
from flask_mcp.protocol.headers import NAME_PARAM
from flask_mcp.protocol.meta import CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY
from flask_mcp.protocol.versions import REVISIONS, STATELESS_VERSIONS

#: Served though no ``ClientRequest`` of a schema names them: the methods of
#: the extensions a server declares in ``capabilities.extensions``.
EXTENSION_METHODS = {
    "io.modelcontextprotocol/tasks": frozenset({"tasks/get", "tasks/update", "tasks/cancel"}),
    "io.modelcontextprotocol/skills": frozenset({"skills/list", "skills/get", "resources/directory/read"}),
}

#: Methods a schema defines that this server knowingly leaves out, and why the
#: spec allows it. 2025-11-25's tasks are a server capability (``tasks``) that
#: this server does not declare (its tasks are the 2026-07-28 extension), and a
#: server that does not declare a capability answers its methods with -32601.
NOT_SERVED = {"2025-11-25": frozenset({"tasks/get", "tasks/result", "tasks/cancel", "tasks/list"})}

#: Served by the ``Server`` itself, not through the method table: a listen
#: stream is held open by the HTTP layer.
SERVED_BY_THE_SERVER = frozenset({"subscriptions/listen"})


@cache
def schema_methods(version: str) -> frozenset[str]:
    """The ``method`` constant of every member of the revision's ``ClientRequest`` union."""
    schema = json.loads((SPEC / version / "schema.json").read_text())
    definitions = schema.get("$defs") or schema["definitions"]
    members = definitions["ClientRequest"]["anyOf"]
    return frozenset(definitions[m["$ref"].rsplit("/", 1)[-1]]["properties"]["method"]["const"] for m in members)


def every_schema_method() -> frozenset[str]:
    return frozenset().union(*(schema_methods(version) for version in ALL_VERSIONS))


def extension_methods() -> frozenset[str]:
    return frozenset().union(*EXTENSION_METHODS.values())


def foreign_methods(version: str) -> frozenset[str]:
    """Methods only other revisions' schemas define (an extension's method of
    the same name, such as 2026-07-28's ``tasks/get``, is the extension's)."""
    served_extensions = REVISIONS[version].core_methods & extension_methods()
    return every_schema_method() - schema_methods(version) - NOT_SERVED.get(version, frozenset()) - served_extensions


@pytest.fixture
def app() -> Flask:
    """One of everything the schemas have methods for: a tool, a resource, a
    prompt with completions (tasks on the memory backend)."""
    app = Flask("methods")
    app.config.update(MCP_BACKEND="memory://", MCP_TELEMETRY=False)
    mcp = MCP(name="methods", version="1")

    @mcp.tool
    def echo(text: str) -> str:
        """Say it back."""
        return text

    @mcp.resource("note://hello")
    def hello() -> str:
        return "hello"

    @mcp.prompt(complete={"who": ["ann", "bob"]})
    def greet(who: str) -> str:
        """Greet someone."""
        return f"Hello {who}"

    mcp.init_app(app)
    return app


@pytest.fixture
def server(app: Flask) -> Iterator[Server]:
    with app.app_context():
        yield app.extensions["mcp"].server


#: Valid params for each method, against the app above.
PARAMS: dict[str, dict[str, Any]] = {
    "tools/call": {"name": "echo", "arguments": {"text": "hi"}},
    "resources/read": {"uri": "note://hello"},
    "resources/subscribe": {"uri": "note://hello"},
    "resources/unsubscribe": {"uri": "note://hello"},
    "prompts/get": {"name": "greet", "arguments": {"who": "ann"}},
    "completion/complete": {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "who", "value": "a"}},
    "logging/setLevel": {"level": "info"},
    "subscriptions/listen": {"notifications": {"toolsListChanged": True}},
    "tasks/get": {"taskId": "t-1"},
    "tasks/result": {"taskId": "t-1"},
    "tasks/cancel": {"taskId": "t-1"},
}


def send(server: Server, version: str, method: str) -> Reply:
    """``method`` with valid params as a client of ``version`` sends it (legacy:
    in a fresh session)."""
    params = dict(PARAMS.get(method, {}))
    message = {"jsonrpc": "2.0", "id": "m", "method": method, "params": params}
    if version in STATELESS_VERSIONS:
        params["_meta"] = {PROTOCOL_VERSION_KEY: version, CLIENT_CAPABILITIES_KEY: {}}
        headers = {"mcp-protocol-version": version, "mcp-method": method}
        if method in NAME_PARAM:
            headers["mcp-name"] = params[NAME_PARAM[method]]
        return server.handle_post(headers, json.dumps(message).encode())
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}
    if method == "initialize":
        return server.handle_post({}, json.dumps(init).encode())
    session_id = server.handle_post({}, json.dumps(init).encode()).headers["Mcp-Session-Id"]
    headers = {"mcp-session-id": session_id, "mcp-protocol-version": version}
    return server.handle_post(headers, json.dumps(message).encode())


def answered(reply: Reply) -> dict[str, Any]:
    """The JSON-RPC answer, running a reply the HTTP layer would have streamed."""
    if reply.deferred is not None:
        finished = reply.deferred(None, lambda: False, None)
        assert finished is not None
        reply = finished
    assert isinstance(reply.body, dict), reply
    return reply.body


# ---------------------------------------------------------------------- the table against the schemas


def test_the_schemas_name_the_methods_this_test_reads() -> None:
    """Guards the reading of the schemas: a change of their layout must not
    turn every test below into a comparison of empty sets."""
    assert {"initialize", "ping", "tools/call"} <= schema_methods("2025-03-26")
    assert {"server/discover", "subscriptions/listen", "tools/call"} <= schema_methods("2026-07-28")


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_every_request_of_the_revisions_schema_is_served_unless_knowingly_left_out(version: str) -> None:
    served = REVISIONS[version].core_methods
    missing = schema_methods(version) - served - NOT_SERVED.get(version, frozenset())
    assert missing == set(), f"{version}: the schema defines {sorted(missing)}, which this server does not serve"


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_every_method_a_revision_serves_has_a_handler(server: Server, version: str) -> None:
    table = server.methods.table()
    without = REVISIONS[version].core_methods - table.keys() - SERVED_BY_THE_SERVER
    assert without == set(), f"{version} serves {sorted(without)}, which Methods.table() has no handler for"


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_a_revision_serves_only_its_schemas_methods_and_those_of_extensions(version: str) -> None:
    unknown = REVISIONS[version].core_methods - schema_methods(version) - extension_methods()
    assert unknown == set(), f"{version} serves {sorted(unknown)}, which neither its schema nor an extension defines"


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_no_revision_serves_a_method_only_other_revisions_define(version: str) -> None:
    assert REVISIONS[version].core_methods & foreign_methods(version) == set()


def test_the_left_out_methods_are_refused_where_their_capability_is_not_declared(server: Server) -> None:
    reply = send(server, "2025-11-25", "initialize")
    assert "tasks" not in reply.body["result"]["capabilities"]
    for method in NOT_SERVED["2025-11-25"]:
        reply = send(server, "2025-11-25", method)
        assert (reply.status, reply.body["error"]["code"]) == (200, -32601), method


# ---------------------------------------------------------------------- answers, per method and revision


@pytest.mark.parametrize(
    ("version", "method"),
    [(v, m) for v in ALL_VERSIONS for m in sorted(schema_methods(v) - NOT_SERVED.get(v, frozenset()))],
)
def test_each_served_schema_method_gets_its_result(server: Server, version: str, method: str) -> None:
    reply = send(server, version, method)
    if method == "subscriptions/listen":  # handed to the HTTP layer, which holds the stream
        assert (reply.status, reply.listen is not None) == (200, True), reply
        return
    message = answered(reply)
    assert "result" in message, message
    validate_message(version, method, message)


@pytest.mark.parametrize(
    ("version", "method"),
    [(v, m) for v in ALL_VERSIONS for m in sorted(foreign_methods(v))],
)
def test_a_method_only_other_revisions_define_is_method_not_found(server: Server, version: str, method: str) -> None:
    """Newer methods on older sessions (``server/discover``, ``subscriptions/listen``)
    and older ones on 2026-07-28 (``initialize``, ``ping``...): -32601, with
    the HTTP status the revision gives it (404 in 2026-07-28, else 200)."""
    reply = send(server, version, method)
    assert reply.status == REVISIONS[version].method_not_found_status
    assert reply.body["error"]["code"] == -32601
    assert method in reply.body["error"]["message"]
    validate_message(version, None, reply.body)
