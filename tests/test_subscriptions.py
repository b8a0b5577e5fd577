"""``subscriptions/listen`` (2026-07-28): a long-lived event stream that carries
the change notifications it asked for, raised by any worker through the bus."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask

from flask_mcp import MCP
from flask_mcp.testing import MCPTestClient

SUB_KEY = "io.modelcontextprotocol/subscriptionId"


@pytest.fixture
def app(app: Flask) -> Flask:
    app.config["MCP_BACKEND"] = "memory://"
    app.config["MCP_SSE_HEARTBEAT"] = 0.05
    mcp = MCP(app, name="subs", version="1")

    @mcp.tool
    def hello() -> str:
        """Says hello."""
        return "hello"

    def extra() -> str:
        """A tool added later."""
        return "extra"

    @mcp.tool
    def change_tools() -> str:
        """Adds a tool."""
        mcp.add_tool(extra)
        return "changed"

    @mcp.tool
    def touch(uri: str) -> str:
        """Announces that a resource changed."""
        mcp.notify_resource_updated(uri)
        return "touched"

    return app


def _open(client: MCPTestClient, notifications: dict[str, Any], request_id: Any = "listen-1") -> Any:
    params = {"notifications": notifications, "_meta": client.request_meta()}
    return client.client.post(
        "/mcp",
        data=json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "subscriptions/listen", "params": params}),
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **client.standard_headers("subscriptions/listen", params),
        },
        buffered=False,
    )


def _messages(http: Any) -> Iterator[dict[str, Any]]:
    for chunk in http.iter_encoded():
        for block in chunk.decode().split("\n\n"):
            data = [line[5:].strip() for line in block.split("\n") if line.startswith("data:")]
            if data:
                yield json.loads("".join(data))
            else:
                yield {}  # a heartbeat: lets the reader look at the clock


def _next_notification(stream: Iterator[dict[str, Any]], timeout: float = 3.0) -> dict[str, Any] | None:
    deadline = time.monotonic() + timeout
    for message in stream:
        if message:
            return message
        if time.monotonic() > deadline:
            return None
    return None


def test_discover_advertises_list_changes_when_a_bus_carries_them(app: Flask) -> None:
    caps = MCPTestClient(app).discover().result["capabilities"]
    assert caps["tools"] == {"listChanged": True}


def test_the_stream_is_acknowledged_first_with_what_it_will_get(app: Flask) -> None:
    http = _open(MCPTestClient(app), {"toolsListChanged": True, "promptsListChanged": True}, request_id=7)
    try:
        assert http.mimetype == "text/event-stream"
        assert http.headers["X-Accel-Buffering"] == "no"
        ack = _next_notification(_messages(http))
        assert ack == {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"_meta": {SUB_KEY: 7}, "notifications": {"toolsListChanged": True}},
        }
    finally:
        http.close()


def test_a_tool_list_change_reaches_an_open_stream_with_its_subscription_id(app: Flask) -> None:
    client = MCPTestClient(app)
    http = _open(client, {"toolsListChanged": True})
    try:
        stream = _messages(http)
        assert _next_notification(stream)["method"] == "notifications/subscriptions/acknowledged"  # type: ignore[index]
        assert client.call_tool("change_tools", {}).result["content"][0]["text"] == "changed"
        note = _next_notification(stream)
        assert note == {
            "jsonrpc": "2.0",
            "method": "notifications/tools/list_changed",
            "params": {"_meta": {SUB_KEY: "listen-1"}},
        }
    finally:
        http.close()


def test_a_stream_gets_only_what_it_asked_for(app: Flask) -> None:
    client = MCPTestClient(app)
    http = _open(client, {"promptsListChanged": True})
    try:
        stream = _messages(http)
        ack = _next_notification(stream)
        assert ack["params"]["notifications"] == {}  # type: ignore[index]
        client.call_tool("change_tools", {})
        assert _next_notification(stream, timeout=0.5) is None
    finally:
        http.close()


def test_listen_needs_an_event_stream(app: Flask) -> None:
    client = MCPTestClient(app)
    params = {"notifications": {"toolsListChanged": True}, "_meta": client.request_meta()}
    response = client.post(
        {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": params},
        headers={**client.standard_headers("subscriptions/listen", params), "Accept": "application/json"},
    )
    assert response.status_code == 406


def test_listen_is_not_found_on_a_backend_without_a_bus(tmp_path: Any) -> None:
    from cachelib import SimpleCache

    app = Flask(__name__)
    app.config["MCP_BACKEND"] = SimpleCache()
    MCP(app)
    client = MCPTestClient(app)
    assert client.discover().result["capabilities"]["tools"] == {}
    response = client.request("subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    assert response.status_code == 404
    assert response.error["code"] == -32601


def test_listen_while_the_bus_is_down_is_a_503_to_retry(caplog: pytest.LogCaptureFixture) -> None:
    from conftest import free_port

    app = Flask(__name__)
    app.config["MCP_BACKEND"] = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    MCP(app)
    client = MCPTestClient(app)
    response = _open(client, {"toolsListChanged": True}, "listen-down")
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "1"
    assert response.json["id"] == "listen-down" and response.json["error"]["code"] == -32603
    assert "Traceback" not in caplog.text


def test_listen_is_not_a_legacy_method(app: Flask) -> None:
    client = MCPTestClient(app, protocol_version="2025-11-25")
    client.initialize()
    response = client.request("subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    assert response.status_code == 200
    assert response.error["code"] == -32601


def test_an_open_stream_whose_bus_breaks_ends_with_an_error_to_listen_again(redis_port: int) -> None:
    """A Redis pub/sub connection killed under an open stream (every stream of the
    worker shares it): the stream ends with a JSON-RPC error for its request, a
    warning in the log, no traceback."""
    import redis

    app = Flask(__name__)
    app.config["MCP_BACKEND"] = f"redis://127.0.0.1:{redis_port}/0"
    app.config["MCP_SSE_HEARTBEAT"] = 0.05
    MCP(app)
    client = MCPTestClient(app)
    response = _open(client, {"toolsListChanged": True}, "listen-broken")
    assert response.status_code == 200
    stream = _messages(response)
    ack = _next_notification(stream)
    assert ack is not None and ack["params"]["_meta"] == {SUB_KEY: "listen-broken"}
    admin = redis.Redis(port=redis_port)
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append  # type: ignore[assignment,method-assign]
    log = logging.getLogger("flask_mcp")
    log.addHandler(handler)
    try:
        assert admin.client_kill_filter(_type="pubsub") >= 1
        error = _next_notification(stream, timeout=10.0)
        response.close()
    finally:
        log.removeHandler(handler)
    assert error is not None and error["id"] == "listen-broken", error
    assert error["error"]["code"] == -32603 and "listen again" in error["error"]["message"]
    assert [r.getMessage() for r in records if r.exc_info] == []  # no traceback
    assert any(r.levelno == logging.WARNING and "Listen stream listen-broken ended" in r.getMessage() for r in records)
