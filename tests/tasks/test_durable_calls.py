"""Durable calls on the 2025 revisions (``@mcp.tool(durable=True)``, task tools):
a legacy session's call runs on a real Celery worker (in this process, on
kombu's in-memory broker) while the web side only follows the call's stream in
the event log. The stream is primed at once, carries ids, resumes on ``GET``,
brings questions to the client and its answers back, and is cancelled by
``notifications/cancelled``; a worker shutting down lets it go with ``retry``.
Across real processes (gunicorn, celery workers): tests/e2e/test_e2e_durable.py."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import connect
from flask import Flask

from flask_mcp import MCP, Context
from flask_mcp.http import draining
from flask_mcp.testing import MCPTestClient, parse_sse, sse_event_id

celery = pytest.importorskip("celery")
from celery_in_process import app_without_a_queue, celery_worker, memory_celery_app  # noqa: E402

LEGACY = "2025-11-25"
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def build_app() -> Flask:
    app = memory_celery_app(__name__)
    mcp = MCP(app, name="durable", version="1.0")
    app.extensions["test-release"] = release = threading.Event()

    @mcp.tool(durable=True)
    def counted(n: int, ctx: Context) -> dict[str, Any]:
        """Reports ``n`` steps of progress; says where it ran."""
        for i in range(1, n + 1):
            ctx.report_progress(i, n)
            time.sleep(0.01)
        return {"thread": threading.current_thread().name, "steps": n}

    @mcp.tool(durable=True)
    def greeted(ctx: Context) -> str:
        """Asks for a name, then greets it."""
        answer = ctx.elicit("What is your name?", NAME_SCHEMA)
        return f"Hello, {answer.content.get('name') if answer.content else None}!"

    @mcp.tool(durable=True)
    def waiting(ctx: Context) -> str:
        """Reports once, then waits until released or cancelled."""
        ctx.report_progress(1, 2)
        while not release.wait(0.02):
            ctx.check_cancelled()
        return "released"

    @mcp.tool(task="optional", durable=False)
    def local(ctx: Context) -> str:
        """A task tool that opts out: legacy calls run in the web worker."""
        ctx.report_progress(1, 1)
        return threading.current_thread().name

    @mcp.tool(task="optional")
    def tasked(ctx: Context) -> str:
        """A task tool: durable by default."""
        ctx.report_progress(1, 1)
        return threading.current_thread().name

    return app


@pytest.fixture(scope="module")
def durable_app() -> Iterator[Flask]:
    app = build_app()
    with celery_worker(app):
        yield app


@pytest.fixture
def client(make_client: Callable[..., MCPTestClient], durable_app: Flask) -> MCPTestClient:
    durable_app.extensions["test-release"].clear()
    return connect(make_client, durable_app, LEGACY, capabilities={"elicitation": {}})


def call_body(name: str, arguments: dict[str, Any], request_id: int = 7) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": {"progressToken": "p"}}}


def events(client: MCPTestClient, response: Any, until: Callable[[list[tuple[str | None, Any]]], bool]) -> list[Any]:
    """``(id, message)`` of the stream's events (``None`` for the priming one) until ``until`` says stop."""
    seen: list[tuple[str | None, Any]] = []
    buffer = b""
    for chunk in response.iter_encoded():
        buffer += chunk
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            data = list(parse_sse(block + b"\n\n"))
            if block.startswith(b":"):
                continue
            seen.append((sse_event_id(block), json.loads(data[0]) if data and data[0] else None))
            if until(seen):
                return seen
    return seen


def post(client: MCPTestClient, body: dict[str, Any]) -> Any:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               **client.extra_headers, **client.standard_headers("tools/call", body["params"])}
    return client.client.post(client.url, data=json.dumps(body), headers=headers, buffered=False)


def get(client: MCPTestClient, last_event_id: str) -> Any:
    headers = {"Accept": "text/event-stream", "Last-Event-ID": last_event_id, "Mcp-Session-Id": client.session_id or "",
               "MCP-Protocol-Version": LEGACY}
    return client.client.get(client.url, headers=headers, buffered=False)


def progress(seen: list[Any]) -> list[Any]:
    return [m["params"]["progress"] for _, m in seen if m and m.get("method") == "notifications/progress"]


def test_a_durable_call_runs_on_celery_and_its_stream_is_primed_with_ids(client: MCPTestClient) -> None:
    started = time.monotonic()
    response = post(client, call_body("counted", {"n": 5}))
    assert response.mimetype == "text/event-stream"
    seen = events(client, response, lambda s: any(m and "result" in m for _, m in s))
    response.close()
    assert seen[0][1] is None and seen[0][0] is not None and seen[0][0].endswith("/0")  # the priming event
    assert all(event_id is not None for event_id, _ in seen)
    assert progress(seen) == [1, 2, 3, 4, 5]
    result = seen[-1][1]
    assert result["id"] == 7
    assert result["result"]["structuredContent"]["steps"] == 5
    assert result["result"]["structuredContent"]["thread"] != "flask-mcp-request"  # not the web side's thread
    assert time.monotonic() - started < 10


def test_a_durable_stream_cut_early_is_resumed_without_loss_or_repeat(client: MCPTestClient) -> None:
    response = post(client, call_body("counted", {"n": 8}))
    first = events(client, response, lambda s: len(progress(s)) >= 2)
    response.close()  # the window closes: the call goes on on Celery
    last_id = first[-1][0]
    assert last_id is not None
    resumed = get(client, last_id)
    assert resumed.status_code == 200
    rest = events(client, resumed, lambda s: any(m and "result" in m for _, m in s))
    resumed.close()
    assert progress(first) + progress(rest) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert rest[0] == (last_id, None)  # the resumed stream opens with the id it resumes from
    ids = [event_id for event_id, message in first + rest if message is not None]
    assert len(ids) == len(set(ids))
    assert rest[-1][1]["result"]["structuredContent"]["steps"] == 8


def test_a_durable_call_s_question_reaches_the_client_and_the_answer_the_celery_worker(
    client: MCPTestClient,
) -> None:
    asked: list[str] = []

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request["method"])
        return {"action": "accept", "content": {"name": "Ada"}}

    client.on_request = answer
    response = client.call_tool("greeted", {})
    assert asked == ["elicitation/create"]
    assert response.result["content"][0]["text"] == "Hello, Ada!"


def test_notifications_cancelled_stops_a_durable_call_on_its_celery_worker(client: MCPTestClient) -> None:
    response = post(client, call_body("waiting", {}, request_id=11))
    seen = events(client, response, lambda s: len(progress(s)) >= 1)
    assert client.notify("notifications/cancelled", {"requestId": 11}).status_code == 202
    rest = events(client, response, lambda s: False)  # the stream ends without an answer
    response.close()
    assert progress(seen) == [1]
    assert not any(m and "result" in m for _, m in rest)


def test_a_task_tool_s_legacy_call_is_durable_unless_it_opts_out(client: MCPTestClient) -> None:
    on_celery = client.call_tool("tasked", {}, meta={"progressToken": 1})
    local = client.call_tool("local", {}, meta={"progressToken": 1})
    assert on_celery.result["content"][0]["text"] != "flask-mcp-request"
    assert local.result["content"][0]["text"] == "flask-mcp-request"


def test_a_2025_03_26_session_runs_a_durable_tool_in_the_web_worker(
    make_client: Callable[..., MCPTestClient], durable_app: Flask
) -> None:
    old = connect(make_client, durable_app, "2025-03-26")
    response = old.call_tool("counted", {"n": 2}, meta={"progressToken": "p"})
    assert json.loads(response.result["content"][0]["text"])["thread"] == "flask-mcp-request"
    assert [m["params"]["progress"] for m in response.notifications] == [1, 2]


def test_a_durable_stream_is_let_go_with_retry_when_the_worker_drains(
    client: MCPTestClient, durable_app: Flask
) -> None:
    response = post(client, call_body("waiting", {}, request_id=12))
    seen = events(client, response, lambda s: len(progress(s)) >= 1)
    draining.begin()
    try:
        rest = b"".join(response.iter_encoded())
    finally:
        draining.end()
        response.close()
    assert b"retry:" in rest
    durable_app.extensions["test-release"].set()
    resumed = get(client, seen[-1][0])
    after = events(client, resumed, lambda s: any(m and "result" in m for _, m in s))
    resumed.close()
    assert after[-1][1]["result"]["content"][0]["text"] == "released"


def test_a_2025_06_18_session_s_durable_call_is_primed_and_resumable(
    make_client: Callable[..., MCPTestClient], durable_app: Flask
) -> None:
    client = connect(make_client, durable_app, "2025-06-18")
    response = post(client, call_body("counted", {"n": 4}))
    first = events(client, response, lambda s: len(progress(s)) >= 1)
    response.close()
    assert first[0][1] is None and first[0][0] is not None  # the priming event
    headers = {"Accept": "text/event-stream", "Last-Event-ID": first[-1][0] or "",
               "Mcp-Session-Id": client.session_id or "", "MCP-Protocol-Version": "2025-06-18"}
    resumed = client.client.get(client.url, headers=headers, buffered=False)
    rest = events(client, resumed, lambda s: any(m and "result" in m for _, m in s))
    resumed.close()
    assert progress(first) + progress(rest) == [1, 2, 3, 4]


def test_a_client_that_takes_no_event_stream_gets_a_durable_call_s_answer_as_json(client: MCPTestClient) -> None:
    body = call_body("counted", {"n": 3}, request_id=21)
    headers = {"Accept": "application/json", "Content-Type": "application/json",
               **client.standard_headers("tools/call", body["params"])}
    response = client.client.post(client.url, data=json.dumps(body), headers=headers)
    assert response.status_code == 200 and response.mimetype == "application/json"
    answer = response.get_json()
    assert answer["id"] == 21
    assert answer["result"]["structuredContent"]["steps"] == 3


def test_a_durable_call_the_queue_cannot_take_is_refused_with_503_and_its_stream_ends(
    make_client: Callable[..., MCPTestClient],
) -> None:
    app = app_without_a_queue(__name__)
    client = connect(make_client, app, LEGACY)
    response = post(client, call_body("slow", {}, request_id=31))
    assert response.status_code == 503 and response.headers["Retry-After"] == "1"
    error = json.loads(response.get_data())
    assert error["id"] == 31 and "task queue is unavailable" in error["error"]["message"]


def test_a_resumption_from_a_stale_id_does_not_send_progress_again(client: MCPTestClient) -> None:
    """What the official Python SDK does after a resumed stream was cut: it resumes
    from the id that stream started at. Progress a connection took is not sent twice;
    the rest (here the answer) is."""
    response = post(client, call_body("counted", {"n": 8}))
    first = events(client, response, lambda s: len(progress(s)) >= 1)
    response.close()
    stale = first[-1][0]
    assert stale is not None
    resumed = get(client, stale)
    middle = events(client, resumed, lambda s: len(progress(s)) >= 4)  # progress 2..5: 2..4 were taken
    resumed.close()
    again = get(client, stale)  # the same, stale, id
    rest = events(client, again, lambda s: any(m and "result" in m for _, m in s))
    again.close()
    assert progress(first) + progress(middle) == [1, 2, 3, 4, 5]
    assert progress(rest) == [5, 6, 7, 8]  # the last one taken had not been confirmed by a next read
    assert rest[-1][1]["result"]["structuredContent"]["steps"] == 8


def test_a_resumption_from_the_last_event_received_gets_progress_a_cut_connection_took(
    client: MCPTestClient,
) -> None:
    """A report the server wrote into a connection the network then cut never
    reached the client: a resumption from the last id the client did get (not
    one an earlier connection resumed from) gets it, and everything after."""
    response = post(client, call_body("counted", {"n": 8}))
    first = events(client, response, lambda s: len(progress(s)) >= 1)
    response.close()
    resumed = get(client, str(first[-1][0]))
    middle = events(client, resumed, lambda s: len(progress(s)) >= 3)  # progress 2, 3, 4 were written
    resumed.close()
    got = [(i, m) for i, m in middle if m and m.get("method") == "notifications/progress"]
    last_received = got[-2][0]  # the report of 4 was lost on the way
    rest_response = get(client, str(last_received))
    rest = events(client, rest_response, lambda s: any(m and "result" in m for _, m in s))
    rest_response.close()
    assert progress(first) + progress(middle) == [1, 2, 3, 4]
    assert progress(rest) == [4, 5, 6, 7, 8]
    assert rest[-1][1]["result"]["structuredContent"]["steps"] == 8
