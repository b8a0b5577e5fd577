"""answer_batch on its own: the order of its refusals, and each message answered
as if it came alone (the server's batch tests drive it through a POST)."""

from __future__ import annotations

from flask_mcp.protocol.batches import answer_batch
from flask_mcp.protocol.jsonrpc import Message, Request
from flask_mcp.protocol.session import Session
from flask_mcp.protocol.transport import Incoming, Reply, discard


def incoming(**headers: str) -> Incoming:
    arrived = Incoming({name.replace("_", "-"): value for name, value in headers.items()}, discard, None)
    arrived.read_session_id()
    return arrived


def echo_method(message: Message, arrived: Incoming, session: Session) -> Reply | None:
    """Answers a request with its own method name and the session's id; a notification with nothing."""
    if not isinstance(message, Request):
        return None
    return Reply(200, {"id": message.id, "result": [message.method, session.id]})


def test_each_message_is_answered_in_order_and_notifications_add_nothing() -> None:
    session = Session("s1", "2025-03-26")
    items = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "method": "notifications/x"},
             {"jsonrpc": "2.0", "id": "two", "method": "tools/list"}, {"id": 3}]
    reply = answer_batch(items, incoming(mcp_session_id="s1"), session, echo_method)
    assert reply.status == 200
    assert reply.body[:2] == [{"id": 1, "result": ["ping", "s1"]}, {"id": "two", "result": ["tools/list", "s1"]}]
    assert reply.body[2]["id"] == 3 and reply.body[2]["error"]["code"] == -32600


def test_an_empty_batch_is_400() -> None:
    reply = answer_batch([], incoming(mcp_session_id="s1"), Session("s1", "2025-03-26"), echo_method)
    assert reply.status == 400
    assert "empty" in reply.body["error"]["message"]


def test_a_later_revision_is_refused_before_the_missing_session_is() -> None:
    reply = answer_batch([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], incoming(mcp_protocol_version="2025-06-18"),
                         None, echo_method)
    assert reply.status == 400
    assert "not allowed in protocol version 2025-06-18" in reply.body["error"]["message"]


def test_without_a_session_id_the_batch_is_400_and_with_an_unknown_one_404() -> None:
    item = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}]
    assert answer_batch(item, incoming(mcp_protocol_version="2025-03-26"), None, echo_method).status == 400
    unknown = answer_batch(item, incoming(mcp_protocol_version="2025-03-26", mcp_session_id="gone"), None, echo_method)
    assert unknown.status == 404


def test_a_version_header_that_contradicts_the_session_is_400() -> None:
    reply = answer_batch([{"jsonrpc": "2.0", "id": 1, "method": "ping"}],
                         incoming(mcp_session_id="s1", mcp_protocol_version="2025-11-25"),
                         Session("s1", "2025-03-26"), echo_method)
    assert reply.status == 400
    assert reply.body["error"]["code"] == -32600
