"""Resumable streams (2025-11-25): the priming event, event ids, the event log,
``GET`` + ``Last-Event-ID``, ``ctx.close_stream()`` and ``MCP_SSE_POLL_AFTER``.
Across real workers: tests/e2e/test_e2e_streaming.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from conftest import connect
from flask import Flask

from flask_mcp import MCP, Context
from flask_mcp.testing import MCPTestClient, sse_event_id

LEGACY = "2025-11-25"
ASKS: dict[str, Any] = {"elicitation": {}}  # a client that can be asked: its calls are answered on a stream


def build_app(**config: Any) -> Flask:
    app = Flask(__name__)
    app.config.update({"MCP_BACKEND": "memory://", "TESTING": True, **config})
    mcp = MCP(app, name="resume", version="1.0")
    app.extensions["test-release"] = release = threading.Event()

    @mcp.tool
    def steps(n: int, ctx: Context) -> str:
        """Logs ``n`` steps."""
        for i in range(1, n + 1):
            ctx.info(f"step {i}")
        return f"{n} steps"

    @mcp.tool
    def hand_off(ctx: Context) -> str:
        """Logs, lets the connection go, logs again, then answers."""
        ctx.info("before")
        closed = ctx.close_stream(retry_ms=50)
        ctx.info("after")
        return f"closed={closed}"

    @mcp.tool
    def quiet_hand_off(ctx: Context) -> str:
        """Lets the connection go before sending anything."""
        closed = ctx.close_stream()
        return f"closed={closed}"

    @mcp.tool
    def ticks(ctx: Context) -> str:
        """Ten progress reports, 30 ms apart."""
        for i in range(1, 11):
            ctx.report_progress(i, 10)
            time.sleep(0.03)
        return "ticked"

    @mcp.tool
    def held(ctx: Context) -> str:
        """Lets the connection go, then waits until released or cancelled."""
        ctx.close_stream()
        while not release.wait(0.02):
            ctx.check_cancelled()
        return "released"

    return app


@pytest.fixture
def app() -> Flask:
    return build_app()


@pytest.fixture
def client(make_client: Callable[..., MCPTestClient], app: Flask) -> MCPTestClient:
    client = connect(make_client, app, LEGACY, capabilities=ASKS)
    assert client.request("logging/setLevel", {"level": "info"}).status_code == 200
    return client


def blocks(body: bytes) -> list[bytes]:
    return [block for block in body.replace(b"\r\n", b"\n").split(b"\n\n") if block.strip()]


def fields(block: bytes, name: str) -> list[str]:
    prefix = name.encode() + b":"
    return [line[len(prefix) :].strip().decode() for line in block.split(b"\n") if line.startswith(prefix)]


def logs(messages: list[dict[str, Any]]) -> list[Any]:
    return [m["params"]["data"] for m in messages if m.get("method") == "notifications/message"]


def text(messages: list[dict[str, Any]]) -> str:
    result = [m for m in messages if "result" in m]
    assert len(result) == 1, messages
    return str(result[0]["result"]["content"][0]["text"])


def resume(client: MCPTestClient, last_event_id: str, session_id: str | None = None) -> Any:
    headers = {
        "Accept": "text/event-stream",
        "Last-Event-ID": last_event_id,
        "Mcp-Session-Id": session_id or client.session_id or "",
        "MCP-Protocol-Version": client.negotiated_version or LEGACY,
    }
    return client.client.get(client.url, headers=headers)


def test_a_2025_11_25_stream_opens_with_a_priming_event_and_every_event_has_an_id(client: MCPTestClient) -> None:
    response = client.call_tool("steps", {"n": 3})
    assert response.resumptions == 0
    events = blocks(response.http.data)
    priming = events[0]
    (first_id,) = fields(priming, "id")
    assert fields(priming, "retry") == ["1000"]  # MCP_SSE_RETRY_MS
    assert fields(priming, "data") == [""]
    stream, _, seq = first_id.partition("/")
    assert seq == "0"
    ids = [fields(block, "id") for block in events[1:]]
    assert ids == [[f"{stream}/{n}"] for n in range(1, 5)]  # three logs, then the result
    assert logs(response.messages) == ["step 1", "step 2", "step 3"]
    assert text(response.messages) == "3 steps"


@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26", "2026-07-28"])
def test_other_revisions_get_no_priming_event_and_no_ids(
    make_client: Callable[..., MCPTestClient], app: Flask, version: str
) -> None:
    """Priming events break clients older than 2025-11-25; 2026-07-28 has no resumption."""
    client = connect(make_client, app, version, capabilities=ASKS)
    if version == "2026-07-28":
        response = client.call_tool("steps", {"n": 2}, meta={"io.modelcontextprotocol/logLevel": "info"})
    else:
        assert client.request("logging/setLevel", {"level": "info"}).status_code == 200
        response = client.call_tool("steps", {"n": 2})
    assert response.http.mimetype == "text/event-stream"
    events = blocks(response.http.data)
    assert all(not fields(block, "id") and not fields(block, "retry") for block in events), events
    assert logs(response.messages) == ["step 1", "step 2"]


def test_a_call_that_lets_its_connection_go_is_completed_on_a_resumed_stream(client: MCPTestClient) -> None:
    response = client.call_tool("hand_off")
    assert response.resumptions == 1
    assert fields(blocks(response.http.data)[-1], "retry") == ["50"]  # the POST stream's last words
    assert logs(response.messages) == ["before", "after"]
    assert text(response.messages) == "closed=True"


def test_letting_the_connection_go_before_any_message_still_primes_the_stream(client: MCPTestClient) -> None:
    response = client.call_tool("quiet_hand_off")
    post_events = blocks(response.http.data)
    assert len(post_events) == 2 and fields(post_events[0], "data") == [""], post_events  # priming, then retry
    assert fields(post_events[1], "retry") == ["1000"]
    assert response.resumptions == 1
    assert text(response.messages) == "closed=True"


def test_a_get_with_last_event_id_replays_exactly_what_came_after_it(client: MCPTestClient) -> None:
    response = client.call_tool("steps", {"n": 3})
    ids = [fields(block, "id")[0] for block in blocks(response.http.data)]
    replay = resume(client, ids[2])  # after "step 2"
    assert replay.status_code == 200 and replay.mimetype == "text/event-stream"
    assert replay.headers["Cache-Control"] == "no-cache"
    opening, *replayed = blocks(replay.data)
    # It opens with the id it resumes from (no message: a client that keeps its token per
    # connection has one at once), then exactly what came after it.
    assert fields(opening, "id") == [ids[2]] and fields(opening, "data") == [""]
    assert [fields(block, "id")[0] for block in replayed] == ids[3:]
    everything = resume(client, ids[0])  # from the priming event: every message
    assert [fields(block, "id")[0] for block in blocks(everything.data)] == ids[:1] + ids[1:]


def test_a_stream_is_only_found_with_the_session_that_opened_it(
    make_client: Callable[..., MCPTestClient], app: Flask, client: MCPTestClient
) -> None:
    response = client.call_tool("steps", {"n": 1})
    last = fields(blocks(response.http.data)[-1], "id")[0]
    other = connect(make_client, app, LEGACY, capabilities=ASKS)
    refused = resume(client, last, session_id=other.session_id)
    assert refused.status_code == 400
    assert refused.json["error"]["code"] == -32600
    assert "Last-Event-ID" in refused.json["error"]["message"]


@pytest.mark.parametrize("last_event_id", ["not-an-id", "AAAAAAAAAAAAAAAA/0", "x" * 200, ""])
def test_an_unknown_or_malformed_last_event_id_is_a_clear_400(client: MCPTestClient, last_event_id: str) -> None:
    response = resume(client, last_event_id)
    assert response.status_code == 400
    assert response.json["error"]["code"] == -32600
    assert "send the request again" in response.json["error"]["message"]


def test_a_get_without_last_event_id_is_405_and_one_for_an_ended_session_is_404(client: MCPTestClient) -> None:
    response = client.call_tool("steps", {"n": 1})
    last = fields(blocks(response.http.data)[-1], "id")[0]
    plain = client.client.get(client.url, headers={"Accept": "text/event-stream", "Mcp-Session-Id": client.session_id})
    assert plain.status_code == 405
    assert client.delete().status_code == 200
    assert resume(client, last).status_code == 404


def test_a_2025_06_18_session_has_no_stream_to_resume(make_client: Callable[..., MCPTestClient], app: Flask) -> None:
    client = connect(make_client, app, "2025-06-18", capabilities=ASKS)
    response = client.call_tool("hand_off")
    assert text(response.messages) == "closed=False"  # nothing to resume, so the connection stays
    assert response.resumptions == 0
    assert resume(client, "AAAAAAAAAAAAAAAA/0").status_code == 400


def test_close_stream_is_refused_on_2026_07_28(make_client: Callable[..., MCPTestClient], app: Flask) -> None:
    client = connect(make_client, app, "2026-07-28")
    response = client.call_tool("hand_off", meta={"io.modelcontextprotocol/logLevel": "info"})
    assert text(response.messages) == "closed=False"
    assert logs(response.messages) == ["before", "after"]


def test_a_backend_without_an_event_log_streams_without_priming(make_client: Callable[..., MCPTestClient]) -> None:
    cachelib = pytest.importorskip("cachelib")
    app = build_app(MCP_BACKEND=cachelib.SimpleCache())
    client = connect(make_client, app, LEGACY, capabilities=ASKS)
    assert client.request("logging/setLevel", {"level": "info"}).status_code == 200
    response = client.call_tool("hand_off")
    assert text(response.messages) == "closed=False"
    assert not any(fields(block, "id") for block in blocks(response.http.data))


def test_poll_after_lets_long_streams_go_and_nothing_is_lost_or_repeated(
    make_client: Callable[..., MCPTestClient],
) -> None:
    app = build_app(MCP_SSE_POLL_AFTER=0.05, MCP_SSE_RETRY_MS=10)
    client = connect(make_client, app, LEGACY, capabilities=ASKS)
    response = client.call_tool("ticks", meta={"progressToken": "t"})
    assert response.resumptions >= 2  # 300 ms of work, connections let go every 50 ms
    progress = [m["params"]["progress"] for m in response.messages if m.get("method") == "notifications/progress"]
    assert progress == list(range(1, 11))
    assert text(response.messages) == "ticked"


def test_a_resumed_stream_of_a_cancelled_call_ends_without_an_answer(app: Flask, client: MCPTestClient) -> None:
    """The follower must not wait for a result that will never come."""
    client.max_resumptions = 0  # resume by hand, after the cancellation
    response = client.call_tool("held", id="held-1")
    last = client.last_event_id
    assert last is not None and response.messages == []
    client.notify("notifications/cancelled", {"requestId": "held-1", "reason": "test"})
    replay = resume(client, last)
    assert replay.status_code == 200
    assert [fields(block, "data") for block in blocks(replay.data) if any(fields(block, "data"))] == []


def test_a_follower_receives_events_written_after_it_started(app: Flask, client: MCPTestClient) -> None:
    """A GET that arrives while the call still runs replays, then follows live."""
    client.max_resumptions = 0
    client.call_tool("held", id="held-2")
    last = client.last_event_id
    assert last is not None
    timer = threading.Timer(0.2, app.extensions["test-release"].set)
    timer.start()
    try:
        replay = resume(client, last)
        data = replay.data  # read while the timer may still release the tool
    finally:
        timer.cancel()
    assert replay.status_code == 200
    results = [b for b in blocks(data) if b"released" in b]
    assert len(results) == 1 and sse_event_id(results[0]) is not None
