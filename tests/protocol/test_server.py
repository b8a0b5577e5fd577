"""``flask_mcp.protocol.Server`` driven directly, without a Flask app: the
:class:`Reply` it hands the HTTP layer for each POST, GET and DELETE.

The HTTP tests (test_lifecycle.py, test_stateless.py, test_blueprint.py) see
what Flask makes of a reply; these see the reply itself -- the era chosen per
request, the session it leaves in the store, and the replies the HTTP layer
must finish (``deferred``, ``listen``, ``resume``) -- so a change in the core
shows up here before it is hidden behind the view."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import validate_message

from flask_mcp.backends import MemoryMessageBus, MemorySessionStore
from flask_mcp.backends.memory import MemoryEventLog
from flask_mcp.features.tools import Tool, ToolRegistry
from flask_mcp.protocol import Reply, Server, ServerInfo
from flask_mcp.protocol.bus import reply_channel
from flask_mcp.protocol.events import StreamRecorder
from flask_mcp.protocol.meta import CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY, SERVER_INFO_KEY

STATELESS = "2026-07-28"
LEGACY = ("2025-11-25", "2025-06-18", "2025-03-26")


def echo(text: str) -> str:
    """Say it back."""
    return text


class Core:
    """A server with one tool over in-memory storage, and the requests a client sends it."""

    def __init__(self, *, bus: bool = False, events: bool = False) -> None:
        tools = ToolRegistry()
        tools.add(Tool.from_function(echo))
        self.sessions = MemorySessionStore()
        self.bus = MemoryMessageBus() if bus else None
        self.events = MemoryEventLog() if events else None
        self.server = Server(
            info=ServerInfo("core", "1.0"), tools=tools, sessions=self.sessions, bus=self.bus, events=self.events
        )

    def post(self, message: Any, headers: dict[str, str] | None = None, principal: str | None = None) -> Reply:
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        return self.server.handle_post(headers or {}, body, principal=principal)

    def stateless(self, method: str, params: dict[str, Any] | None = None, *, id: int | str = 1,
                  meta_version: str = STATELESS, header_version: str | None = STATELESS,
                  extra_headers: dict[str, str] | None = None) -> Reply:
        meta = {PROTOCOL_VERSION_KEY: meta_version, CLIENT_CAPABILITIES_KEY: {}}
        headers = {"mcp-method": method, **(extra_headers or {})}
        if header_version is not None:
            headers["mcp-protocol-version"] = header_version
        return self.post(request(method, {**(params or {}), "_meta": meta}, id=id), headers)

    def initialize(self, version: str, principal: str | None = None, **params: Any) -> str:
        """A new legacy session of ``version``: its id."""
        reply = self.post(initialize_message(version, **params), principal=principal)
        assert reply.status == 200, reply
        return reply.headers["Mcp-Session-Id"]

    def in_session(self, session_id: str, message: Any, version: str | None = None) -> Reply:
        headers = {"mcp-session-id": session_id}
        if version is not None:
            headers["mcp-protocol-version"] = version
        return self.post(message, headers)


def request(method: str, params: dict[str, Any] | None = None, *, id: int | str = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params or {}}


def initialize_message(version: str, **params: Any) -> dict[str, Any]:
    return request("initialize", {"protocolVersion": version, "capabilities": {},
                                  "clientInfo": {"name": "client", "version": "0"}, **params})


def assert_error(reply: Reply, status: int, code: int, *words: str, id: Any = None) -> None:
    """``reply`` is a JSON-RPC error with this HTTP status and code, whose
    message says ``words`` (so it tells the client what to do)."""
    assert reply.status == status, reply
    assert reply.body["error"]["code"] == code, reply.body
    assert reply.body.get("id") == id
    for word in words:
        assert word in reply.body["error"]["message"], reply.body


# ---------------------------------------------------------------------- era per request


def test_a_2026_request_is_served_without_a_session_and_names_the_server() -> None:
    core = Core()
    reply = core.stateless("tools/list")
    assert reply.status == 200
    validate_message(STATELESS, "tools/list", reply.body)
    result = reply.body["result"]
    assert [tool["name"] for tool in result["tools"]] == ["echo"]
    assert result["resultType"] == "complete"
    assert result["_meta"][SERVER_INFO_KEY] == {"name": "core", "version": "1.0"}
    assert "Mcp-Session-Id" not in reply.headers
    assert len(core.sessions) == 0


@pytest.mark.parametrize("version", LEGACY)
def test_initialize_opens_a_session_holding_what_the_client_declared(version: str) -> None:
    core = Core()
    reply = core.post(initialize_message(version, capabilities={"roots": {}}), principal="alice")
    validate_message(version, "initialize", reply.body)
    assert reply.body["result"]["protocolVersion"] == version
    assert "resultType" not in reply.body["result"]
    session = core.sessions.get(reply.headers["Mcp-Session-Id"])
    assert session is not None
    assert (session.protocol_version, session.principal) == (version, "alice")
    assert session.client_info == {"name": "client", "version": "0"}
    assert session.client_capabilities == {"roots": {}}
    assert session.initialized is False


def test_a_failed_initialize_leaves_no_session_behind() -> None:
    core = Core()
    reply = core.post(request("initialize", {"capabilities": {}}))
    assert_error(reply, 400, -32602, "params.protocolVersion", id=1)
    assert "Mcp-Session-Id" not in reply.headers
    assert len(core.sessions) == 0


def test_the_initialized_notification_marks_the_stored_session_initialized() -> None:
    core = Core()
    session_id = core.initialize("2025-11-25")
    reply = core.in_session(session_id, notification("notifications/initialized"), "2025-11-25")
    assert (reply.status, reply.body) == (202, None)
    stored = core.sessions.get(session_id)
    assert stored is not None and stored.initialized is True


def test_the_2026_header_without_meta_is_answered_as_2026_not_as_a_legacy_request() -> None:
    reply = Core().post(request("tools/list"), {"mcp-protocol-version": STATELESS, "mcp-method": "tools/list"})
    assert_error(reply, 400, -32602, "_meta", id=1)
    validate_message(STATELESS, None, reply.body)


def test_a_2026_meta_without_the_header_is_answered_as_2026_and_asks_for_the_header() -> None:
    reply = Core().stateless("tools/list", header_version=None)
    assert_error(reply, 400, -32020, "Missing MCP-Protocol-Version header", id=1)
    validate_message(STATELESS, None, reply.body)


@pytest.mark.parametrize(("header", "meta"), [("2025-11-25", STATELESS), (STATELESS, "2025-11-25")])
def test_a_header_and_meta_naming_different_versions_are_a_header_mismatch(header: str, meta: str) -> None:
    reply = Core().stateless("tools/list", header_version=header, meta_version=meta)
    assert_error(reply, 400, -32020, repr(header), repr(meta), id=1)
    validate_message(STATELESS, None, reply.body)


def test_a_blank_session_id_counts_as_none() -> None:
    reply = Core().post(request("tools/list"), {"mcp-session-id": "   "})
    assert_error(reply, 400, -32600, "Missing Mcp-Session-Id", id=1)


# ---------------------------------------------------------------------- bodies that are not requests


@pytest.mark.parametrize("version", [STATELESS, *LEGACY])
def test_a_body_that_is_not_json_is_400_parse_error_without_an_id(version: str) -> None:
    reply = Core().post(b'{"jsonrpc": "2.0", "id": 1,', {"mcp-protocol-version": version})
    assert_error(reply, 400, -32700, "not valid JSON")
    assert "id" not in reply.body
    validate_message(version, None, reply.body)


def test_a_too_deep_body_is_refused_and_its_readable_id_echoed() -> None:
    deep: Any = []
    for _ in range(80):
        deep = [deep]
    reply = Core().post(request("tools/call", {"arguments": {"x": deep}}, id=5))
    assert_error(reply, 400, -32700, "64 levels", id=5)


@pytest.mark.parametrize(
    ("message", "echoed", "says"),
    [
        ({"jsonrpc": "2.0", "id": 7}, 7, 'a request needs "method" and "id"'),
        ({"jsonrpc": "1.0", "id": "a", "method": "ping"}, "a", '"jsonrpc": "2.0"'),
        ("ping", None, "must be a JSON object"),
    ],
)
def test_json_that_is_not_a_message_is_400_invalid_request_echoing_a_readable_id(
    message: Any, echoed: Any, says: str
) -> None:
    reply = Core().post(message)
    assert_error(reply, 400, -32600, says, id=echoed)
    validate_message("2025-11-25", None, reply.body)


def test_an_unknown_method_is_404_in_2026_and_200_on_a_session_naming_the_version() -> None:
    core = Core()
    reply = core.stateless("no/such", id="u")
    assert_error(reply, 404, -32601, "'no/such'", STATELESS, id="u")
    validate_message(STATELESS, None, reply.body)
    for version in LEGACY:
        reply = core.in_session(core.initialize(version), request("no/such", id="u"), version)
        assert_error(reply, 200, -32601, "'no/such'", version, id="u")
        validate_message(version, None, reply.body)


def test_a_failing_handler_is_500_internal_error_without_its_details(caplog: pytest.LogCaptureFixture) -> None:
    class BrokenTools(ToolRegistry):
        def definitions(self) -> Any:
            raise RuntimeError("secret detail")

    core = Core()
    core.server = Server(info=ServerInfo("core", "1.0"), tools=BrokenTools(), sessions=core.sessions)
    reply = core.stateless("tools/list", id=9)
    assert_error(reply, 500, -32603, "see the server log", id=9)
    assert "secret" not in json.dumps(reply.body)
    validate_message(STATELESS, None, reply.body)
    assert any(record.exc_info and "tools/list" in record.getMessage() for record in caplog.records)


# ---------------------------------------------------------------------- notifications and client responses


def test_a_2026_notification_is_202_with_no_body_and_needs_no_meta() -> None:
    reply = Core().post(notification("notifications/cancelled", {"requestId": 1}),
                        {"mcp-protocol-version": STATELESS})
    assert (reply.status, reply.body) == (202, None)


def test_a_2026_client_response_is_400_invalid_request() -> None:
    reply = Core().post({"jsonrpc": "2.0", "id": 3, "result": {}}, {"mcp-protocol-version": STATELESS})
    assert_error(reply, 400, -32600, "must not send JSON-RPC responses", id=3)


def test_a_legacy_notification_needs_a_session() -> None:
    reply = Core().post(notification("notifications/initialized"), {"mcp-protocol-version": "2025-11-25"})
    assert_error(reply, 400, -32600, "Mcp-Session-Id")


def test_a_client_response_in_a_session_is_202_and_reaches_the_waiting_tool_over_the_bus() -> None:
    core = Core(bus=True)
    assert core.bus is not None
    session_id = core.initialize("2025-11-25")
    subscription = core.bus.subscribe([reply_channel(session_id, "ask-1")])
    try:
        reply = core.in_session(session_id, {"jsonrpc": "2.0", "id": "ask-1", "result": {"roots": []}})
        assert (reply.status, reply.body) == (202, None)
        delivered = subscription.get(timeout=2)
    finally:
        subscription.close()
    assert delivered is not None
    assert delivered[1] == {"result": {"roots": []}, "error": None}


# ---------------------------------------------------------------------- batches (2025-03-26)


def test_a_2025_03_26_batch_answers_its_requests_in_order_and_only_them() -> None:
    core = Core()
    session_id = core.initialize("2025-03-26")
    batch = [request("ping", id="a"), notification("notifications/initialized"), {"jsonrpc": "2.0", "id": 1},
             request("tools/call", {"name": "echo", "arguments": {"text": "hi"}}, id="b")]
    reply = core.in_session(session_id, batch)
    assert reply.status == 200
    assert [answer.get("id") for answer in reply.body] == ["a", 1, "b"]
    assert reply.body[1]["error"]["code"] == -32600
    assert reply.body[2]["result"]["content"] == [{"type": "text", "text": "hi"}]
    for answer, method in zip(reply.body, ["ping", None, "tools/call"], strict=True):
        validate_message("2025-03-26", method, answer)
    stored = core.sessions.get(session_id)
    assert stored is not None and stored.initialized is True


def test_a_batch_of_notifications_only_is_202() -> None:
    core = Core()
    reply = core.in_session(core.initialize("2025-03-26"), [notification("notifications/initialized")])
    assert (reply.status, reply.body) == (202, None)


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_a_batch_on_a_later_session_is_one_400_error_naming_the_version(version: str) -> None:
    core = Core()
    reply = core.in_session(core.initialize(version), [request("ping")])
    assert_error(reply, 400, -32600, f"protocol version {version}", "one message per POST")
    validate_message(version, None, reply.body)


# ---------------------------------------------------------------------- GET


def test_a_get_without_a_session_is_left_to_the_http_layer() -> None:
    """``None``: the HTTP layer answers 405, as no stream is offered on GET."""
    assert Core().server.check_get({}) is None


def test_a_get_on_a_live_session_without_last_event_id_is_left_to_the_http_layer() -> None:
    core = Core()
    assert core.server.check_get({"mcp-session-id": core.initialize("2025-11-25")}) is None


def test_a_get_naming_an_unknown_session_is_404() -> None:
    reply = Core().server.check_get({"mcp-session-id": "gone", "last-event-id": "x"})
    assert reply is not None
    assert_error(reply, 404, -32600, "initialize")


def test_a_get_with_the_last_event_id_of_a_kept_stream_resumes_it_after_that_event() -> None:
    core = Core(bus=True, events=True)
    assert core.events is not None
    session_id = core.initialize("2025-11-25")
    recorder = StreamRecorder(core.events, session_id)
    last_seen = recorder.record(notification("notifications/message", {"level": "info", "data": "x"}))
    reply = core.server.check_get({"mcp-session-id": session_id, "last-event-id": f" {last_seen} "})
    assert reply is not None
    assert reply.status == 200
    assert reply.resume is not None
    assert (reply.resume.stream, reply.resume.stream_id, reply.resume.after) == (recorder.key, recorder.stream_id, 1)


def test_a_stream_is_resumed_only_by_the_session_that_opened_it() -> None:
    core = Core(bus=True, events=True)
    assert core.events is not None
    owner, other = core.initialize("2025-11-25"), core.initialize("2025-11-25")
    last_seen = StreamRecorder(core.events, owner).record(None, final=True)
    reply = core.server.check_get({"mcp-session-id": other, "last-event-id": last_seen})
    assert reply is not None
    assert_error(reply, 400, -32600, "names no stream", "send the request again")


@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26"])
def test_a_get_with_last_event_id_is_400_where_streams_are_not_resumable(version: str) -> None:
    core = Core(bus=True, events=True)
    reply = core.server.check_get({"mcp-session-id": core.initialize(version), "last-event-id": "abcdefgh/1"})
    assert reply is not None
    assert_error(reply, 400, -32600, "no resumable streams")


# ---------------------------------------------------------------------- DELETE


def test_delete_ends_the_session_in_the_store() -> None:
    core = Core()
    session_id = core.initialize("2025-11-25")
    reply = core.server.handle_delete({"mcp-session-id": session_id})
    assert (reply.status, reply.body) == (200, None)
    assert core.sessions.get(session_id) is None


def test_delete_without_a_session_id_is_400_and_of_an_unknown_one_404() -> None:
    core = Core()
    assert_error(core.server.handle_delete({}), 400, -32600, "Mcp-Session-Id")
    assert_error(core.server.handle_delete({"mcp-session-id": "nope"}), 404, -32600, "initialize")


# ---------------------------------------------------------------------- replies the HTTP layer finishes


def test_a_call_asking_for_progress_is_deferred_to_the_http_layer_and_runs_when_asked() -> None:
    core = Core()
    reply = core.stateless("tools/call", {"name": "echo", "arguments": {"text": "later"}},
                           extra_headers={"mcp-name": "echo"})
    assert reply.status == 200 and reply.deferred is None  # no progress token: answered at once
    meta = {PROTOCOL_VERSION_KEY: STATELESS, CLIENT_CAPABILITIES_KEY: {}, "progressToken": "p1"}
    message = request("tools/call", {"name": "echo", "arguments": {"text": "later"}, "_meta": meta})
    headers = {"mcp-protocol-version": STATELESS, "mcp-method": "tools/call", "mcp-name": "echo"}
    reply = core.post(message, headers)
    assert (reply.status, reply.body, reply.resumable_session) == (200, None, None)
    assert reply.deferred is not None
    answered = reply.deferred(None, lambda: False, None)  # None: nothing can reach the client before the result
    assert answered is not None
    validate_message(STATELESS, "tools/call", answered.body)
    assert answered.body["result"]["content"] == [{"type": "text", "text": "later"}]


def test_a_deferred_call_is_resumable_only_on_a_session_whose_revision_resumes_streams() -> None:
    core = Core(bus=True, events=True)
    call = request("tools/call", {"name": "echo", "arguments": {"text": "x"}, "_meta": {"progressToken": 1}})
    resumable = core.initialize("2025-11-25")
    assert core.in_session(resumable, call).resumable_session == resumable
    reply = core.in_session(core.initialize("2025-06-18"), call)
    assert reply.deferred is not None
    assert reply.resumable_session is None


def test_listen_is_handed_to_the_http_layer_only_when_a_bus_can_carry_notifications() -> None:
    wanted = {"notifications": {"toolsListChanged": True}}
    reply = Core().stateless("subscriptions/listen", wanted, id="l")
    assert_error(reply, 404, -32601, "no change notifications", id="l")
    reply = Core(bus=True).stateless("subscriptions/listen", wanted, id="l")
    assert (reply.status, reply.body) == (200, None)
    assert reply.listen is not None
    assert reply.listen.subscription_id == "l"
    assert reply.listen.kinds == {"tools"}
