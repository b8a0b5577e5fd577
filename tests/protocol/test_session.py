"""Legacy sessions in the core: bound to the principal that created them, and
a store that is down answers 503 instead of failing the request."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from flask_mcp.backends import BackendUnavailable, MemorySessionStore
from flask_mcp.features.tools import ToolRegistry
from flask_mcp.protocol import Server, ServerInfo
from flask_mcp.protocol.request_info import RequestInfo
from flask_mcp.protocol.session import Session
from flask_mcp.protocol.versions import REVISIONS

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def _server(store: Any = None) -> Server:
    sessions = store if store is not None else MemorySessionStore()
    return Server(info=ServerInfo("s", "1"), tools=ToolRegistry(), sessions=sessions)


def _post(server: Server, message: dict[str, Any], session: str | None = None, principal: str | None = None) -> Any:
    headers = {"mcp-session-id": session} if session else {}
    return server.handle_post(headers, json.dumps(message).encode(), principal=principal)


def test_a_session_answers_only_the_principal_that_created_it() -> None:
    server = _server()
    session = _post(server, INIT, principal="alice").headers["Mcp-Session-Id"]
    assert _post(server, LIST, session, principal="alice").status == 200
    assert _post(server, LIST, session, principal="bob").status == 404
    assert _post(server, LIST, session, principal=None).status == 404
    assert server.handle_delete({"mcp-session-id": session}, principal="bob").status == 404
    assert server.handle_delete({"mcp-session-id": session}, principal="alice").status == 200
    assert _post(server, LIST, session, principal="alice").status == 404


class _DownStore(MemorySessionStore):
    """A store whose backend is unreachable (what Redis down looks like)."""

    def get(self, session_id: str) -> Any:
        raise BackendUnavailable("connection refused")

    def create(self, session: Any) -> None:
        raise BackendUnavailable("connection refused")

    def delete(self, session_id: str) -> bool:
        raise BackendUnavailable("connection refused")


def test_an_unreachable_store_gives_503_with_a_json_rpc_body_and_one_log_line(caplog: Any) -> None:
    server = _server(_DownStore())
    for reply in (_post(server, INIT), _post(server, LIST, "some-id"),
                  server.handle_delete({"mcp-session-id": "x"}), server.check_get({"mcp-session-id": "x"})):
        assert reply is not None
        assert reply.status == 503
        assert reply.headers["Retry-After"] == "1"
        assert reply.body["error"]["code"] == -32603
        assert "retry" in reply.body["error"]["message"]
    assert len([r for r in caplog.records if "unavailable" in r.getMessage()]) == 4


def test_stateless_requests_never_touch_the_store() -> None:
    server = _server(_DownStore())
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    reply = server.handle_post(
        {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"},
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}).encode(),
    )
    assert reply.status == 200
    assert reply.body["result"]["tools"] == []


def test_a_session_record_holds_every_field_and_reads_back_equal() -> None:
    session = Session(
        id="abc", protocol_version="2025-11-25", client_info={"name": "c"}, client_capabilities={"roots": {}},
        log_level="info", principal="alice", initialized=True, created_at=1.5, last_seen=2.5, data={"k": [1]},
    )
    record = session.to_dict()
    assert list(record) == [f.name for f in fields(Session)]
    assert Session.from_dict(json.loads(json.dumps(record))) == session


def test_a_session_record_of_another_version_reads_back_with_what_it_has() -> None:
    session = Session(id="abc", protocol_version="2025-11-25", principal="alice", data={"k": [1]})
    record = json.loads(json.dumps(session.to_dict()))

    assert Session.from_dict({**record, "added_later": True}) == session
    older = {key: value for key, value in record.items() if key not in ("principal", "data")}
    assert Session.from_dict(older) == Session(id="abc", protocol_version="2025-11-25")


def test_the_endpoint_url_is_built_once_and_only_when_asked_for() -> None:
    built: list[str] = []

    def build() -> str:
        built.append("x")
        return "https://example.test/mcp"

    request = RequestInfo(revision=REVISIONS["2026-07-28"], method="tools/call", params={}, headers={}, endpoint=build)
    assert built == []
    assert request.endpoint_url == "https://example.test/mcp"
    assert request.endpoint_url == "https://example.test/mcp"
    assert built == ["x"]
    assert RequestInfo(revision=REVISIONS["2026-07-28"], method="m", params={}, headers={}).endpoint_url is None
