"""``initialize`` on Redis: its session's write is read back when the
response leaves Flask (flask_mcp/http/held_response.py), and the session id still
goes out only once the write held. Against a private redis-server."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
import redis
from flask import Flask, Response
from werkzeug.test import EnvironBuilder

from flask_mcp import MCP
from flask_mcp.http.held_response import HeldResponse
from flask_mcp.testing import MCPTestClient

MakeClient = Callable[..., MCPTestClient]
INITIALIZE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


def _admin(redis_port: int) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=redis_port, db=5, socket_timeout=2, decode_responses=True)


def _app(backend: str) -> tuple[Flask, MCP]:
    app = Flask("held")
    app.config.update(TESTING=True, MCP_BACKEND=backend)
    return app, MCP(app)


def test_after_request_hooks_run_before_the_write_is_read_back(redis_port: int, make_client: MakeClient) -> None:
    app, _ = _app(f"redis://127.0.0.1:{redis_port}/5")
    seen: list[tuple[str, bool, int]] = []

    @app.after_request
    def look(response: Response) -> Response:
        held = isinstance(response, HeldResponse) and response.confirm is not None
        seen.append((response.headers.get("Mcp-Session-Id", ""), held, response.status_code))
        return response

    client = make_client(app, "2025-11-25")
    client.initialize()
    assert client.session_id is not None
    assert seen == [(client.session_id, True, 200), ("", False, 202)]  # initialize, then notifications/initialized
    assert _admin(redis_port).exists(f"flask-mcp:session:{client.session_id}") == 1
    assert client.call_tool("no-such-tool").status_code == 200  # the session serves
    seen.clear()
    client.list_tools()
    assert seen[0][1] is False  # only initialize's answer is held
    app.extensions["mcp"].backend.close()


@pytest.mark.parametrize("accept", ["application/json, text/event-stream", "text/event-stream"])
def test_a_write_that_failed_turns_the_held_answer_into_a_503(
    redis_port: int, make_client: MakeClient, accept: str
) -> None:
    """The hooks saw a 200 carrying a session id; the client gets the 503, with
    no id and with the headers the hooks added."""
    app, _ = _app(f"redis://127.0.0.1:{redis_port}/5")

    @app.after_request
    def cors(response: Response) -> Response:
        response.headers["Access-Control-Allow-Origin"] = "https://host.example"
        response.headers["X-Seen-Status"] = str(response.status_code)
        return response

    _admin(redis_port).shutdown(nosave=True)
    response = make_client(app, "2025-11-25").request("initialize", INITIALIZE, headers={"Accept": accept})
    assert response.status_code == 503
    assert "Mcp-Session-Id" not in response.headers
    assert response.headers["Retry-After"] == "1"
    assert response.headers["Access-Control-Allow-Origin"] == "https://host.example"
    assert response.headers["X-Seen-Status"] == "200"
    assert response.error["code"] == -32603
    assert "temporarily unavailable" in response.error["message"]
    assert response.message["id"] is not None  # the request's id, echoed
    if accept == "text/event-stream":
        assert response.headers["Content-Type"].startswith("text/event-stream")
    else:
        assert response.headers["Content-Type"] == "application/json"
    app.extensions["mcp"].backend.close()


def test_a_write_redis_refuses_is_a_500_without_a_session_id(
    redis_port: int, make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    app, _ = _app(f"redis://127.0.0.1:{redis_port}/5")
    client = make_client(app, "2025-11-25")
    client.initialize()  # the store's connection is made and kept
    admin = _admin(redis_port)
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", "1")  # every write is refused: OOM
    with caplog.at_level(logging.ERROR, logger="flask_mcp"):
        response = make_client(app, "2025-11-25").request("initialize", INITIALIZE)
    assert response.status_code == 500
    assert response.headers["Content-Type"] == "application/json"
    assert "Mcp-Session-Id" not in response.headers
    assert response.error["code"] == -32603
    assert any("Storing a new MCP session failed" in r.getMessage() for r in caplog.records)
    admin.config_set("maxmemory", "0")
    fresh = make_client(app, "2025-11-25")
    fresh.initialize()  # the refused reply was read whole: the connection still serves
    assert fresh.session_id is not None and admin.exists(f"flask-mcp:session:{fresh.session_id}") == 1
    app.extensions["mcp"].backend.close()


def test_an_answer_replaced_by_a_hook_still_has_its_write_read_back(redis_port: int, make_client: MakeClient) -> None:
    """A hook that returns a new response drops the held one: its finalizer
    reads the write's reply, so the store's one connection serves every
    initialize instead of one more being opened each time."""
    app, _ = _app(f"redis://127.0.0.1:{redis_port}/5")

    @app.after_request
    def replace(response: Response) -> Response:
        fresh = Response(response.get_data(), response.status_code, content_type=response.content_type)
        if "Mcp-Session-Id" in response.headers:
            fresh.headers["Mcp-Session-Id"] = response.headers["Mcp-Session-Id"]
        return fresh

    admin = _admin(redis_port)
    kept = app.extensions["mcp"].server.sessions._writes._idle  # the store's idle write connections
    make_client(app, "2025-11-25").initialize()
    assert len(kept) == 1
    connection = kept[0]
    ids = []
    for _ in range(5):
        client = make_client(app, "2025-11-25")
        client.initialize()
        assert client.session_id is not None
        ids.append(client.session_id)
        assert list(kept) == [connection]  # read back and given back: the same one serves the next
    assert all(admin.exists(f"flask-mcp:session:{session_id}") == 1 for session_id in ids)
    app.extensions["mcp"].backend.close()


def test_a_store_that_writes_at_once_answers_plainly(tmp_path: object, make_client: MakeClient) -> None:
    app, _ = _app(f"sqlite:///{tmp_path}/sessions.sqlite3")
    seen: list[bool] = []

    @app.after_request
    def look(response: Response) -> Response:
        seen.append(isinstance(response, HeldResponse))
        return response

    make_client(app, "2025-11-25").initialize()
    assert seen == [False, False]  # initialize, notifications/initialized
    app.extensions["mcp"].backend.close()


class AppResponse(Response):
    """An app's own response class: Flask retypes every view's response to it."""


@pytest.mark.parametrize("redis_up", [True, False])
def test_an_app_with_its_own_response_class_has_the_write_confirmed_in_the_view(
    redis_port: int, make_client: MakeClient, redis_up: bool
) -> None:
    app, _ = _app(f"redis://127.0.0.1:{redis_port}/5")
    app.response_class = AppResponse
    seen: list[type] = []

    @app.after_request
    def look(response: Response) -> Response:
        seen.append(type(response))
        return response

    if not redis_up:
        _admin(redis_port).shutdown(nosave=True)
    response = make_client(app, "2025-11-25").request("initialize", INITIALIZE)
    assert seen == [AppResponse]
    if redis_up:
        session_id = response.headers["Mcp-Session-Id"]
        assert _admin(redis_port).exists(f"flask-mcp:session:{session_id}") == 1
    else:
        assert response.status_code == 503
        assert "Mcp-Session-Id" not in response.headers
    app.extensions["mcp"].backend.close()


def _initialize_environ() -> dict[str, Any]:
    return EnvironBuilder(
        path="/mcp", method="POST", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE},
        headers=[("Accept", "application/json, text/event-stream")],
    ).get_environ()


class StartResponse:
    """A WSGI server's ``start_response``: records each call (and, if given, the order in ``events``)."""

    def __init__(self, events: list[str] | None = None) -> None:
        self.calls: list[tuple[str, list[tuple[str, str]]]] = []
        self.events = events

    def __call__(self, status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], object]:
        self.calls.append((status, headers))
        if self.events is not None:
            self.events.append("start_response")
        return lambda data: None


def test_the_reply_is_read_when_the_server_takes_the_first_bytes_after_the_request_context_is_gone(
    redis_port: int,
) -> None:
    """PEP 3333 lets the body's first iteration start the response: Flask's
    teardown runs and the server takes the body while the write travels."""
    app, _ = _app(f"redis://127.0.0.1:{redis_port}/5")
    kept = app.extensions["mcp"].server.sessions._writes._idle  # the store's idle write connections
    events: list[str] = []
    start_response = StartResponse(events)

    @app.teardown_request
    def teardown(error: BaseException | None) -> None:
        events.append("teardown")

    body = app(_initialize_environ(), start_response)
    assert events == ["teardown"]  # the response has not started...
    assert len(kept) == 0  # ...and the write's connection is still out, its reply unread
    chunk = next(iter(body))
    assert events == ["teardown", "start_response"]
    assert len(kept) == 1  # read back, then the response started
    status, headers = start_response.calls[0]
    assert status == "200 OK"
    assert json.loads(chunk)["result"]["protocolVersion"] == "2025-11-25"
    assert _admin(redis_port).exists(f"flask-mcp:session:{dict(headers)['Mcp-Session-Id']}") == 1
    body.close()  # type: ignore[attr-defined]
    app.extensions["mcp"].backend.close()


def test_a_body_closed_before_its_first_item_still_has_its_write_read_back(redis_port: int) -> None:
    """A server that closes the body unread (the client left) sends nothing;
    the reply is read all the same, so the connection serves the next one."""
    app, _ = _app(f"redis://127.0.0.1:{redis_port}/5")
    kept = app.extensions["mcp"].server.sessions._writes._idle
    start_response = StartResponse()
    for _ in range(3):
        body = app(_initialize_environ(), start_response)
        body.close()  # type: ignore[attr-defined]
        assert len(kept) == 1  # the same connection, back each time
    assert start_response.calls == []
    app.extensions["mcp"].backend.close()


def test_a_write_that_failed_starts_the_response_once_with_the_503(redis_port: int) -> None:
    """What the WSGI server is handed: one ``start_response`` call, the 503's,
    and no trace of the held answer's headers."""
    app, _ = _app(f"redis://127.0.0.1:{redis_port}/5")
    _admin(redis_port).shutdown(nosave=True)
    start_response = StartResponse()
    body = app(_initialize_environ(), start_response)
    data = b"".join(body)
    body.close()  # type: ignore[attr-defined]
    assert len(start_response.calls) == 1
    status, headers = start_response.calls[0]
    assert status.startswith("503")
    names = [name.lower() for name, _ in headers]
    assert "mcp-session-id" not in names
    assert names.count("content-length") == 1
    assert dict(headers)["Content-Length"] == str(len(data))
    assert json.loads(data)["error"]["code"] == -32603
    app.extensions["mcp"].backend.close()
