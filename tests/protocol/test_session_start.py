"""``initialize`` opens a session: the negotiated revision, the client's own
description kept, and the requests refused before any session exists."""

from __future__ import annotations

from typing import Any

from flask_mcp.protocol.jsonrpc import Request
from flask_mcp.protocol.session import Session
from flask_mcp.protocol.session_start import open_session
from flask_mcp.protocol.transport import Incoming, Reply, discard


def initialize(params: dict[str, Any]) -> Request:
    return Request(7, "initialize", params)


def incoming(body_size: int | None = None, principal: str | None = None) -> Incoming:
    arriving = Incoming({}, discard, principal)
    arriving.body_size = body_size
    return arriving


def test_a_session_opens_at_the_negotiated_revision_with_the_clients_description() -> None:
    params = {"protocolVersion": "2025-06-18", "capabilities": {"roots": {}},
              "clientInfo": {"name": "c", "version": "1"}}
    session = open_session(initialize(params), incoming(100, "alice"), 8192, 1000.0)
    assert isinstance(session, Session)
    assert session.protocol_version == "2025-06-18"
    assert session.client_capabilities == {"roots": {}}
    assert session.client_info == {"name": "c", "version": "1"}
    assert (session.principal, session.created_at, session.last_seen) == ("alice", 1000.0, 1000.0)


def test_an_unknown_version_opens_a_session_at_the_newest_legacy_revision() -> None:
    session = open_session(initialize({"protocolVersion": "1999-01-01", "capabilities": "odd"}), incoming(), 8192, 0.0)
    assert isinstance(session, Session)
    assert session.protocol_version == "2025-11-25"
    assert session.client_capabilities == {}
    assert session.client_info == {}


def test_no_version_is_refused_with_400() -> None:
    reply = open_session(initialize({"capabilities": {}}), incoming(50), 8192, 0.0)
    assert isinstance(reply, Reply)
    assert reply.status == 400
    assert reply.body["id"] == 7
    assert "protocolVersion" in reply.body["error"]["message"]


def test_client_info_past_the_limit_is_refused_before_any_session_exists() -> None:
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c" * 500}}
    reply = open_session(initialize(params), incoming(600), 100, 0.0)
    assert isinstance(reply, Reply)
    assert reply.status == 400
    assert "MCP_MAX_CLIENT_INFO_BYTES" in reply.body["error"]["message"]
